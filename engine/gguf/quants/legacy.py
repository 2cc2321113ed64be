"""The 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) as MatMulNBits blocks of 32.

Byte layouts (little-endian fp16 d, m): Q4_0 d qs[16]; Q4_1 d m qs[16]; Q5_0 d qh[4] qs[16];
Q5_1 d m qh[4] qs[16]; Q8_0 d qs[32] (int8). In qs, byte i holds element i in its low
nibble and element i + 16 in its high one; bit j of qh is bit 4 of element j.
"""

import numpy as np
from gguf import GGMLQuantizationType as T

from engine.gguf.quants.base import BlockFormat, Codes, f16, nibbles


def _q4(qs: np.ndarray) -> np.ndarray:
    """qs [n, nb, 16] -> codes 0..15 [n, nb, 32]."""
    return nibbles(qs).reshape(*qs.shape[:-1], 32)


def _q5(qh: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """qh [n, nb, 4], qs [n, nb, 16] -> codes 0..31 [n, nb, 32]."""
    return _q4(qs) | (np.unpackbits(qh, axis=-1, bitorder="little") << 4)


class Q4_0(BlockFormat, ggml_type=T.Q4_0, bits=4, block_size=32):
    """w = d * (q - 8): the default 4-bit zero point."""

    @classmethod
    def decode(cls, blocks):
        return Codes(codes=_q4(blocks[..., 2:18]), scales=f16(blocks, 0))


class Q4_1(BlockFormat, ggml_type=T.Q4_1, bits=4, block_size=32):
    """w = d * q + m: zero point 0, offset m."""

    @classmethod
    def decode(cls, blocks):
        return Codes(codes=_q4(blocks[..., 4:20]), scales=f16(blocks, 0), zero_point=0,
                     offsets=f16(blocks, 2))


class Q5_0(BlockFormat, ggml_type=T.Q5_0, bits=8, block_size=32):
    """w = d * (q - 16): stored as q + 112 so the default 8-bit zero point 128 applies."""

    @classmethod
    def decode(cls, blocks):
        return Codes(codes=_q5(blocks[..., 2:6], blocks[..., 6:22]) + np.uint8(112),
                     scales=f16(blocks, 0))


class Q5_1(BlockFormat, ggml_type=T.Q5_1, bits=8, block_size=32):
    """w = d * q + m: stored as q + 128 (default zero point), offset m."""

    @classmethod
    def decode(cls, blocks):
        return Codes(codes=_q5(blocks[..., 4:8], blocks[..., 8:24]) + np.uint8(128),
                     scales=f16(blocks, 0), offsets=f16(blocks, 2))


class Q8_0(BlockFormat, ggml_type=T.Q8_0, bits=8, block_size=32):
    """w = d * q with int8 q: stored as q + 128 (flip the sign bit), default zero point."""

    @classmethod
    def decode(cls, blocks):
        return Codes(codes=blocks[..., 2:34] ^ np.uint8(0x80), scales=f16(blocks, 0))
