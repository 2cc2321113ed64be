"""Lantern's quantized matmul kernels (engine/native/quants.h) against gguf-py, per format.

Exact mode must multiply with gguf.quants.dequantize's values (the de-quantized rows are
compared bit for bit); fast mode must be the integer dot product of those values with the
activations quantized as quants.h says; and every y[i][j] must not depend on how many rows
of x or which columns a call computes, to the bit, in both modes.

The library is the one `pip install -e .` built into engine/native when there is one;
otherwise the test compiles quants.c itself (its portable kernels). Where a built library
exists, the portable kernels are compiled and checked too.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

import engine
from engine.native import custom_ops
from tests.unit.gguf.test_repack import assert_bit_identical, random_tensor

NATIVE = Path(engine.__file__).parent / "native"

QUANTIZED = (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.MXFP4,
             T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K)
DENSE = (T.F32, T.F16, T.BF16)
TYPES = (*DENSE, *QUANTIZED)
GGUF_QUANTIZES = (T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.MXFP4)
# byte offsets of each block's fp16 scale fields, and of the minimum among them (if any)
SCALES = {T.Q4_0: (0,), T.Q4_1: (0, 2), T.Q5_0: (0,), T.Q5_1: (0, 2), T.Q8_0: (0,),
          T.Q2_K: (80, 82), T.Q3_K: (108,), T.Q4_K: (0, 2), T.Q5_K: (0, 2), T.Q6_K: (208,)}
MINIMUM = {T.Q4_1: (2, 1), T.Q5_1: (2, 1), T.Q2_K: (82, 15), T.Q4_K: (2, 63), T.Q5_K: (2, 63)}
ROWS = 37  # rows of W: the portable kernels' groups of 16 twice, then 4 + 1 rows


def block_of(qtype: T) -> int:
    return GGML_QUANT_SIZES[qtype][0]


def act_block(qtype: T) -> int:
    """Elements per block of fast-mode activations (quants.h): 1 for the dense types."""
    return {1: 1, 32: 32, 256: 256}[block_of(qtype)]


def ks_for(qtype: T) -> list[int]:
    """256, 512 and a large k that is not a whole number of 512-value chunks;
    for the dense types, whose blocks are single values, ks that are not whole numbers of
    any vector either."""
    if block_of(qtype) == 1:
        return [37, 256, 2605]
    return [256, 512, 2816 if block_of(qtype) == 256 else 2592]


# ---- the library ------------------------------------------------------------------------


class Kernels:
    """quants.h through ctypes, on numpy arrays."""

    def __init__(self, path: Path):
        self.path = path
        lib = ctypes.CDLL(str(path))
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        for name in ("lq_row_bytes", "lq_act_bytes"):
            getattr(lib, name).argtypes = [ctypes.c_int, i64]
            getattr(lib, name).restype = ctypes.c_size_t
        lib.lq_quantize_act.argtypes = [ctypes.c_int, i64, vp, vp]
        lib.lq_dequantize_row.argtypes = [ctypes.c_int, i64, vp, vp]
        for name in ("lq_matmul_exact", "lq_matmul_fast"):
            getattr(lib, name).argtypes = [ctypes.c_int, i64, i64, vp, vp, i64, i64, vp, i64]
            getattr(lib, name).restype = None
        lib.lq_isa.restype = ctypes.c_char_p
        self.lib = lib

    def isa(self) -> str:
        return self.lib.lq_isa().decode()

    def row_bytes(self, qtype: int, k: int) -> int:
        return self.lib.lq_row_bytes(int(qtype), k)

    def act_bytes(self, qtype: int, k: int) -> int:
        return self.lib.lq_act_bytes(int(qtype), k)

    def dequantize(self, qtype: T, k: int, w: np.ndarray) -> np.ndarray:
        w = np.ascontiguousarray(w, np.uint8).reshape(-1, self.row_bytes(qtype, k))
        out = np.empty((w.shape[0], k), np.float32)
        for j in range(w.shape[0]):
            self.lib.lq_dequantize_row(int(qtype), k, w[j].ctypes.data, out[j].ctypes.data)
        return out

    def quantize_act(self, qtype: T, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        m, k = x.shape
        xq = np.zeros((m, self.act_bytes(qtype, k)), np.uint8)
        for i in range(m):
            self.lib.lq_quantize_act(int(qtype), k, x[i].ctypes.data, xq[i].ctypes.data)
        return xq

    def matmul(self, mode: str, qtype: T, x: np.ndarray, w: np.ndarray,
               j0: int = 0, j1: int | None = None, y: np.ndarray | None = None) -> np.ndarray:
        """y[:, j0:j1] of x @ W.T; x is float32 rows (exact) or quantize_act's rows (fast)."""
        x = np.ascontiguousarray(x)
        m, n = x.shape[0], w.shape[0]
        k = x.shape[1] if mode == "exact" else w.shape[1] * block_of(qtype) \
            // GGML_QUANT_SIZES[qtype][1]
        j1 = n if j1 is None else j1
        if y is None:
            y = np.full((m, n), np.nan, np.float32)
        fn = self.lib.lq_matmul_exact if mode == "exact" else self.lib.lq_matmul_fast
        fn(int(qtype), k, m, x.ctypes.data, w.ctypes.data, j0, j1, y.ctypes.data, y.shape[1])
        return y


