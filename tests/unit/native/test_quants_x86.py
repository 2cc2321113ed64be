"""The x86 SIMD kernels (engine/native/quants_x86.c) against numpy references and against
the portable kernels (quants.c): fast mode against the exact integer block sums, exact mode
against gguf.quants.dequantize to the bit, and every value independent of how rows and
columns are split. Each kernel set this CPU runs is tested (AVX2 forced with
LANTERN_KERNELS=avx2 on an AVX-512 CPU)."""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import quants

from tests.unit.native.test_quants import (
    SCALES,
    activations,
    assert_within,
    compile_portable,
    make_weights,
    transposed_codes,
)
from tests.unit.native.test_quants import Kernels as Library

NATIVE = Path(__file__).resolve().parents[3] / "engine" / "native"
FORMATS = [T.Q4_K, T.Q6_K, T.Q5_0, T.Q8_0, T.Q4_0]
ISAS = ["avx2", "avx512-vnni"]
ACT32 = np.dtype([("d", "<f4"), ("s", "<f4"), ("qs", "i1", 32)])
ACT256 = np.dtype([("d", "<f4", 8), ("s", "<f4", 8), ("bsums", "<i2", 16), ("qs", "i1", 256),
                   ("qt", "i1", 256)])

pytestmark = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64") or shutil.which("cc") is None,
    reason="the x86 kernels need an x86-64 CPU and a C compiler",
)


def _cpu_flags() -> set[str]:
    """The CPU's features as Linux lists them: the tests' own word on what the kernels'
    run-time choice should find."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.skip("no /proc/cpuinfo to read this CPU's features from (Linux only)")
    for line in cpuinfo.read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


class Kernels:
    """ctypes view of one copy of the library, its kernel set fixed by LANTERN_KERNELS."""

    def __init__(self, path: Path, want: str):
        os.environ["LANTERN_KERNELS"] = want
        try:
            self.lib = ctypes.CDLL(str(path))
            self.lib.lq_x86_isa.restype = ctypes.c_char_p
            self.isa = (self.lib.lq_x86_isa() or b"").decode()
        finally:
            del os.environ["LANTERN_KERNELS"]
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        for name in ("lq_x86_matmul_fast", "lq_x86_matmul_exact"):
            getattr(self.lib, name).argtypes = [
                ctypes.c_int, i64, i64, ptr, ptr, i64, i64, ptr, i64
            ]

    def matmul(self, mode: str, qtype: int, k: int, x: np.ndarray, w: np.ndarray,
               j0: int, j1: int, y: np.ndarray) -> None:
        """y[i, j] for j0 <= j < j1 (y's row stride is its width)."""
        done = getattr(self.lib, f"lq_x86_matmul_{mode}")(
            int(qtype), k, x.shape[0], x.ctypes.data, w.ctypes.data, j0, j1, y.ctypes.data,
            y.shape[1],
        )
        assert done == 1, f"no {mode} kernel for {qtype.name} in {self.isa}"


def _build(isa: str, out: Path, *sources: str) -> Path:
    """Sources from engine/native compiled as the tests build them, no -m flags; skips
    (saying why) when this CPU cannot run the kernel set isa."""
    flags = _cpu_flags()
    if isa == "avx512-vnni" and not {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= flags:
        pytest.skip("this CPU has no AVX-512 VNNI: the AVX-512 kernels cannot run here")
    if not {"avx2", "fma", "f16c"} <= flags:
        pytest.skip("this CPU has no AVX2+FMA: the x86 kernels cannot run here")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(out),
                    *(str(NATIVE / name) for name in sources)], check=True)
    return out


@pytest.fixture(scope="module", params=ISAS)
def kernels(request, tmp_path_factory) -> Kernels:
    """quants_x86.c alone, its kernel set forced to each one this CPU runs."""
    out = tmp_path_factory.mktemp("native") / f"lq_x86_{request.param}.so"
    loaded = Kernels(_build(request.param, out, "quants_x86.c"), request.param)
    assert loaded.isa == request.param
    return loaded


@pytest.fixture(scope="module", params=ISAS)
def library(request, tmp_path_factory) -> Library:
    """quants.c with the x86 kernels, as the op's library holds them."""
    out = tmp_path_factory.mktemp("native") / f"liblantern_quants_{request.param}.so"
    _build(request.param, out, "quants.c", "quants_x86.c")
    os.environ["LANTERN_KERNELS"] = request.param
    try:
        loaded = Library(out)
    finally:
        del os.environ["LANTERN_KERNELS"]
    assert loaded.isa() == request.param
    return loaded


@pytest.fixture(scope="module")
def portable(tmp_path_factory) -> Library:
    return Library(compile_portable(tmp_path_factory.mktemp("portable")))


def _weights(qtype: T, n: int, k: int, seed: int) -> np.ndarray:
    return make_weights(qtype, n, k, seed).raw


