"""The numpy reference against HF transformers on the real Qwen2.5-Coder demo GGUFs.

HF's side comes from tests/hf_oracle.py (fp32, the same GGUF; loaded once per test
session and shared with tests/integration/test_engine_vs_hf.py): for a chat prompt plus its 32-token
greedy path, every layer's hidden states and the logits at the 32 positions that chose
the path. The reference, run over the same tokens, must match every layer, those logits
and their top-1 tokens (so its greedy path is HF's too). 0.5B: three prompts (English,
Chinese, code); 1.5B: the Chinese one, with weights de-quantized block by block (holding
them all would take ~6 GB).
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.gguf import GGUFModel, open_model
from engine.reference import ReferenceWeights, forward
from tests.hf_oracle import PromptRun, hf_oracle
from tests.unit.reference.test_reference_hf import assert_layers_close

pytestmark = pytest.mark.slow

LAYER_RTOL = 1e-4  # of each layer's max |value|; measured ~4e-7 (0.5B)
LOGIT_ATOL = 5e-3  # measured max |diff| ~4e-4 (0.5B)


def check_against_hf(label: str, model: GGUFModel, weights: ReferenceWeights,
                     run: PromptRun) -> None:
    assert run.hf_hidden is not None, "the oracle keeps hidden states of short prompts only"
    ref = forward(model, run.sequence, weights=weights)
    assert_layers_close(run.hf_hidden, ref.hidden_states, rtol=LAYER_RTOL)
    logits = ref.logits[-len(run.path):]  # [N, V] at the positions that chose the path
    delta = float(np.abs(logits - run.hf_logits).max())
    print(f"\n{label}: {len(run.sequence)} tokens, every layer within {LAYER_RTOL:g} of HF, "
          f"max |delta logit| {delta:.1e}")
    assert delta < LOGIT_ATOL
    assert logits.argmax(-1).tolist() == run.hf_tokens


class TestQwen05B:
    @pytest.fixture(scope="class")
    @classmethod
    def demo(cls, demo_05b):
        model = open_model(demo_05b)
        return model, ReferenceWeights(model, keep=True), hf_oracle(demo_05b)

    @pytest.mark.parametrize("prompt", ["english", "chinese", "code"])
    def test_layers_logits_and_greedy_path(self, demo, prompt):
        model, weights, oracle = demo
        check_against_hf(f"0.5B reference {prompt}", model, weights, oracle.runs[prompt])


class TestQwen15B:
    @pytest.fixture(scope="class")
    @classmethod
    def demo(cls, demo_15b):
        return open_model(demo_15b), hf_oracle(demo_15b)

    def test_layers_logits_and_greedy_path(self, demo):
        model, oracle = demo
        lazy = ReferenceWeights(model)  # one forward: nothing worth holding between blocks
        check_against_hf("1.5B reference chinese", model, lazy, oracle.runs["chinese"])