def built_library() -> Path | None:
    """The shared library `pip install -e .` put into engine/native, if any: the one file
    there that exports quants.h's entry points."""
    for path in sorted(NATIVE.iterdir()):
        if path.suffix in (".so", ".dylib", ".dll", ".pyd") and path.is_file():
            try:
                if hasattr(ctypes.CDLL(str(path)), "lq_matmul_exact"):
                    return path
            except OSError:
                continue
    return None


def compile_cc() -> str | None:
    """The C compiler: $CC, else cc, gcc or clang on the PATH."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") \
        or shutil.which("clang")


def compile_portable(out_dir: Path) -> Path:
    """quants.c alone, as the portable fallback builds (no x86 kernels)."""
    cc = compile_cc()
    if cc is None:
        pytest.fail("no library in engine/native and no C compiler to build quants.c: "
                    "run `pip install -e .` or install a C compiler")
    out = out_dir / "liblantern_quants_portable.so"
    subprocess.run([cc, "-O2", "-std=c11", "-shared", "-fPIC",
                    "-DLQ_NO_X86", str(NATIVE / "quants.c"), "-o", str(out)], check=True)
    return out


LIBRARIES = ["library", "portable"] if built_library() else ["library"]


@pytest.fixture(scope="session", params=LIBRARIES)
def kernels(request, tmp_path_factory) -> Kernels:
    """The built library (or quants.c compiled, if none is built), then, where a built
    library exists, the portable kernels compiled on their own."""
    built = built_library() if request.param == "library" else None
    return Kernels(built or compile_portable(tmp_path_factory.mktemp("quants")))


# ---- weights and activations ------------------------------------------------------------


@dataclass(frozen=True)
class Weights:
    qtype: T
    raw: np.ndarray      # [n, row bytes] as in the GGUF file
    values: np.ndarray   # [n, k] float32: gguf.quants.dequantize(raw)
    bound: np.ndarray    # [n, k] float32: |values| plus twice the block's largest offset


def make_weights(qtype: T, n: int, k: int, seed: int) -> Weights:
    """Valid blocks: gguf.quants.quantize's where gguf can write the type, else random
    code bytes with small finite fp16 scales (every code pattern is a valid block)."""
    rng = np.random.default_rng(seed)
    if qtype in (T.F32, T.F16):
        raw = quantize(rng.standard_normal((n, k)).astype(np.float32), qtype).view(np.uint8)
    elif qtype in GGUF_QUANTIZES:
        raw = quantize(rng.standard_normal((n, k)).astype(np.float32), qtype)
    else:
        block, size = GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, (n, k // block, size), dtype=np.uint8)
        for at in SCALES[qtype]:
            scale = (rng.standard_normal((n, k // block)) * 0.02).astype(np.float16)
            raw[..., at:at + 2] = scale.view(np.uint8).reshape(n, k // block, 2)
        raw = raw.reshape(n, -1)
    raw = np.ascontiguousarray(raw.reshape(n, -1))
    values = np.asarray(dequantize(raw, qtype), np.float32).reshape(n, k)
    bound = np.abs(values)
    if qtype in MINIMUM:
        at, largest = MINIMUM[qtype]
        block, size = GGML_QUANT_SIZES[qtype]
        offsets = raw.reshape(n, k // block, size)[..., at:at + 2].copy().view(np.float16)
        offsets = np.abs(offsets.astype(np.float32)) * largest  # [n, blocks, 1]
        bound = bound + 2 * np.repeat(offsets.reshape(n, -1), block, axis=1)
    return Weights(qtype, raw, values, bound)


def round_away(v: np.ndarray) -> np.ndarray:
    """C's roundf: to nearest, ties away from zero (np.round ties to even)."""
    t = np.trunc(v)
    return np.where(np.abs(v - t) >= 0.5, t + np.sign(v), t).astype(np.float32)


