"""GGUF weights -> ONNX Runtime MatMulNBits inputs, with no re-quantization (ARCHITECTURE.md §3).

``pack`` turns a tensor into a PackedWeight; ``unpack`` evaluates the MatMulNBits formula
``(B - zero_point) * scale (+ offset)`` in numpy and must equal gguf.quants.dequantize bit
for bit — that equality is what the tests check, format by format.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize

from engine.errors import UnsupportedModel
from engine.gguf.quants import DENSE, FORMATS, PackedWeight, unpack_bits

__all__ = ["PackedWeight", "pack", "unpack"]


class QuantTensor(Protocol):
    """What pack needs of engine.gguf.TensorInfo."""

    name: str
    ggml_type: GGMLQuantizationType
    shape: tuple[int, ...]   # numpy order, out-first
    raw: np.ndarray          # the tensor's bytes, [rows, row_bytes]


def pack(tensor: QuantTensor) -> PackedWeight:
    """Map a weight of shape (n, ...) onto MatMulNBits (exact formats) or a dense matrix.

    Trailing dimensions fold into k (a conv kernel becomes [out, in*kh*kw]). Formats with
    no exact mapping (Q2_K, Q3_K, IQ*, ...) come back dense float32 with ``dequantized``.
    """
    if len(tensor.shape) < 2:
        raise ValueError(f"{tensor.name}: pack needs a matrix, got shape {tensor.shape}")
    n, k = tensor.shape[0], math.prod(tensor.shape[1:])
    qtype = GGMLQuantizationType(tensor.ggml_type)
    raw = tensor.raw.view(np.uint8).reshape(n, -1)  # [n, row_bytes]
    if (fmt := FORMATS.get(qtype)) is not None:
        return fmt.pack(raw, n, k)
    if (dense := DENSE.get(qtype)) is not None:
        return PackedWeight(ggml_type=qtype, n=n, k=k, dense=dense(raw, n, k))
    try:
        values = dequantize(raw, qtype)
    except NotImplementedError:
        known = ", ".join(t.name for t in (*FORMATS, *DENSE))
        raise UnsupportedModel(
            f"tensor {tensor.name} has type {qtype.name}, which Lantern cannot read "
            f"(exact: {known}; others via gguf.quants.dequantize); re-quantize the model "
            f"to one of these types"
        ) from None
    return PackedWeight(ggml_type=qtype, n=n, k=k, dense=values.reshape(n, k), dequantized=True)


def unpack(p: PackedWeight) -> np.ndarray:
    """The float32 [n, k] matrix MatMulNBits (+ offset correction) multiplies by."""
    if p.dense is not None:
        return p.dense.astype(np.float32)
    codes = unpack_bits(p.data, p.bits, p.block_size).astype(np.float32)  # [n, kb, bs]
    if p.zero_points is None:
        zero = np.float32(p.default_zero_point)
    else:
        zero = unpack_bits(p.zero_points, p.bits, p.k_blocks).astype(np.float32)[..., None]
    w = (codes - zero) * p.scales.reshape(p.n, p.k_blocks, 1)  # [n, kb, bs]
    if p.offsets is not None:
        w = w.reshape(p.n, -1, p.offset_block) + p.offsets[..., None]
    return w.reshape(p.n, p.k)
