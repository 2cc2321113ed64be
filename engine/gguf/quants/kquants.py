"""The 256-element super-block formats with exact mappings (Q4_K, Q5_K, Q6_K).

Q4_K / Q5_K: d, dmin (fp16), 12 bytes of 6-bit scales sc[8] and mins m[8], then
(Q5_K) qh[32] and qs[128]; sub-block s (32 elements) is ``d*sc[s] * q - dmin*m[s]``,
its low 4 bits in the nibble s % 2 of qs bytes 32*(s // 2) .. +32 and (Q5_K) its 5th bit
in bit s of qh. Both products are exact in float32 (11-bit mantissa times 6-bit integer),
so the scale d*sc and offset -dmin*m are the values gguf forms.
Q6_K: ql[128], qh[64], int8 scales[16], d; 16 sub-blocks of 16, ``d*sc[s] * (q - 32)``.
"""

import numpy as np
from gguf import GGMLQuantizationType as T

from engine.gguf.quants.base import BlockFormat, Codes, bit_planes, f16, nibbles


def _scales_mins(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """12 packed bytes [..., 12] -> 6-bit sc, m as float32 [..., 8].

    Bytes 0-3 hold sc[0..3] and 4-7 m[0..3] in their low 6 bits; sub-blocks 4-7 take
    their low 4 bits from bytes 8-11 (sc low nibble, m high nibble) and their top 2 bits
    from the top of bytes 0-3 (sc) and 4-7 (m).
    """
    lo_sc, lo_m, mixed = packed[..., 0:4], packed[..., 4:8], packed[..., 8:12]
    sc = np.concatenate([lo_sc & 0x3F, (mixed & 0x0F) | ((lo_sc >> 6) << 4)], axis=-1)
    m = np.concatenate([lo_m & 0x3F, (mixed >> 4) | ((lo_m >> 6) << 4)], axis=-1)
    return sc.astype(np.float32), m.astype(np.float32)


def _low_nibbles_k(qs: np.ndarray) -> np.ndarray:
    """qs [n, nb, 128] -> low 4 bits [n, nb, 8, 32] by sub-block."""
    n, nb = qs.shape[:2]
    return nibbles(qs.reshape(n, nb, 4, 32)).reshape(n, nb, 8, 32)


def _d_dmin(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scales d*sc [n, nb*8] and offsets -(dmin*m) [n, nb*8] of Q4_K / Q5_K blocks."""
    n = blocks.shape[0]
    sc, m = _scales_mins(blocks[..., 4:16])
    scales = f16(blocks, 0)[..., None] * sc
    offsets = -(f16(blocks, 2)[..., None] * m)
    return scales.reshape(n, -1), offsets.reshape(n, -1)


class Q4_K(BlockFormat, ggml_type=T.Q4_K, bits=4, block_size=32):
    """Zero point 0, scale d*sc, offset -dmin*m per 32 elements."""

    @classmethod
    def decode(cls, blocks):
        scales, offsets = _d_dmin(blocks)
        return Codes(codes=_packed_nibbles_k(blocks[..., 16:144]), scales=scales, zero_point=0,
                     offsets=offsets, packed=True)


def _packed_nibbles_k(qs: np.ndarray) -> np.ndarray:
    """qs [n, nb, 128] -> 4-bit codes [n, nb, 8, 16] already in pack_bits' layout.

    Sub-block 2c holds the low nibbles of qs bytes 32c..32c+31, sub-block 2c+1 their high
    nibbles; a packed byte j holds elements 2j (low) and 2j+1 (high). So packed byte j of
    sub-block 2c is low(qs[2j]) | low(qs[2j+1]) << 4, and of 2c+1 high(qs[2j]) | high(qs[2j+1])
    << 4: one pass over the bytes instead of unpacking every code and packing it again
    (the 1.5B demo model's cold build spent 6 s of 12 doing that).
    """
    n, nb = qs.shape[:2]
    chunks = qs.reshape(n, nb, 4, 32)
    even, odd = chunks[..., 0::2], chunks[..., 1::2]              # [n, nb, 4, 16]
    out = np.empty((n, nb, 4, 2, 16), np.uint8)
    low, high = out[..., 0, :], out[..., 1, :]
    np.left_shift(odd, 4, out=low)
    low |= even & 0x0F
    np.bitwise_and(odd, 0xF0, out=high)
    high |= even >> 4
    return out.reshape(n, nb, 8, 16)


class Q5_K(BlockFormat, ggml_type=T.Q5_K, bits=8, block_size=32):
    """Codes q + 128 (default zero point), scale d*sc, offset -dmin*m per 32 elements."""

    @classmethod
    def decode(cls, blocks):
        scales, offsets = _d_dmin(blocks)
        high = bit_planes(blocks[..., 16:48], 8)  # [n, nb, 8 sub-blocks, 32]
        q = _low_nibbles_k(blocks[..., 48:176]) | (high << 4)
        return Codes(codes=q + np.uint8(128), scales=scales, offsets=offsets)


class Q6_K(BlockFormat, ggml_type=T.Q6_K, bits=8, block_size=16):
    """Codes q + 96 so the default zero point 128 subtracts 32; scale d*sc per 16 elements.

    Element 128*h + 32*j + e (half h, j < 4, e < 32) has its low 4 bits in nibble j // 2 of
    ql byte 64*h + 32*(j % 2) + e and its top 2 bits at bit 2*j of qh byte 32*h + e.
    """

    @classmethod
    def decode(cls, blocks):
        n, nb = blocks.shape[:2]
        ql = blocks[..., 0:128].reshape(n, nb, 2, 2, 32)  # [half, j % 2, e]
        qh = blocks[..., 128:192].reshape(n, nb, 2, 32)   # [half, e]
        q = np.empty((n, nb, 2, 4, 32), np.uint8)         # [half, j, e]: filled in place
        np.bitwise_and(ql, 0x0F, out=q[..., 0:2, :])
        np.right_shift(ql, 4, out=q[..., 2:4, :])
        for j in range(4):
            q[..., j, :] |= ((qh >> np.uint8(2 * j)) & np.uint8(3)) << np.uint8(4)
        q += np.uint8(96)
        q = q.reshape(n, nb, 256)
        sc = blocks[..., 192:208].view(np.int8).astype(np.float32)        # [n, nb, 16]
        scales = f16(blocks, 208)[..., None] * sc
        return Codes(codes=q, scales=scales.reshape(n, -1))
