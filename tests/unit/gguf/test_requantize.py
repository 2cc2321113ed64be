"""Opt-in 4-bit re-quantization: close to the GGUF's weights, labelled, never the default.

Per weight: the rounding error of min/max 4-bit blocks is at most half a step. Per model:
a requantized session stays close to the exact one on a tiny model and, on the real 0.5B
demo model, agrees with exact mode's top-1 token at most teacher-forced positions
(measured with block 32: 97% on this test's 163 tokens, 88% on 400 tokens of Lantern's
own source). The default session's weights are still exactly ``pack``'s.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import GenerationError
from engine.gguf import open_model
from engine.gguf.repack import pack, unpack
from engine.gguf.requantize import Requantization, quantize_blocks, requantize
from engine.graph import decoder as graph
from engine.runtime.decoder import DecoderSession
from tests.fixtures.synthetic_gguf import T, TextSpec, write_model
from tests.unit.gguf.test_repack import random_tensor

SPEC = TextSpec(hidden=256, heads=4, kv_heads=2, ffn=256, layers=2)
PROMPT = [5, 71, 300, 12, 99, 250, 3]


@pytest.mark.parametrize("block", [32, 64, 128])
@pytest.mark.parametrize("qtype", [T.Q5_0, T.Q8_0, T.Q4_K, T.Q6_K, T.F16])
def test_requantized_weight_is_within_half_a_step(qtype, block):
    t = random_tensor(qtype, (48, 512), seed=3)
    exact = unpack(pack(t))                                       # [n, k]
    p = requantize(t, Requantization(block_size=block))
    assert (p.bits, p.block_size, p.requantized) == (4, block, True)
    assert p.data.shape == (48, 512 // block, block // 2)
    got = unpack(p)
    step = p.scales.reshape(48, -1, 1)                             # [n, kb, 1]
    error = np.abs(got - exact).reshape(48, -1, block)
    assert np.all(error <= step / 2 * (1 + 1e-5) + 1e-12)
    assert not np.array_equal(got, exact)  # it really is a different weight


def test_zero_stays_exact_and_constant_blocks_survive():
    w = np.zeros((2, 3, 32), np.float32)
    w[1, 1] = np.linspace(-1.0, 2.0, 32)
    w[1, 2] = 0.5  # constant positive block: range widened to hold 0
    codes, scales, zero = quantize_blocks(w)
    back = (codes.astype(np.float32) - zero[..., None]) * scales[..., None]
    np.testing.assert_array_equal(back[0], 0.0)
    np.testing.assert_allclose(back[1, 2], 0.5, rtol=1e-6)
    assert np.abs(back[1, 1] - w[1, 1]).max() <= scales[1, 1] / 2 * (1 + 1e-6)


def test_parse_and_label():
    assert Requantization.parse("q4") == Requantization(32)
    assert Requantization.parse("Q4/128").block_size == 128
    assert "NOT the GGUF's exact weights" in Requantization(64).label
    for bad in ("q3", "q4/48", "int4"):
        with pytest.raises(ValueError, match="q4/64"):
            Requantization.parse(bad)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = write_model(tmp_path_factory.mktemp("rq") / "m.gguf", "qwen2", SPEC,
                       default_type=T.Q5_0, types={"ffn_down": T.Q4_K})
    return open_model(path)


def test_requantized_session_is_labelled_and_close(tiny):
    exact = DecoderSession(tiny, exact=True, max_cache_len=16).forward(input_ids=PROMPT).logits
    session = DecoderSession(tiny, max_cache_len=16, requantize="q4")
    assert session.weights == Requantization().label
    logits = session.forward(input_ids=PROMPT).logits
    # random weights have no redundancy: 4-bit moves these logits ~40% (a wiring error,
    # e.g. misplaced zero points, leaves them uncorrelated)
    assert np.corrcoef(logits, exact)[0, 1] > 0.85
    with pytest.raises(GenerationError, match="exact"):
        DecoderSession(tiny, exact=True, requantize="q4")


def test_default_graph_carries_the_exact_packed_weights(tiny):
    """No requantization unless asked: every 4-bit code array is pack()'s own."""
    built = graph.build_decoder(tiny, graph.DecoderOptions(max_cache_len=16))
    down = pack(tiny.tensors["blk.0.ffn_down.weight"])
    np.testing.assert_array_equal(built.external["blk.0.ffn.down.qweight"], down.data)
    assert DecoderSession(tiny, max_cache_len=16).weights == "exact GGUF weights"
    requantized = graph.build_decoder(
        tiny, graph.DecoderOptions(max_cache_len=16, requantize=Requantization()))
    assert not np.array_equal(requantized.external["blk.0.ffn.down.qweight"], down.data)


@pytest.mark.slow
def test_demo_05b_teacher_forced_agreement(demo_05b):
    """Top-1 of q4 (block 32) against exact mode over a natural text of ~250 tokens."""
    from engine.tokenizer import load_tokenizer

    model = open_model(demo_05b)
    text = (
        "def fibonacci(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
        "    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\n"
        "class Stack:\n    def __init__(self):\n        self.items = []\n\n"
        "    def push(self, item):\n        self.items.append(item)\n\n"
        "    def pop(self):\n        return self.items.pop()\n\n"
        "Photosynthesis is the process by which green plants use sunlight to make food from "
        "carbon dioxide and water. It takes place mainly in the leaves, where chlorophyll "
        "absorbs light. In 1969 the Apollo 11 mission landed the first people on the Moon, "
        "and the quick brown fox still jumps over the lazy dog every time a font is tested."
    )
    ids = load_tokenizer(demo_05b).encode(text)
    exact = DecoderSession(model, exact=True, max_cache_len=len(ids), all_logits=True)
    want = exact.forward(input_ids=ids).logits.argmax(-1)
    del exact
    fast = DecoderSession(model, max_cache_len=len(ids), all_logits=True, requantize="q4")
    got = fast.forward(input_ids=ids).logits.argmax(-1)
    agreement = float((got == want).mean())
    print(f"\n0.5B q4 re-quantized, top-1 agreement with exact over {len(ids)}: {agreement:.0%}")
    assert agreement >= 0.9
