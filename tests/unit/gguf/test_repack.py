"""pack/unpack against gguf.quants.dequantize, bit for bit, for every GGUF type we map.

Synthetic tensors are random bytes with hand-picked fp16 scale fields (negative, zero, -0,
subnormal, up to 65504) — every byte pattern of the code fields is a valid block — plus
gguf.quants.quantize output for the formats it can write. The real demo model checks a
sample of rows of every tensor.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

from engine.errors import UnsupportedModel
from engine.gguf.repack import PackedWeight, pack, unpack

# byte offsets of the fp16 fields in each block
FP16_FIELDS = {
    T.Q4_0: (0,), T.Q4_1: (0, 2), T.Q5_0: (0,), T.Q5_1: (0, 2), T.Q8_0: (0,),
    T.Q4_K: (0, 2), T.Q5_K: (0, 2), T.Q6_K: (208,),
    T.Q2_K: (80, 82), T.Q3_K: (108,), T.IQ4_NL: (0,),
}
EXACT = {  # type -> (bits, block_size, zero points stored, offsets)
    T.Q4_0: (4, 32, False, False), T.Q4_1: (4, 32, True, True),
    T.Q5_0: (8, 32, False, False), T.Q5_1: (8, 32, False, True),
    T.Q8_0: (8, 32, False, False), T.Q4_K: (4, 32, True, True),
    T.Q5_K: (8, 32, False, True), T.Q6_K: (8, 16, False, False),
}
DEQUANTIZED = (T.Q2_K, T.Q3_K, T.IQ4_NL)
FLOATS = (T.F32, T.F16, T.BF16)
SHAPES = [(1, 256), (5, 512), (3, 768)]
LEGACY_SHAPES = [(1, 32), (4, 96), (6, 160)]  # odd block counts: padded 4-bit zero points


@dataclass(frozen=True)
class FakeTensor:
    """Stand-in for engine.gguf.TensorInfo: what pack reads."""

    name: str
    ggml_type: T
    shape: tuple[int, ...]
    raw: np.ndarray


def random_fp16(rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    """Finite fp16 scales of every kind, as uint16 bit patterns."""
    kinds = rng.integers(0, 5, size)
    normal = (rng.standard_normal(size) * 10.0 ** rng.integers(-4, 2, size)).astype(np.float16)
    bits = normal.view(np.uint16).copy()
    bits[kinds == 1] = rng.integers(1, 0x400, size, dtype=np.uint16)[kinds == 1]  # subnormal
    bits[kinds == 2] = rng.choice(np.array([0x0000, 0x8000], np.uint16), size)[kinds == 2]
    bits[kinds == 3] = rng.choice(np.array([0x7BFF, 0xFBFF, 0x7800], np.uint16), size)[kinds == 3]
    return bits  # kind 4: the normal values


def random_tensor(qtype: T, shape: tuple[int, int], seed: int = 0) -> FakeTensor:
    rng = np.random.default_rng(seed)
    n, k = shape
    if qtype in FLOATS:
        values = rng.standard_normal(shape).astype(np.float32)
        raw = {T.F32: values, T.F16: values.astype(np.float16),
               T.BF16: (values.view(np.uint32) >> 16).astype(np.uint16)}[qtype]
        return FakeTensor("w", qtype, shape, raw.view(np.uint8).reshape(n, -1))
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n, k // block, size), dtype=np.uint8)
    for at in FP16_FIELDS[qtype]:
        raw[..., at:at + 2] = random_fp16(rng, (n, k // block)).view(np.uint8).reshape(
            n, k // block, 2)
    return FakeTensor("w", qtype, shape, raw.reshape(n, -1))


def assert_bit_identical(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == np.float32 and got.shape == expected.shape
    diff = np.flatnonzero(got.view(np.uint32) != expected.view(np.uint32))
    assert diff.size == 0, (
        f"{diff.size} values differ, first at flat index {diff[0]}: "
        f"{got.flat[diff[0]]!r} vs dequantize {expected.flat[diff[0]]!r}")


def reference(t: FakeTensor) -> np.ndarray:
    return np.asarray(dequantize(t.raw, t.ggml_type), np.float32).reshape(t.shape[0], -1)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("qtype", [*EXACT, *DEQUANTIZED, *FLOATS], ids=lambda t: t.name)
def test_unpack_is_dequantize_bit_for_bit(qtype, shape):
    for seed in range(3):
        t = random_tensor(qtype, shape, seed)
        assert_bit_identical(unpack(pack(t)), reference(t))


@pytest.mark.parametrize("shape", LEGACY_SHAPES)
@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0], ids=lambda t: t.name)
def test_quantized_by_gguf_round_trips(qtype, shape):
    values = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 3
    values[0, :8] = 0.0  # an all-zero half block
    t = FakeTensor("w", qtype, shape, quantize(values, qtype))
    assert_bit_identical(unpack(pack(t)), reference(t))


@pytest.mark.parametrize("qtype", list(EXACT), ids=lambda t: t.name)
def test_layout_follows_matmul_nbits(qtype):
    bits, block_size, has_zero_points, has_offsets = EXACT[qtype]
    n, k = 3, 768 if qtype in (T.Q4_K, T.Q5_K, T.Q6_K) else 96
    p = pack(random_tensor(qtype, (n, k)))
    kb = k // block_size
    assert (p.bits, p.block_size, p.n, p.k, p.dense) == (bits, block_size, n, k, None)
    assert p.data.dtype == np.uint8 and p.data.shape == (n, kb, block_size * bits // 8)
    assert p.scales.dtype == np.float32 and p.scales.shape == (n * kb,)
    if has_zero_points:
        assert p.zero_points.shape == (n, -(-kb * bits // 8)) and not p.zero_points.any()
    else:
        assert p.zero_points is None
    if has_offsets:
        assert p.offsets.dtype == np.float32 and p.offsets.shape == (n, k // p.offset_block)
    else:
        assert p.offsets is None


def test_q4_0_nibbles_are_reordered():
    """GGUF byte i holds elements i and i+16; MatMulNBits byte j holds elements 2j, 2j+1."""
    codes = np.random.default_rng(0).permutation(np.arange(32, dtype=np.uint8) % 16)
    block = np.concatenate([np.float16(1).reshape(1).view(np.uint8),
                            codes[:16] | (codes[16:] << 4)])
    p = pack(FakeTensor("w", T.Q4_0, (1, 32), block.reshape(1, 18)))
    expected = codes[0::2] | (codes[1::2] << 4)
    assert p.data.reshape(16).tolist() == expected.tolist()
    assert unpack(p)[0].tolist() == [float(int(c) - 8) for c in codes]


def test_floats_stay_dense_without_copies():
    f32 = random_tensor(T.F32, (4, 64))
    p = pack(f32)
    assert p.bits is None and p.dense.dtype == np.float32 and not p.dequantized
    assert np.shares_memory(p.dense, f32.raw)
    assert pack(random_tensor(T.F16, (4, 64))).dense.dtype == np.float16
    assert pack(random_tensor(T.BF16, (4, 64))).dense.dtype == np.float32


def test_other_formats_are_flagged_dequantized():
    p = pack(random_tensor(T.Q3_K, (2, 256)))
    assert p.dequantized and p.bits is None and p.dense.shape == (2, 256)


def test_conv_kernel_folds_into_k():
    t = random_tensor(T.F16, (8, 3 * 2 * 4))
    p = pack(FakeTensor("v.patch_embd_0.weight", T.F16, (8, 3, 2, 4), t.raw))
    assert (p.n, p.k) == (8, 24)


def test_unknown_format_names_itself():
    raw = np.zeros((2, 36), np.uint8)  # Q8_1: a block format gguf-py cannot de-quantize
    with pytest.raises(UnsupportedModel, match=r"blk\.0\.ffn_up\.weight.*Q8_1"):
        pack(FakeTensor("blk.0.ffn_up.weight", T.Q8_1, (2, 32), raw))


def test_vector_is_not_a_weight_matrix():
    with pytest.raises(ValueError, match="attn_norm"):
        pack(FakeTensor("attn_norm.weight", T.F32, (64,), np.zeros(256, np.uint8)))


def take_rows(p: PackedWeight, rows: np.ndarray) -> PackedWeight:
    """The same weight restricted to some output rows."""
    def pick(a):
        return None if a is None else a[rows]
    scales = None if p.scales is None else p.scales.reshape(p.n, -1)[rows].reshape(-1)
    return dataclasses.replace(p, n=len(rows), data=pick(p.data), scales=scales,
                               zero_points=pick(p.zero_points), offsets=pick(p.offsets),
                               dense=pick(p.dense))


def test_demo_model_packs_exactly(demo_05b):
    from engine.gguf import open_model

    model = open_model(demo_05b)
    rng = np.random.default_rng(0)
    seen = set()
    packed = {name: pack(t) for name, t in model.tensors.items() if len(t.shape) == 2}
    for name, p in packed.items():
        t = model.tensors[name]
        rows = np.sort(rng.choice(p.n, size=min(p.n, 16), replace=False))
        expected = np.asarray(dequantize(t.raw[rows], t.ggml_type), np.float32)
        assert_bit_identical(unpack(take_rows(p, rows)), expected.reshape(len(rows), -1))
        assert not p.dequantized, f"{name} ({t.ggml_type.name}) fell back to float"
        seen.add(t.ggml_type)
    assert {T.Q4_K, T.Q5_0, T.Q6_K, T.Q8_0} <= seen