def _with_scales(qtype: T, w: np.ndarray, values: list[float]) -> np.ndarray:
    """w with every block's float16 scale fields set to values (to read integer codes)."""
    block, size = quants.GGML_QUANT_SIZES[qtype]
    b = w.reshape(w.shape[0], -1, size).copy()
    for off, value in zip(SCALES[qtype], values, strict=True):
        b[..., off:off + 2] = np.frombuffer(np.float16(value).tobytes(), np.uint8)
    return b.reshape(w.shape)


def _scales(qtype: T, w: np.ndarray) -> list[np.ndarray]:
    """Each block's float16 scales as float64, shape (n, blocks) each."""
    size = quants.GGML_QUANT_SIZES[qtype][1]
    b = w.reshape(w.shape[0], -1, size)
    return [b[..., off:off + 2].copy().view(np.float16)[..., 0].astype(np.float64)
            for off in SCALES[qtype]]


def _activations(qtype: T, m: int, k: int, seed: int) -> np.ndarray:
    """m rows of valid fast-mode activation blocks (|q| <= 127)."""
    rng = np.random.default_rng(seed)
    big = qtype in (T.Q4_K, T.Q6_K)
    block = 256 if big else 32
    a = np.zeros((m, k // block), ACT256 if big else ACT32)
    a["qs"] = rng.integers(-127, 128, a["qs"].shape)
    a["d"] = rng.uniform(0.001, 0.02, a["d"].shape)
    if big:
        a["bsums"] = a["qs"].reshape(m, -1, 16, 16).sum(-1, dtype=np.int32)
        a["s"] = a["d"] * a["qs"].reshape(m, -1, 8, 32).sum(-1, dtype=np.int32)
        a["qt"] = transposed_codes(a["qs"])
    else:
        a["s"] = a["d"] * a["qs"].sum(-1)
    return a


def _fast_reference(qtype: T, w: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """y in float64 from exact integer sums per 32 activations (each with its own scale), and
    the sum of |products| (the scale of float32 rounding). gguf de-quantizes blocks with unit
    scales to give integer codes."""
    n, m = w.shape[0], a.shape[0]
    xq = a["qs"].reshape(m, 1, -1, 32).astype(np.float64)  # [m, 1, blocks of 32, 32]

    def block_sums(scales: list[float]) -> tuple[np.ndarray, np.ndarray]:  # [m, n, of 32]
        codes = quants.dequantize(_with_scales(qtype, w, scales), qtype).astype(np.float64)
        products = codes.reshape(1, n, -1, 32) * xq
        return products.sum(-1), np.abs(products).sum(-1)

    dx = a["d"].astype(np.float64).reshape(m, 1, -1)
    per_block = quants.GGML_QUANT_SIZES[qtype][0] // 32
    if qtype == T.Q4_K:
        d, dmin = (np.repeat(s, per_block, axis=-1) for s in _scales(qtype, w))
        parts = [(d * dx, block_sums([1, 0])), (dmin * dx, block_sums([0, 1]))]
    else:
        parts = [(np.repeat(_scales(qtype, w)[0], per_block, axis=-1) * dx, block_sums([1]))]
    want = sum((f * s).sum(-1) for f, (s, _) in parts)
    scale = sum((f * s).sum(-1) for f, (_, s) in parts)
    return want, scale


@pytest.mark.parametrize("qtype", FORMATS, ids=lambda t: t.name)
def test_fast_equals_the_integer_block_sums(kernels, qtype):
    n, m, k = 11, 9, 768
    w = _weights(qtype, n, k, seed=1)
    a = _activations(qtype, m, k, seed=2)
    y = np.zeros((m, n), np.float32)
    kernels.matmul("fast", qtype, k, a, w, 0, n, y)
    want, scale = _fast_reference(qtype, w, a)
    err = np.abs(y - want) / scale
    assert err.max() < 1e-6, f"{qtype.name}: worst relative error {err.max():.2e}"


@pytest.mark.parametrize("qtype", FORMATS, ids=lambda t: t.name)
def test_exact_weights_are_gguf_dequantize_to_the_bit(kernels, qtype):
    """One-hot rows of x pick single weights: each y is one de-quantized value, unrounded
    (equal as floats: a sum starting at +0 cannot carry a weight's -0)."""
    n, k = 7, 512
    w = _weights(qtype, n, k, seed=3)
    x = np.eye(k, dtype=np.float32)
    y = np.zeros((k, n), np.float32)
    kernels.matmul("exact", qtype, k, x, w, 0, n, y)
    want = quants.dequantize(w, qtype).T
    assert np.array_equal(y, want), (
        f"{qtype.name}: {np.count_nonzero(y != want)} of {y.size} weights differ"
    )


@pytest.mark.parametrize("qtype", FORMATS, ids=lambda t: t.name)
def test_exact_equals_x_times_dequantized_w(kernels, qtype):
    n, m, k = 13, 6, 1536
    w = _weights(qtype, n, k, seed=4)
    x = np.random.default_rng(5).standard_normal((m, k)).astype(np.float32)
    y = np.zeros((m, n), np.float32)
    kernels.matmul("exact", qtype, k, x, w, 0, n, y)
    wf = quants.dequantize(w, qtype).astype(np.float64)
    want = x.astype(np.float64) @ wf.T
    scale = np.abs(x).astype(np.float64) @ np.abs(wf).T
    err = np.abs(y - want) / scale
    assert err.max() < 1e-6, f"{qtype.name}: worst relative error {err.max():.2e}"


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("qtype", FORMATS, ids=lambda t: t.name)
def test_rows_and_columns_split_any_way_give_the_same_bits(kernels, qtype, mode):
    """A verify step of many rows equals one-row steps, and column ranges split across
    threads equal one call over all columns, to the bit."""
    n, m, k = 10, 13, 512
    w = _weights(qtype, n, k, seed=6)
    if mode == "fast":
        x = _activations(qtype, m, k, seed=7)
    else:
        x = np.random.default_rng(7).standard_normal((m, k)).astype(np.float32)
    whole = np.zeros((m, n), np.float32)
    kernels.matmul(mode, qtype, k, x, w, 0, n, whole)
    pieces = np.zeros((m, n), np.float32)
    for i, (j0, j1) in zip(range(m), [(0, 3), (3, 4), (4, 10)] * m, strict=False):
        for a, b in ((0, j0), (j0, j1), (j1, n)):
            kernels.matmul(mode, qtype, k, x[i:i + 1], w, a, b, pieces[i:i + 1])
    rows_of_five = np.zeros((m, n), np.float32)
    for i in range(0, m, 5):
        kernels.matmul(mode, qtype, k, x[i:i + 5], w, 0, n, rows_of_five[i:i + 5])
    assert np.array_equal(whole.view(np.uint32), pieces.view(np.uint32))
    assert np.array_equal(whole.view(np.uint32), rows_of_five.view(np.uint32))


def test_unhandled_types_are_left_to_the_portable_kernels(kernels):
    y = np.zeros((1, 1), np.float32)
    x = np.zeros((1, 64), np.float32)
    w = np.zeros(1024, np.uint8)
    for qtype in (T.F16, T.Q4_1, T.Q2_K):
        assert kernels.lib.lq_x86_matmul_exact(int(qtype), 64, 1, x.ctypes.data,
                                               w.ctypes.data, 0, 1, y.ctypes.data, 1) == 0


def test_lantern_kernels_portable_turns_the_x86_kernels_off(tmp_path):
    lib = _build("avx2", tmp_path / "lq.so", "quants_x86.c")
    assert Kernels(lib, "portable").isa == ""


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("qtype", FORMATS, ids=lambda t: t.name)
def test_simd_equals_the_portable_kernels(library, portable, qtype, mode):
    """Through quants.h: the same activations (lq_quantize_act) and weights give the
    portable kernels' values up to float32 rounding (the sums run in another order)."""
    k = 2816 if qtype in (T.Q4_K, T.Q6_K) else 2592
    w = make_weights(qtype, 11, k, seed=8)
    for m in (1, 9):
        x = activations(m, k, seed=m)
        if mode == "fast":
            xin = library.quantize_act(qtype, x)
            assert np.array_equal(xin, portable.quantize_act(qtype, x))
        else:
            xin = x
        got = library.matmul(mode, qtype, xin, w.raw)
        want = portable.matmul(mode, qtype, xin, w.raw).astype(np.float64)
        assert_within(got, want, 1e-5 * (np.abs(x) @ w.bound.T),
                      f"{qtype.name} {mode} m={m} {library.isa()} vs portable")


@pytest.mark.parametrize("qtype", FORMATS, ids=lambda t: t.name)
def test_many_row_kernels_give_the_one_row_bits(kernels, qtype):
    """Prefill's many-row products (tiles of rows of x sharing each weight block, chunks of
    rows that stay in cache) give every y[i, j] the bits of one-row products: odd row counts,
    more rows than one chunk takes, and column ranges that start and end anywhere."""
    n, k, rows = 53, 512, 300
    w = _weights(qtype, n, k, seed=9)
    x = _activations(qtype, rows, k, seed=10)
    one_row = np.zeros((rows, n), np.float32)
    for i in range(rows):
        kernels.matmul("fast", qtype, k, x[i:i + 1], w, 0, n, one_row[i:i + 1])
    for m in (15, 16, 17, 33, 257, rows):
        for j0, j1 in ((0, n), (5, 48), (16, 32), (3, 20)):
            y = np.zeros((m, n), np.float32)
            kernels.matmul("fast", qtype, k, x[:m], w, j0, j1, y)
            assert np.array_equal(y[:, j0:j1].view(np.uint32),
                                  one_row[:m, j0:j1].view(np.uint32)), (m, j0, j1)
