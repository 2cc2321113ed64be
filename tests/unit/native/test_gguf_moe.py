"""lantern.GgufMoE (engine.graph.moe.expert_matmul) against de-quantize-then-matmul per
expert, and against GgufMatMul with the same expert chosen by index.

Each output row [t, s] is x's row for (t, s) times expert ids[t, s]'s matrix; the op groups
rows by expert, which must not change a single bit of any row (a token's result does not
depend on which other tokens share the step), and reads the file's bytes in place.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

from engine.graph.builder import GraphBuilder, feed_in_place
from engine.graph.linear import GgufWeight
from engine.graph.moe import ExpertWeights, expert_matmul
from engine.native import custom_ops
from tests.unit.native.test_gguf_matmul import activations, mapped, random_raw, session

OPS = custom_ops()
pytestmark = pytest.mark.skipif(not OPS.available, reason=f"no custom-op library: {OPS.why}")

EXPERTS, N, K = 6, 70, 256  # 70 columns: a full chunk of 64 and a short one


def moe_session(weight: ExpertWeights, *, fast: bool, per_slot: bool):
    g = GraphBuilder("moe")
    y = expert_matmul(g, "x", weight, "ids", "w", fast=fast)
    x_shape = [1, "S", "K", weight.matrix.k] if per_slot else [1, "S", weight.matrix.k]
    model = g.make_model([("x", np.float32, x_shape), ("ids", np.int64, [1, "S", "K"])],
                         [(y, np.float32, None)])
    options = ort.SessionOptions()
    options.register_custom_ops_library(str(OPS.path))
    options.intra_op_num_threads = 2
    values = feed_in_place(options, g.in_place)
    return ort.InferenceSession(model.SerializeToString(), options), values


def chosen(tokens: int, top_k: int, seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.choice(EXPERTS, top_k, replace=False)
                     for _ in range(tokens)])[None].astype(np.int64)  # [1, S, K]


@pytest.mark.parametrize("fast", [False, True], ids=["exact", "fast"])
@pytest.mark.parametrize("qtype", [T.F32, T.Q8_0, T.Q4_K, T.Q6_K], ids=lambda t: t.name)
def test_each_row_is_its_experts_matmul(qtype, fast, tmp_path):
    raw = random_raw(qtype, EXPERTS * N, K)
    experts = ExpertWeights(GgufWeight(qtype, N, K, mapped(raw, tmp_path)), EXPERTS)
    sess, _values = moe_session(experts, fast=fast, per_slot=False)
    tokens, top_k = 5, 2
    x, ids = activations(tokens, K), chosen(tokens, top_k)
    y = sess.run(None, {"x": x, "ids": ids})[0]
    assert y.shape == (1, tokens, top_k, N) and y.dtype == np.float32
    # GgufMatMul with the expert index computes each row the same way: the same bits
    one, _one_values, _, _ = session(GgufWeight(qtype, N, K, experts.matrix.raw), fast=fast,
                                     experts=EXPERTS)
    for t in range(tokens):
        for s in range(top_k):
            alone = one.run(None, {"x": x[:, t:t + 1], "e": ids[0, t, s:s + 1]})[0]
            assert alone.reshape(-1).tobytes() == y[0, t, s].tobytes()
    if not fast:  # exact mode: gguf.quants.dequantize's values, float32 accumulation
        w = dequantize(raw, qtype).reshape(EXPERTS, N, K).astype(np.float64)
        want = np.einsum("tk,tsnk->tsn", x[0].astype(np.float64), w[ids[0]])
        scale = np.einsum("tk,tsnk->tsn", np.abs(x[0]).astype(np.float64), np.abs(w[ids[0]]))
        assert (np.abs(y[0] - want) <= 1e-5 * scale + 1e-30).all()


@pytest.mark.parametrize("fast", [False, True], ids=["exact", "fast"])
def test_a_row_per_slot_and_a_token_alone_give_the_same_bits(fast, tmp_path):
    """The down projection's input has a row per chosen expert; a token's rows come out as
    when it runs alone (a decode step), whatever the other tokens chose."""
    raw = random_raw(T.Q4_K, EXPERTS * N, K)
    experts = ExpertWeights(GgufWeight(T.Q4_K, N, K, mapped(raw, tmp_path)), EXPERTS)
    sess, _values = moe_session(experts, fast=fast, per_slot=True)
    tokens, top_k = 4, 3
    ids = chosen(tokens, top_k)
    x = np.random.default_rng(3).standard_normal((1, tokens, top_k, K)).astype(np.float32)
    y = sess.run(None, {"x": x, "ids": ids})[0]
    w = dequantize(raw, T.Q4_K).reshape(EXPERTS, N, K)
    for t in range(tokens):
        alone = sess.run(None, {"x": x[:, t:t + 1], "ids": ids[:, t:t + 1]})[0]
        assert alone.tobytes() == y[:, t:t + 1].tobytes()
        for s in range(top_k):
            want = w[ids[0, t, s]].astype(np.float64) @ x[0, t, s].astype(np.float64)
            assert np.abs(y[0, t, s] - want).max() < (0.05 if fast else 1e-4) * np.abs(want).max()


def test_wrong_inputs_say_what_is_wrong(tmp_path):
    raw = random_raw(T.Q8_0, EXPERTS * N, K)
    experts = ExpertWeights(GgufWeight(T.Q8_0, N, K, mapped(raw, tmp_path)), EXPERTS)
    sess, _values = moe_session(experts, fast=False, per_slot=False)
    x = activations(2, K)
    with pytest.raises(Exception, match="expert id 6 is outside 0..5"):
        sess.run(None, {"x": x, "ids": np.array([[[0, 6], [1, 2]]], np.int64)})
    with pytest.raises(Exception, match="x's dimension 1 is 2, ids' is 3"):
        sess.run(None, {"x": x, "ids": np.zeros((1, 3, 2), np.int64)})
