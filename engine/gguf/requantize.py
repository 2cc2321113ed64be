"""Opt-in re-quantization: GGUF weights -> MatMulNBits 4-bit, NOT the GGUF's exact values.

The exact mapping (engine.gguf.repack) keeps every weight bit for bit, but formats with more
than 4 bits per weight (Q5_0, Q5_K, Q6_K, Q8_0, ...) become 8-bit MatMulNBits blocks and
Q4_K/Q5_K need an extra offset matmul: twice the bytes per token of a 4-bit weight, and
decode speed on CPU is bound by those bytes (BENCHMARKS.md). Re-quantizing trades exactness
for speed: each weight is de-quantized to float32 (gguf.quants.dequantize) and rounded again
to 4-bit codes with a float32 scale and a 4-bit zero point per block (min/max round to
nearest), so the logits move slightly and every place that uses it must say so
(``Requantization.label``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from gguf.quants import dequantize

from engine.gguf.quants import PackedWeight, pack_bits
from engine.gguf.repack import QuantTensor, pack

BLOCK_SIZES = (32, 64, 128)
SPECS = ("q4", *(f"q4/{b}" for b in BLOCK_SIZES[1:]))  # what users type: "q4" is block 32
ROWS_PER_CHUNK = 4096  # de-quantize a few rows at a time: the 151936-row embedding is 0.5 GB


@dataclass(frozen=True)
class Requantization:
    """4-bit MatMulNBits blocks of ``block_size`` along k, asymmetric (uint8 zero points)."""

    block_size: int = 32

    @classmethod
    def parse(cls, spec: str) -> Requantization:
        """"q4" (block 32) or "q4/64", "q4/128"; a ValueError names the accepted forms."""
        name, _, block = spec.strip().lower().partition("/")
        choices = ", ".join(SPECS)
        if name != "q4" or (block and block not in {str(b) for b in BLOCK_SIZES}):
            raise ValueError(f"unknown re-quantization {spec!r}; choose one of {choices}")
        return cls(block_size=int(block) if block else 32)

    @property
    def spec(self) -> str:
        return "q4" if self.block_size == 32 else f"q4/{self.block_size}"

    @property
    def label(self) -> str:
        """What a user sees wherever these weights run."""
        return (f"re-quantized {self.spec} (4-bit, block {self.block_size}): "
                "NOT the GGUF's exact weights")


def requantize(tensor: QuantTensor, scheme: Requantization) -> PackedWeight:
    """The weight (n, ...) as 4-bit MatMulNBits blocks rounded from its float values.

    A k that the block size does not divide keeps the exact mapping (``pack``).
    """
    n, k = tensor.shape[0], math.prod(tensor.shape[1:])
    bs = scheme.block_size
    if k % bs:
        return pack(tensor)
    kb = k // bs
    data = np.empty((n, kb, bs // 2), np.uint8)
    scales = np.empty((n, kb), np.float32)
    zero_points = np.empty((n, (kb + 1) // 2), np.uint8)
    raw = tensor.raw.view(np.uint8).reshape(n, -1)  # [n, row_bytes]
    for start in range(0, n, ROWS_PER_CHUNK):
        rows = slice(start, min(start + ROWS_PER_CHUNK, n))
        w = _dequantize_rows(raw[rows], tensor).reshape(-1, kb, bs)  # [r, kb, bs]
        codes, scales[rows], zero = quantize_blocks(w)
        data[rows] = pack_bits(codes, 4)
        zero_points[rows] = pack_bits(zero, 4)
    return PackedWeight(
        ggml_type=tensor.ggml_type, n=n, k=k, bits=4, block_size=bs, data=data,
        scales=scales.reshape(-1), zero_points=zero_points, requantized=True,
    )


def quantize_blocks(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32 [..., kb, bs] -> codes uint8 [..., kb, bs], scales float32 [..., kb],
    zero points uint8 [..., kb] with w ~ (code - zero) * scale.

    Plain min/max rounding, the range widened to hold 0 so that 0 stays exact. (Searching
    for a clipped range with less squared error lowered the weight error but not the logit
    error: docs/benchmarks-journal.md, 'Re-quantization accuracy'.)
    """
    lo = np.minimum(w.min(axis=-1), 0.0)  # [..., kb]
    hi = np.maximum(w.max(axis=-1), 0.0)
    scale = (hi - lo) / 15.0
    safe = np.where(scale > 0, scale, 1.0)
    zero = np.clip(np.rint(-lo / safe), 0, 15)
    codes = np.clip(np.rint(w / safe[..., None]) + zero[..., None], 0, 15)
    return codes.astype(np.uint8), scale.astype(np.float32), zero.astype(np.uint8)


def _dequantize_rows(raw_rows: np.ndarray, tensor: QuantTensor) -> np.ndarray:
    """float32 [r, k] of some rows of ``tensor`` (gguf.quants.dequantize works row by row)."""
    return np.asarray(dequantize(raw_rows, tensor.ggml_type), np.float32).reshape(len(raw_rows), -1)
