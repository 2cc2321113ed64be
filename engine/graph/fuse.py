"""Stacking linear weights that read the same input (q|k|v, gate|up) into one matrix.

One MatMulNBits instead of three quantizes the activations once and gives the threads one
wide N to split instead of a narrow k/v projection (kv_heads * head_dim rows). Weights fuse
only when MatMulNBits would treat them alike (bits, block, zero points, offsets); otherwise
the caller keeps them apart. GGUF bytes read in place (GgufWeight) never stack: that
would copy them; the op quantizes x once per matrix, which costs little.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.gguf.repack import PackedWeight
from engine.graph.linear import GgufWeight


def stack_rows(weights: Sequence[PackedWeight | GgufWeight]) -> PackedWeight | None:
    """[n_i, k] weights -> one [sum n_i, k] weight, or None when their layouts differ (or
    they are read in place)."""
    if any(isinstance(w, GgufWeight) for w in weights):
        return None
    first = weights[0]
    layout = _layout(first)
    if any(_layout(w) != layout for w in weights[1:]):
        return None
    n = sum(w.n for w in weights)

    def cat(field: str) -> np.ndarray | None:
        parts = [getattr(w, field) for w in weights]
        return None if parts[0] is None else np.concatenate(parts, axis=0)

    return PackedWeight(
        ggml_type=first.ggml_type, n=n, k=first.k, bits=first.bits,
        block_size=first.block_size, data=cat("data"), scales=cat("scales"),
        zero_points=cat("zero_points"), offsets=cat("offsets"), offset_block=first.offset_block,
        dense=cat("dense"), dequantized=first.dequantized, requantized=first.requantized,
    )


def split_rows(weight: PackedWeight | GgufWeight,
               sizes: Sequence[int]) -> list[PackedWeight | GgufWeight]:
    """One [sum n_i, k] weight -> [n_i, k] weights (a file that stores q|k|v or gate|up
    fused, as Phi-3's does)."""
    if isinstance(weight, GgufWeight):
        bounds = np.cumsum([0, *sizes])
        return [weight.rows(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    parts, start = [], 0
    for n in sizes:
        rows = {field: _rows(getattr(weight, field), weight.n, slice(start, start + n))
                for field in ("data", "scales", "zero_points", "offsets", "dense")}
        parts.append(PackedWeight(
            ggml_type=weight.ggml_type, n=n, k=weight.k, bits=weight.bits,
            block_size=weight.block_size, offset_block=weight.offset_block,
            dequantized=weight.dequantized, requantized=weight.requantized, **rows))
        start += n
    return parts


def _rows(value: np.ndarray | None, n: int, rows: slice) -> np.ndarray | None:
    """Rows of a packed field, which holds them in order on its first axis, either one per
    entry or flattened (per-block scales [n * blocks])."""
    if value is None:
        return None
    return value.reshape(n, -1)[rows].reshape(-1, *value.shape[1:])


def _layout(w: PackedWeight) -> tuple:
    return (
        w.k, w.bits, w.block_size, w.offset_block, w.zero_points is None, w.offsets is None,
        None if w.dense is None else w.dense.dtype, w.requantized,
    )
