"""The real Qwen2.5-Coder-0.5B demo model (Q5_0/Q8_0/Q4_K/Q6_K mix) against the numpy reference.

Exact mode: the 20-token prompt's logits within 1e-2 of the fp32 reference (typically
~1e-4; logits are ~10-20 in size) and the same greedy continuation. Fast mode (int8
activations): the reference's top-1 token at >= 90% of 100 teacher-forced positions.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from engine.gguf import open_model
from engine.reference import ReferenceWeights, forward, greedy
from engine.runtime.decoder import DecoderSession

pytestmark = pytest.mark.slow

# "<|im_start|>user\nWrite a Python function to compute the factorial of a number.<|im_end|>\n
#  <|im_start|>assistant\n" in Qwen2.5's vocabulary
PROMPT = [151644, 872, 198, 7985, 264, 13027, 729, 311, 12564, 279, 52962, 315, 264, 1372, 13,
          151645, 198, 151644, 77091, 198]
GREEDY_TOKENS = 12
FORCED_TOKENS = 100


@pytest.fixture(scope="module")
def model(demo_05b):
    return open_model(demo_05b)


@pytest.fixture(scope="module")
def exact(model):
    """One exact session for the module: building it pre-packs fp32 weights (~20 s, ~4 GB)."""
    return DecoderSession(model, exact=True, max_cache_len=len(PROMPT) + FORCED_TOKENS + 1)


def test_exact_mode_matches_reference_and_its_greedy_path(model, exact):
    weights = ReferenceWeights(model, keep=True)
    expected = forward(model, PROMPT, weights=weights).logits[-1]
    reference_tokens = greedy(model, PROMPT, GREEDY_TOKENS, weights=weights)
    del weights
    gc.collect()

    exact.reset()
    step = exact.forward(input_ids=PROMPT)
    delta = float(np.abs(step.logits - expected).max())
    print(f"\n0.5B exact mode, 20-token prompt: max |delta logits| = {delta:.2e}")
    assert delta < 1e-2
    tokens = []
    for _ in range(GREEDY_TOKENS):
        tokens.append(int(step.logits.argmax()))
        step = exact.forward(input_ids=tokens[-1:])
    assert tokens == reference_tokens


def test_fast_mode_top1_agreement_under_teacher_forcing(model, exact):
    exact.reset()
    step = exact.forward(input_ids=PROMPT)
    text = list(PROMPT)
    for _ in range(FORCED_TOKENS):  # a continuation the model itself finds likely
        text.append(int(step.logits.argmax()))
        step = exact.forward(input_ids=text[-1:])

    expected = forward(model, text).logits[len(PROMPT) - 1:-1].argmax(-1)  # [FORCED_TOKENS]
    fast = DecoderSession(model, max_cache_len=len(text), all_logits=True)
    got = fast.forward(input_ids=text).logits[len(PROMPT) - 1:-1].argmax(-1)
    agreement = float((got == expected).mean())
    print(f"\n0.5B fast mode, teacher-forced top-1 agreement over {FORCED_TOKENS}: {agreement:.0%}")
    assert agreement >= 0.9
