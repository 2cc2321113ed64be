"""The record a GGUF weight becomes for ONNX Runtime, and the base of the per-format classes.

MatMulNBits de-quantizes ``w = (B - zero_point) * scale`` per block of ``block_size``
elements along k. Every GGUF block format below is that formula in disguise, sometimes
plus a per-sub-block offset (``w = d*q + m``, ``w = d*sc*q - dmin*m``), so a format only
has to say where its codes, scales and offsets sit in the block bytes; packing the codes
into MatMulNBits' layout is shared here. No value is re-quantized: the float32 scale and
offset are the very products gguf.quants.dequantize forms, so ``unpack`` reproduces it
bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType


@dataclass(frozen=True, eq=False)
class PackedWeight:
    """A linear weight ready for MatMulNBits (``bits`` set) or plain MatMul (``dense`` set)."""

    ggml_type: GGMLQuantizationType
    n: int                              # output rows
    k: int                              # input columns
    bits: int | None = None             # 4 or 8; None for dense weights
    block_size: int = 0                 # MatMulNBits block along k
    data: np.ndarray | None = None      # uint8 [n, k_blocks, block_size * bits // 8]
    scales: np.ndarray | None = None    # float32 [n * k_blocks]
    zero_points: np.ndarray | None = None  # uint8 [n, ceil(k_blocks * bits / 8)]; None: 2**(bits-1)
    offsets: np.ndarray | None = None   # float32 [n, k // offset_block], added to w per sub-block
    offset_block: int = 0
    dense: np.ndarray | None = None     # float16 / float32 [n, k]
    dequantized: bool = False           # dense only because the format has no exact mapping
    requantized: bool = False           # rounded again (engine.gguf.requantize): not exact

    @property
    def k_blocks(self) -> int:
        return self.k // self.block_size

    @property
    def default_zero_point(self) -> int:
        return 1 << (self.bits - 1)


@dataclass(frozen=True)
class Codes:
    """One tensor's blocks decoded into MatMulNBits terms, before bit-packing."""

    codes: np.ndarray                       # uint8 [n, k_blocks, block_size], the B values
    scales: np.ndarray                      # float32 [n, k_blocks]
    zero_point: int | None = None           # one zero point for every block; None: the default
    offsets: np.ndarray | None = None       # float32 [n, k // block_size]
    packed: bool = False                    # codes already in pack_bits' layout (bytes per block)


FORMATS: dict[GGMLQuantizationType, type[BlockFormat]] = {}


class BlockFormat:
    """A GGUF block format with an exact MatMulNBits mapping; subclasses register by type."""

    ggml_type: ClassVar[GGMLQuantizationType]
    bits: ClassVar[int]           # MatMulNBits bits
    block_size: ClassVar[int]     # MatMulNBits block_size
    gguf_block: ClassVar[int]     # elements per GGUF block
    type_size: ClassVar[int]      # bytes per GGUF block

    def __init_subclass__(cls, ggml_type: GGMLQuantizationType, bits: int, block_size: int):
        cls.ggml_type, cls.bits, cls.block_size = ggml_type, bits, block_size
        cls.gguf_block, cls.type_size = GGML_QUANT_SIZES[ggml_type]
        FORMATS[ggml_type] = cls

    @classmethod
    def decode(cls, blocks: np.ndarray) -> Codes:
        """blocks: uint8 [n, gguf_blocks_per_row, type_size] -> codes, scales, offsets."""
        raise NotImplementedError

    @classmethod
    def pack(cls, raw: np.ndarray, n: int, k: int) -> PackedWeight:
        blocks = raw.reshape(n, k // cls.gguf_block, cls.type_size)
        c = cls.decode(blocks)
        k_blocks = k // cls.block_size
        data = (c.codes.reshape(n, k_blocks, -1) if c.packed
                else pack_bits(c.codes.reshape(n, k_blocks, cls.block_size), cls.bits))
        zero_points = None
        if c.zero_point is not None:
            zero_points = pack_bits(np.full((n, k_blocks), c.zero_point, np.uint8), cls.bits)
        return PackedWeight(
            ggml_type=cls.ggml_type, n=n, k=k, bits=cls.bits, block_size=cls.block_size,
            data=data, scales=c.scales.reshape(n * k_blocks),
            zero_points=zero_points,
            offsets=None if c.offsets is None else c.offsets.reshape(n, k_blocks),
            offset_block=0 if c.offsets is None else cls.block_size,
        )


def pack_bits(values: np.ndarray, bits: int) -> np.ndarray:
    """MatMulNBits packing along the last axis: 4-bit puts element 2j in the low nibble of
    byte j and 2j+1 in the high one (an odd count is padded with 0); 8-bit is the byte."""
    if bits == 8:
        return np.ascontiguousarray(values, dtype=np.uint8)
    if values.shape[-1] % 2:
        values = np.concatenate([values, np.zeros((*values.shape[:-1], 1), np.uint8)], axis=-1)
    packed = values[..., 1::2] << 4
    packed |= values[..., 0::2]
    return packed


def unpack_bits(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Inverse of pack_bits: [..., bytes] -> uint8 [..., count]."""
    if bits == 8:
        return packed[..., :count]
    pairs = np.stack([packed & 0x0F, packed >> 4], axis=-1)  # [..., bytes, 2]
    return pairs.reshape(*packed.shape[:-1], -1)[..., :count]


def f16(blocks: np.ndarray, at: int) -> np.ndarray:
    """The fp16 field at byte ``at`` of every block, as float32 [..., n_blocks]."""
    return blocks[..., at:at + 2].view(np.float16)[..., 0].astype(np.float32)


def nibbles(qs: np.ndarray) -> np.ndarray:
    """[..., m] bytes -> uint8 [..., 2, m]: all low nibbles, then all high nibbles."""
    out = np.empty((*qs.shape[:-1], 2, qs.shape[-1]), np.uint8)  # written once, no temporaries
    np.bitwise_and(qs, 0x0F, out=out[..., 0, :])
    np.right_shift(qs, 4, out=out[..., 1, :])
    return out


def bit_planes(qh: np.ndarray, count: int) -> np.ndarray:
    """Little-endian bits of [..., m] bytes -> uint8 [..., count, m]: plane b holds bit b."""
    shifts = np.arange(count, dtype=np.uint8).reshape(count, 1)
    return (qh[..., None, :] >> shifts) & 1
