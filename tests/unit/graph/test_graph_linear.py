"""The linear layer on ONNX Runtime equals x @ dequantize(W).T, for every GGUF type.

accuracy_level 0 (float activations) must agree within float32 accumulation error,
measured per output against sum_k |x||w|; accuracy_level 4 (int8 activations) within the
error of rounding x to 8 bits per block (measured: 0.3-1.5% of the output norm).
Also the builder: unique names, weights outside the protobuf, a saved copy that loads.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

from engine.gguf.repack import pack, unpack
from engine.graph.builder import INLINE_BYTES, GraphBuilder, create_session, save_model
from engine.graph.kernels import fold_zero_points
from engine.graph.linear import linear, matmul_nbits
from tests.unit.gguf.test_repack import (
    DEQUANTIZED,
    EXACT,
    FLOATS,
    FakeTensor,
    random_tensor,
    reference,
)

K_QUANTS = (T.Q4_K, T.Q5_K, T.Q6_K, T.Q2_K, T.Q3_K)


def run_linear(weight, x, *, accuracy_level, bias=None, build=linear, float_dtype=np.float32):
    g = GraphBuilder("test")
    y = build(g, "x", weight, "blk.0.ffn_up", accuracy_level=accuracy_level, bias=bias,
              float_dtype=float_dtype)
    model = g.make_model([("x", float_dtype, [None] * (x.ndim - 1) + [x.shape[-1]])],
                         [(y, float_dtype, None)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return create_session(model, g.external, options).run(None, {"x": x})[0], model


def expected(x, w, bias=None):
    """x @ w.T (+ bias) in float64, and sum_k |x||w| (+ |bias|), which scales float32
    rounding."""
    y = x.astype(np.float64) @ w.T.astype(np.float64)
    bound = np.abs(x) @ np.abs(w).T.astype(np.float64)
    if bias is None:
        return y, bound
    return y + bias, bound + np.abs(bias)


def weight_and_input(qtype, seed=0, rows=48):
    k = 512 if qtype in K_QUANTS else 96
    t = random_tensor(qtype, (rows, k), seed)
    x = np.random.default_rng(seed).standard_normal((2, 3, k)).astype(np.float32)
    return t, x


@pytest.mark.parametrize("build", [linear, matmul_nbits], ids=["linear", "matmul_nbits"])
@pytest.mark.parametrize("qtype", list(EXACT), ids=lambda t: t.name)
def test_exact_formats_match_dequantize(qtype, build):
    t, x = weight_and_input(qtype)
    bias = np.random.default_rng(1).standard_normal(t.shape[0]).astype(np.float32)
    got, _ = run_linear(pack(t), x, accuracy_level=0, bias=bias, build=build)
    want, bound = expected(x, reference(t), bias)
    assert got.shape == (2, 3, t.shape[0])
    np.testing.assert_array_less(np.abs(got - want), 1e-5 * bound + 1e-30)


@pytest.mark.parametrize("qtype", [*DEQUANTIZED, *FLOATS], ids=lambda t: t.name)
def test_dense_formats_match_dequantize(qtype):
    t, x = weight_and_input(qtype)
    got, model = run_linear(pack(t), x, accuracy_level=4)
    want, bound = expected(x, reference(t))
    np.testing.assert_array_less(np.abs(got - want), 1e-5 * bound + 1e-30)
    assert [n.op_type for n in model.graph.node] == ["MatMul"]


@pytest.mark.parametrize("qtype", list(EXACT), ids=lambda t: t.name)
def test_int8_activations_stay_close(qtype):
    t, x = weight_and_input(qtype, rows=64)
    got, model = run_linear(pack(t), x, accuracy_level=4)
    want, _ = expected(x, reference(t))
    error = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert error < 0.03, f"{qtype.name}: relative error {error:.2e} with int8 activations"
    assert "MatMulNBits" in [n.op_type for n in model.graph.node]


def test_8bit_weights_run_dense_with_float_activations():
    """8-bit MatMulNBits has no float kernel (it de-quantizes per call): linear goes dense."""
    t, x = weight_and_input(T.Q8_0)
    p = pack(t)
    ops = {level: [n.op_type for n in run_linear(p, x, accuracy_level=level)[1].graph.node]
           for level in (0, 4)}
    assert ops == {0: ["MatMul"], 4: ["MatMulNBits"]}


@pytest.mark.parametrize("qtype", list(EXACT), ids=lambda t: t.name)
def test_folded_zero_points_are_the_same_weights(qtype):
    """engine.graph.kernels, 2.: Q4_K and Q4_1 lose their zero-point input (8 * scale moves
    into the offsets) with the same weights up to float32 rounding; other formats stay."""
    t, x = weight_and_input(qtype)
    packed = pack(t)
    folded = fold_zero_points(packed)
    if qtype not in (T.Q4_K, T.Q4_1):
        assert folded is packed
        return
    assert folded.zero_points is None and packed.zero_points is not None
    w = unpack(packed)
    np.testing.assert_allclose(unpack(folded), w, rtol=0, atol=1e-6 * np.abs(w).max())
    got, _ = run_linear(folded, x, accuracy_level=0)
    want, bound = expected(x, w)
    assert np.all(np.abs(got - want) <= 1e-5 * bound + 1e-6)


def test_offset_term_handles_rank_2_input():
    t, x = weight_and_input(T.Q4_K)
    got, _ = run_linear(pack(t), x[0], accuracy_level=0)
    want, bound = expected(x[0], reference(t))
    np.testing.assert_array_less(np.abs(got - want), 1e-5 * bound + 1e-30)


def test_float16_graph_with_fp16_scales_is_exact_per_weight():
    values = np.random.default_rng(2).standard_normal((48, 96)).astype(np.float32) * 0.05
    t = FakeTensor("w", T.Q4_0, values.shape, quantize(values, T.Q4_0))
    x = np.random.default_rng(3).standard_normal((2, 3, 96)).astype(np.float16)
    got, _ = run_linear(pack(t), x, accuracy_level=0, float_dtype=np.float16)
    want, bound = expected(x.astype(np.float32), reference(t))
    assert got.dtype == np.float16
    np.testing.assert_array_less(np.abs(got - want), 2e-3 * bound + 1e-3)


def test_builder_names_and_external_weights(tmp_path):
    g = GraphBuilder("tiny")
    big = np.arange(INLINE_BYTES, dtype=np.float32).reshape(-1, 4)   # [256, 4]: external
    w = g.add_initializer("w", big)
    w2 = g.add_initializer("w", np.ones((2, 4), np.float32))         # small: inline
    assert (w, w2) == ("w", "w_1")
    [h] = g.add_node("MatMul", ["x", w2])
    [y] = g.add_node("Gather", [w, "ids"], ["rows"], axis=0, unused=None)
    [z] = g.add_node("MatMul", [y, h], ["rows"])
    assert (h, y, z) == ("MatMul", "rows", "rows_1")
    model = g.make_model([("x", np.float32, [None, 2]), ("ids", np.int64, [None])],
                         [(z, np.float32, None)])
    assert model.ir_version == 10
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 21), ("com.microsoft", 1)}
    assert list(g.external) == ["w"] and model.ByteSize() < 1024   # the weights stay out
    feed = {"x": np.ones((4, 2), np.float32), "ids": np.array([3, 0])}
    in_memory = create_session(model, g.external).run(None, feed)[0]
    save_model(model, g.external, tmp_path / "tiny.onnx")
    assert (tmp_path / "tiny.weights").stat().st_size == big.nbytes
    from_disk = ort.InferenceSession(str(tmp_path / "tiny.onnx")).run(None, feed)[0]
    np.testing.assert_array_equal(in_memory, from_disk)
    np.testing.assert_array_equal(in_memory, big[[3, 0]] @ (np.ones((4, 2)) @ np.ones((2, 4))))


def test_graph_input_may_not_shadow_a_node_output():
    g = GraphBuilder()
    [y] = g.add_node("Relu", ["x"], ["x2"])
    with pytest.raises(ValueError, match="x2"):
        g.make_model([("x2", np.float32, [1])], [(y, np.float32, None)])