@dataclass(frozen=True)
class QuantizedActs:
    d: np.ndarray        # [m, k / 32] float32: one scale per 32 values, in either block size
    qs: np.ndarray       # [m, k] int8
    sums: np.ndarray     # [m, blocks, sub-blocks] int: the sums lq_act256's bsums hold


def quantize_acts(x: np.ndarray, block: int) -> QuantizedActs:
    """quants.h's fast-mode activations: d = max|x| / 127 per 32 values in float32 (8 of them
    in a K-quant block of 256), codes x * (1 / d) (x / d where 1 / d overflows) rounded to
    nearest, ties away from zero."""
    m, k = x.shape
    groups = x.reshape(m, k // 32, 32)
    d = (np.abs(groups).max(axis=-1) / np.float32(127)).astype(np.float32)[..., None]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
        scaled = np.where(np.isinf(inv), groups / d, groups * inv)
    qs = np.clip(round_away(scaled), -127, 127).astype(np.int8)
    d = d[..., 0]
    sums = qs.reshape(m, k // block, -1, 16).astype(np.int64).sum(axis=-1)
    return QuantizedActs(d, qs.reshape(m, k), sums)


def transposed_codes(qs: np.ndarray) -> np.ndarray:
    """lq_act256's qt from its qs ([..., 256] each): the 8 sub-blocks of 32 transposed in
    units of 4 codes, qt[32 c + 4 j + b] = qs[32 j + 4 c + b]."""
    units = qs.reshape(*qs.shape[:-1], 8, 8, 4)
    return np.swapaxes(units, -3, -2).reshape(qs.shape)


def parse_acts(qtype: T, xq: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                           np.ndarray]:
    """lq_act32 (d, s, qs[32]) or lq_act256 (d[8], s[8], bsums[16], qs[256], qt[256]) rows,
    as arrays (d and s one per 32 values); asserts that a K-quant block's qt is its qs
    transposed."""
    m = xq.shape[0]
    if act_block(qtype) == 32:
        rec = np.dtype([("d", "<f4"), ("s", "<f4"), ("qs", "i1", 32)])
        a = xq.view(rec).reshape(m, k // 32)
        return a["d"], a["qs"].reshape(m, k), a["s"], np.zeros((m, 0))
    rec = np.dtype([("d", "<f4", 8), ("s", "<f4", 8), ("bsums", "<i2", 16), ("qs", "i1", 256),
                    ("qt", "i1", 256)])
    a = xq.view(rec).reshape(m, k // 256)
    assert np.array_equal(a["qt"], transposed_codes(a["qs"]))
    return (a["d"].reshape(m, -1), a["qs"].reshape(m, k), a["s"].reshape(m, -1), a["bsums"])


def activations(m: int, k: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((m, k)).astype(np.float32)
    x[0, :40] = 0.0  # an all-zero block of activations
    return x


def assert_within(got: np.ndarray, expected: np.ndarray, tol: np.ndarray, what: str) -> None:
    err = np.abs(got.astype(np.float64) - expected)
    bad = np.argwhere(~(err <= tol))
    assert bad.size == 0, (
        f"{what}: {len(bad)} of {got.size} outputs off, first y{tuple(bad[0])} = "
        f"{got[tuple(bad[0])]!r} vs {expected[tuple(bad[0])]!r} (tolerance "
        f"{tol[tuple(bad[0])]:.3g})")


# ---- the tests ------------------------------------------------------------------------


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_row_and_activation_sizes(kernels, qtype):
    block, size = GGML_QUANT_SIZES[qtype]
    k = 512
    assert kernels.row_bytes(qtype, k) == k // block * size
    act = {1: 4 * k, 32: k // 32 * 40, 256: k // 256 * 608}[act_block(qtype)]
    assert kernels.act_bytes(qtype, k) == act
    if block > 1:
        assert kernels.row_bytes(qtype, k + block // 2) == 0
        assert kernels.act_bytes(qtype, k + block // 2) == 0
    assert kernels.row_bytes(qtype, 0) == 0


def test_unknown_types_have_no_size(kernels):
    for qtype in (T.IQ4_NL, T.Q8_1, 99):
        assert kernels.row_bytes(int(qtype), 512) == 0
        assert kernels.act_bytes(int(qtype), 512) == 0


@pytest.mark.parametrize("qtype", QUANTIZED, ids=lambda t: t.name)
def test_dequantized_rows_are_gguf_bit_for_bit(kernels, qtype):
    """Random code bytes under scales of every kind (zero, -0, subnormal, up to 65504),
    and gguf's own quantized blocks where it writes the type."""
    k = 1024
    for seed in range(3):
        if qtype == T.MXFP4:  # no fp16 scale: every byte is a valid E8M0 exponent
            raw = np.random.default_rng(seed).integers(0, 256, (4, 17 * k // 32), np.uint8)
        else:
            raw = random_tensor(qtype, (4, k), seed).raw
        with np.errstate(over="ignore"):  # MXFP4's largest exponents overflow, as in C
            expected = np.asarray(dequantize(raw, qtype), np.float32).reshape(4, k)
        assert_bit_identical(kernels.dequantize(qtype, k, raw), expected)
    if qtype in GGUF_QUANTIZES:
        w = make_weights(qtype, 4, k, seed=7)
        assert_bit_identical(kernels.dequantize(qtype, k, w.raw), w.values)


@pytest.mark.parametrize("qtype", DENSE, ids=lambda t: t.name)
def test_dense_rows_are_gguf_bit_for_bit(kernels, qtype):
    """Every 16-bit pattern (subnormals, infinities, NaNs) for F16 and BF16."""
    if qtype == T.F32:
        bits = np.random.default_rng(0).integers(0, 2**32, 4096, np.uint32)
    else:
        bits = np.arange(2**16, dtype=np.uint16)
    raw = bits.view(np.uint8).reshape(1, -1)
    k = bits.size
    got = kernels.dequantize(qtype, k, raw)
    assert_same_floats(got, np.asarray(dequantize(raw, qtype), np.float32).reshape(1, k))


def assert_same_floats(got: np.ndarray, expected: np.ndarray) -> None:
    """Bit for bit, NaNs (whose payloads numpy and C may set apart) only in the same places."""
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan)
    assert_bit_identical(np.where(nan, 0, got).astype(np.float32),
                         np.where(nan, 0, expected).astype(np.float32))


@pytest.mark.skipif(not custom_ops().available, reason=f"no custom-op library: {custom_ops().why}")
@pytest.mark.parametrize("qtype", [t for t in TYPES if t != T.MXFP4], ids=lambda t: t.name)
def test_gathered_rows_are_gguf_bit_for_bit(qtype):
    """The token embeddings a step is fed: rows in any order, repeated, gathered in one
    call, each gguf's de-quantized row."""
    k, ids = 512, np.array([7, 0, 49, 7, 13, 49])
    raw = random_tensor(qtype, (50, k), seed=3).raw
    got = custom_ops().gather_rows(int(qtype), k, raw, ids)
    assert_same_floats(got, np.asarray(dequantize(raw[ids], qtype), np.float32)
                       .reshape(len(ids), k))


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_exact_mode_is_x_times_dequantized_weights(kernels, qtype):
    """Within float32 accumulation error of the float64 product with gguf's values."""
    for k in ks_for(qtype):
        w = make_weights(qtype, ROWS, k, seed=k)
        for m in (1, 3, 17):
            x = activations(m, k, seed=m)
            y = kernels.matmul("exact", qtype, x, w.raw)
            expected = x.astype(np.float64) @ w.values.T.astype(np.float64)
            tol = 1e-5 * (np.abs(x).astype(np.float64) @ np.abs(w.values).T)
            assert_within(y, expected, tol, f"{qtype.name} k={k} m={m}")


@pytest.mark.parametrize("qtype", QUANTIZED, ids=lambda t: t.name)
def test_activations_are_quantized_to_nearest_with_float32_scales(kernels, qtype):
    k = ks_for(qtype)[-1]
    x = activations(5, k, seed=3)
    x[1, :4] = [127.0, 2.5, -2.5, 0.5]  # d = 1 exactly: ties, rounded away from zero
    x[2, :256] *= np.float32(1e-40)  # subnormal: 1 / d overflows
    x[2, :16] = 0.0
    d, qs, s, bsums = parse_acts(qtype, kernels.quantize_act(qtype, x), k)
    assert qs[1, :4].tolist() == [127, 3, -3, 1]
    assert not qs[2, :16].any() and np.abs(qs[2, 16:256]).max() == 127
    assert (np.abs(qs[2, 16:256]) < 127).sum() > 100
    ref = quantize_acts(x, act_block(qtype))
    assert_bit_identical(d, ref.d)
    assert np.array_equal(qs, ref.qs)
    sums32 = ref.sums.reshape(len(x), -1, 2).sum(axis=-1).astype(np.float32)
    assert_bit_identical(s, ref.d * sums32)
    if act_block(qtype) == 256:
        assert np.array_equal(bsums, ref.sums)


@pytest.mark.parametrize("qtype", DENSE, ids=lambda t: t.name)
def test_dense_fast_mode_is_exact_mode(kernels, qtype):
    """No integer path: the activations stay float32 and the results are exact mode's."""
    k = ks_for(qtype)[-1]
    w = make_weights(qtype, ROWS, k, seed=1)
    x = activations(3, k, seed=2)
    xq = kernels.quantize_act(qtype, x)
    assert np.array_equal(xq.view(np.float32), x)
    assert_bit_identical(kernels.matmul("fast", qtype, xq, w.raw),
                         kernels.matmul("exact", qtype, x, w.raw))


@pytest.mark.parametrize("qtype", QUANTIZED, ids=lambda t: t.name)
def test_fast_mode_is_the_int8_product(kernels, qtype):
    """Fast mode equals the product of the quantized activations with gguf's values up to
    float32 rounding, and so stays within the int8 rounding error of exact mode: at most
    d/2 per activation (times a hair for 1/d's rounding)."""
    block = act_block(qtype)
    for k in ks_for(qtype):
        w = make_weights(qtype, ROWS, k, seed=k + 1)
        for m in (1, 3, 17):
            x = activations(m, k, seed=m + 1)
            xq = kernels.quantize_act(qtype, x)
            ref = quantize_acts(x, block)
            step = np.repeat(ref.d, 32, axis=1).astype(np.float64)  # [m, k]
            x_hat = ref.qs.astype(np.float64) * step
            y = kernels.matmul("fast", qtype, xq, w.raw)
            what = f"{qtype.name} k={k} m={m}"
            assert_within(y, x_hat @ w.values.T.astype(np.float64),
                          1e-5 * (np.abs(x_hat) @ w.bound.T), what + " vs int8 product")
            exact = kernels.matmul("exact", qtype, x, w.raw)
            int8_error = (0.5 + 1e-4) * step @ np.abs(w.values).T
            assert_within(y, exact.astype(np.float64),
                          int8_error + 1e-5 * (np.abs(x) @ w.bound.T), what + " vs exact")


@pytest.mark.parametrize("mode", ["exact", "fast"])
@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_each_output_is_independent_of_m_and_the_columns_computed(kernels, qtype, mode):
    """y[i][j] to the bit: one row of x or seventeen, all columns or any split of them."""
    k = ks_for(qtype)[-1]
    w = make_weights(qtype, ROWS, k, seed=5)
    x = activations(17, k, seed=6)
    xin = x if mode == "exact" else kernels.quantize_act(qtype, x)
    whole = kernels.matmul(mode, qtype, xin, w.raw)
    assert not np.isnan(whole).any()
    for i in (0, 5, 16):
        assert_bit_identical(kernels.matmul(mode, qtype, xin[i:i + 1], w.raw), whole[i:i + 1])
    assert_bit_identical(kernels.matmul(mode, qtype, xin[3:6], w.raw), whole[3:6])
    for splits in ([0, 3, 4, ROWS], [0, 1, 2, 9, 30, ROWS], [0, 17, ROWS]):
        y = np.full((17, ROWS + 3), np.nan, np.float32)  # ldy wider than the columns
        for j0, j1 in pairwise(splits):
            kernels.matmul(mode, qtype, xin, w.raw, j0, j1, y)
        assert_bit_identical(y[:, :ROWS], whole)
        assert np.isnan(y[:, ROWS:]).all()


def test_portable_kernels_on_request(kernels):
    """LANTERN_KERNELS=portable, set before the library loads, selects the portable
    kernels; without it the library names the widest kernels the CPU runs."""
    assert kernels.isa() in ("avx512-vnni", "avx512", "avx2", "neon", "portable")
    code = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); "
            "lib.lq_isa.restype = ctypes.c_char_p; print(lib.lq_isa().decode())")
    env = {**os.environ, "LANTERN_KERNELS": "portable"}
    out = subprocess.run([sys.executable, "-c", code, str(kernels.path)], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "portable"


@pytest.mark.parametrize("mode", ["exact", "fast"])
@pytest.mark.parametrize("qtype", [T.F16, T.Q4_1, T.Q4_K], ids=lambda t: t.name)
def test_a_long_prefill_equals_its_rows_one_by_one(kernels, qtype, mode):
    """More rows of x than the portable kernels serve from one decoded chunk (128)."""
    k = 512
    w = make_weights(qtype, 5, k, seed=8)
    x = activations(300, k, seed=9)
    xin = x if mode == "exact" else kernels.quantize_act(qtype, x)
    whole = kernels.matmul(mode, qtype, xin, w.raw)
    for i in (0, 127, 128, 299):
        assert_bit_identical(kernels.matmul(mode, qtype, xin[i:i + 1], w.raw), whole[i:i + 1])
    if mode == "exact":
        expected = x.astype(np.float64) @ w.values.T.astype(np.float64)
        tol = 1e-5 * (np.abs(x).astype(np.float64) @ np.abs(w.values).T)
        assert_within(whole, expected, tol, f"{qtype.name} m=300")


def test_demo_model_rows_are_gguf_bit_for_bit(kernels, demo_05b):
    """A sample of rows of every matrix of the real 0.5B model: de-quantized to gguf's
    values, and exact mode within float32 error of x times them."""
    from engine.gguf import open_model

    model = open_model(demo_05b)
    rng = np.random.default_rng(0)
    seen = set()
    x = activations(3, 8960, seed=1)
    for name, t in model.tensors.items():
        if len(t.shape) != 2:
            continue
        k = t.shape[1]
        rows = np.sort(rng.choice(t.shape[0], size=min(t.shape[0], 8), replace=False))
        raw = np.ascontiguousarray(t.raw[rows])
        expected = np.asarray(dequantize(raw, t.ggml_type), np.float32).reshape(len(rows), k)
        assert_bit_identical(kernels.dequantize(t.ggml_type, k, raw), expected)
        y = kernels.matmul("exact", t.ggml_type, x[:, :k], raw)
        xk = x[:, :k].astype(np.float64)
        assert_within(y, xk @ expected.T.astype(np.float64),
                      1e-5 * (np.abs(xk) @ np.abs(expected).T), name)
        seen.add(t.ggml_type)
    assert {T.Q4_K, T.Q5_0, T.Q6_K, T.Q8_0} <= seen


ARM64_CC, QEMU = shutil.which("aarch64-linux-gnu-gcc"), shutil.which("qemu-aarch64")


@pytest.mark.skipif(ARM64_CC is None or QEMU is None or compile_cc() is None,
                    reason="needs a C compiler, aarch64-linux-gnu-gcc and qemu-aarch64")
def test_arm64_builds_give_this_machines_bits(tmp_path):
    """The portable kernels are the ones ARM machines run: built for ARM64 (where the
    compiler would fuse a * b + c into one instruction if quants.c let it) they give
    every output to the bit as here, de-quantized rows, activations and both modes."""
    sources = [str(NATIVE / "quants.c"), str(Path(__file__).with_name("dump_quants.c"))]
    outputs = []
    for cc, runner in ((compile_cc(), []), (ARM64_CC, [QEMU, "-L", "/usr/aarch64-linux-gnu"])):
        exe = tmp_path / f"dump-{len(outputs)}"
        subprocess.run([cc, "-O2", "-std=gnu11", "-DLQ_NO_X86", f"-I{NATIVE}", *sources,
                        "-o", str(exe), "-lm"], check=True)
        outputs.append(subprocess.run([*runner, str(exe)], capture_output=True,
                                      check=True).stdout)
    assert len(outputs[0]) > 6_000_000
    assert outputs[0] == outputs[1]
