"""The ONNX nodes of one linear layer ``y = x @ W.T (+ bias)``.

A GgufWeight (the GGUF tensor's bytes as they lie in the file) goes to Lantern's own op,
lantern.GgufMatMul (engine/native, ARCHITECTURE.md §3): nothing is repacked or copied.
Without that library (or on CUDA/CoreML) a PackedWeight goes to com.microsoft.MatMulNBits.
Quantized PackedWeights go to MatMulNBits. Formats with a per-sub-block offset
(Q4_1, Q5_1: +m; Q4_K, Q5_K: -dmin*m) add ``sum_sub(x) @ offsets.T``: x is reshaped into
sub-blocks [..., k/ob, ob], summed over each, and multiplied by the small [k/ob, n] offset
matrix. Dense weights (F16/BF16/F32 and de-quantized formats) use a plain MatMul.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from engine import native
from engine.gguf.repack import PackedWeight, unpack
from engine.graph.builder import GraphBuilder

INT8_ACTIVATIONS = 4  # MatMulNBits accuracy_level that quantizes x to int8 per block
EXACT_MODE, FAST_MODE = 0, 1  # GgufMatMul's modes: float activations / 8-bit per block


@dataclass(frozen=True)
class GgufWeight:
    """A weight [n, k] as the GGUF stores it: ``raw`` views the memory-mapped file's n rows
    of blocks (uint8 [n, row_bytes]); GgufMatMul reads it there."""

    ggml_type: int
    n: int
    k: int
    raw: np.ndarray

    def rows(self, start: int, stop: int) -> GgufWeight:
        """Rows start..stop (a file that stores q|k|v or gate|up as one tensor): a view."""
        return GgufWeight(self.ggml_type, stop - start, self.k, self.raw[start:stop])


@dataclass(frozen=True)
class RowsApart:
    """Which MatMulNBits widths run one row at a time when the bool graph input ``flag``
    is set (a verify step; engine.graph.kernels, 3.)."""

    flag: str
    bits: tuple[int, ...]


def linear(g: GraphBuilder, x: str, weight: PackedWeight | GgufWeight, name: str, *,
           accuracy_level: int, bias: np.ndarray | None = None, float_dtype: type = np.float32,
           rows_apart: RowsApart | None = None) -> str:
    """Add ``x [..., k] -> [..., n]`` to ``g`` the fastest exact way; return the output name.

    A GgufWeight runs GgufMatMul, fast (accuracy_level 4) or exact (below); every row by the
    same code whatever the number of rows, so ``rows_apart`` never applies to it.

    accuracy_level 4 runs every quantized weight through MatMulNBits with int8 activations.
    Below 4 (float activations), 8-bit MatMulNBits has no kernel on CPU and de-quantizes the
    whole matrix on every call (measured 8-16 ms vs 0.27 ms for a dense 896x4864 MatMul,
    benchmarks/matmul_nbits.py), so 8-bit weights become dense float32 there — the same
    values (``unpack`` is bit-exact), at 4 bytes per weight.
    """
    if isinstance(weight, GgufWeight):
        return gguf_matmul(g, x, weight, name, fast=accuracy_level == INT8_ACTIVATIONS,
                           bias=bias)
    if weight.dense is None and (weight.bits == 4 or accuracy_level == INT8_ACTIVATIONS):
        apart = rows_apart if rows_apart and weight.bits in rows_apart.bits else None
        return matmul_nbits(g, x, weight, name, accuracy_level=accuracy_level, bias=bias,
                            float_dtype=float_dtype, rows_apart=apart)
    dense = weight.dense if weight.dense is not None else unpack(weight)
    return dense_matmul(g, x, dense, name, bias=bias, float_dtype=float_dtype)


def gguf_matmul(g: GraphBuilder, x: str, weight: GgufWeight, name: str, *, fast: bool,
                bias: np.ndarray | None = None, expert: str = "", experts: int = 0) -> str:
    """lantern.GgufMatMul over the file's bytes (float32 x [..., k] -> [..., n]). ``fast``
    quantizes x to 8 bits per block where the type has such a kernel (float weights keep
    float activations). ``expert``: an int64 [1] input choosing one of ``experts`` matrices
    [experts, n, k] stored one after the other in ``weight.raw``."""
    fast = fast and native.custom_ops().reads(weight.ggml_type, weight.k, fast=True)
    w = g.add_file_bytes(f"{name}.gguf", weight.raw)
    inputs = [x, w] + ([expert] if expert else [])
    [y] = g.add_node(native.OP, inputs, [f"{name}/GgufMatMul"], domain=native.DOMAIN,
                     type=int(weight.ggml_type), k=weight.k, n=weight.n,
                     mode=FAST_MODE if fast else EXACT_MODE, experts=experts)
    if bias is None:
        return y
    b = g.add_initializer(f"{name}.bias", bias.astype(np.float32))
    [y] = g.add_node("Add", [y, b], [f"{name}/Add"])
    return y


def dense_matmul(g: GraphBuilder, x: str, weight: np.ndarray, name: str, *,
                 bias: np.ndarray | None = None, float_dtype: type = np.float32) -> str:
    """x [..., k] @ weight[n, k].T (+ bias) with a plain MatMul."""
    w_t = g.add_initializer(f"{name}.weight", np.ascontiguousarray(weight.T, dtype=float_dtype))
    [y] = g.add_node("MatMul", [x, w_t], [f"{name}/MatMul"])  # [..., n]
    if bias is None:
        return y
    b = g.add_initializer(f"{name}.bias", bias.astype(float_dtype))
    [y] = g.add_node("Add", [y, b], [f"{name}/Add"])
    return y


def matmul_nbits(g: GraphBuilder, x: str, weight: PackedWeight, name: str, *,
                 accuracy_level: int, bias: np.ndarray | None = None,
                 float_dtype: type = np.float32, rows_apart: RowsApart | None = None) -> str:
    """MatMulNBits (+ the offset term). With float16 the scales and offsets are rounded to
    float16: exact for Q4_0/Q5_0/Q8_0 (fp16 scales), not for the K-quant products.
    ``rows_apart``: the node runs inside a Scan that takes x one row at a time while its
    flag is set, and all rows in one piece otherwise."""
    inputs = [
        x,
        g.add_initializer(f"{name}.qweight", weight.data),
        g.add_initializer(f"{name}.scales", weight.scales.astype(float_dtype)),
        "" if weight.zero_points is None else g.add_initializer(f"{name}.zero_points",
                                                                weight.zero_points),
    ]
    if bias is not None:
        inputs += ["", g.add_initializer(f"{name}.bias", bias.astype(float_dtype))]  # g_idx unused
    attrs = dict(K=weight.k, N=weight.n, bits=weight.bits, block_size=weight.block_size,
                 accuracy_level=accuracy_level)
    if rows_apart is None:
        [y] = g.add_node("MatMulNBits", inputs, [f"{name}/MatMulNBits"],
                         domain="com.microsoft", **attrs)
    else:
        y = _rows_apart(g, x, inputs, attrs, rows_apart.flag, name)
    if weight.offsets is None:
        return y
    return _add_offsets(g, x, y, weight, name, float_dtype)


def _rows_apart(g: GraphBuilder, x: str, inputs: list[str], attrs: dict, flag: str,
               name: str) -> str:
    """MatMulNBits over x [..., k] seen as [pieces, rows, k]: [S, 1, k] while ``flag`` is
    set, [1, S, k] otherwise; a Scan runs the node once per piece with the weights of the
    outer graph (packed once), and the result takes x's leading shape again."""
    k, n = attrs["K"], attrs["N"]
    apart = g.add_initializer(f"{name}.rows_apart", np.array([-1, 1, k], np.int64))
    together = g.add_initializer(f"{name}.rows_together", np.array([1, -1, k], np.int64))
    [shape] = g.add_node("Where", [flag, apart, together], [f"{name}/pieces_shape"])
    [pieces] = g.add_node("Reshape", [x, shape], [f"{name}/pieces"])       # [P, S / P, k]
    [y] = g.add_node("Scan", [pieces], [f"{name}/pieces_out"],            # [P, S / P, n]
                     body=_piece_body(inputs, attrs, name), num_scan_inputs=1)
    [lead] = g.add_node("Shape", [x], [f"{name}/x_lead_shape_rows"], end=-1)
    width = g.add_initializer(f"{name}.out_width", np.array([n], np.int64))
    [shape] = g.add_node("Concat", [lead, width], [f"{name}/out_shape"], axis=0)
    [y] = g.add_node("Reshape", [y, shape], [f"{name}/rows"])
    return y


def _piece_body(inputs: list[str], attrs: dict, name: str) -> onnx.GraphProto:
    """A Scan body: rows [R, k] -> MatMulNBits(rows, the outer graph's weights) [R, n]."""
    rows, out = f"{name}/piece", f"{name}/piece_out"
    node = helper.make_node("MatMulNBits", [rows, *inputs[1:]], [out], domain="com.microsoft",
                            name=f"{name}/piece_matmul", **attrs)
    return helper.make_graph([node], f"{name}/piece", [helper.make_tensor_value_info(
        rows, TensorProto.FLOAT, None)], [helper.make_tensor_value_info(
            out, TensorProto.FLOAT, None)])


def _add_offsets(g: GraphBuilder, x: str, y: str, weight: PackedWeight, name: str,
                 float_dtype: type) -> str:
    """y + sum_sub(x) @ offsets.T, for x of any rank."""
    ob = weight.offset_block
    [lead] = g.add_node("Shape", [x], [f"{name}/x_lead_shape"], end=-1)  # [rank - 1]
    sub_shape = g.add_initializer(f"{name}.sub_shape", np.array([weight.k // ob, ob], np.int64))
    [shape] = g.add_node("Concat", [lead, sub_shape], [f"{name}/sub_shape"], axis=0)
    [xs] = g.add_node("Reshape", [x, shape], [f"{name}/x_sub"])          # [..., k/ob, ob]
    last = g.add_initializer(f"{name}.last_axis", np.array([-1], np.int64))
    [sums] = g.add_node("ReduceSum", [xs, last], [f"{name}/x_sub_sum"], keepdims=0)  # [..., k/ob]
    offsets_t = g.add_initializer(f"{name}.offsets",
                                  np.ascontiguousarray(weight.offsets.T, dtype=float_dtype))
    [corr] = g.add_node("MatMul", [sums, offsets_t], [f"{name}/offset_term"])  # [..., n]
    [out] = g.add_node("Add", [y, corr], [f"{name}/out"])
    return out
