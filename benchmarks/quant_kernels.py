"""Per-op speed of Lantern's quantized matmul kernels (engine/native/quants.c with the x86
kernels of quants_x86.c), with
llama.cpp's own matmul (ggml's mul_mat, from llama-cpp-python's libraries) on the same
GGUF blocks as the yardstick; one thread each.

For each format at the demo models' shapes (out x in; a K-quant only where `in` is a whole
number of 256-blocks): the one-row product (decode) in GB/s of weight bytes — copies of the
matrix, about 128 MiB in all, are cycled so that no call finds its weights in cache, as in
a real decode step — and the 512-row product (prefill) in GFLOP/s (2*m*n*k). Both get the
same float activations; Lantern's figure times lq_matmul_fast alone (the op quantizes the
activations once per matmul with lq_quantize_act, beforehand here), ggml's includes its own
quantization of them (O(m*k), small beside O(m*n*k)). Times are the calling thread's CPU
time (the machine is shared: time spent descheduled is not the kernel's), best round of
each, Lantern and ggml alternating.

    PYTHONPATH=. .venv/bin/python -m benchmarks.quant_kernels [--isa avx2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as T

from benchmarks.matmul_nbits import FP16_FIELDS

NATIVE = Path(__file__).resolve().parents[1] / "engine" / "native"
SHAPES = [(896, 4864), (4864, 896), (1536, 8960), (8960, 1536)]
FORMATS = [T.Q4_K, T.Q6_K, T.Q5_0, T.Q8_0, T.Q4_0]
PREFILL_ROWS = 512
STREAM_BYTES = 128 << 20


def random_weights(qtype: T, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Random codes with small finite fp16 scales: what the timing needs."""
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n, k // block, size), dtype=np.uint8)
    for at in FP16_FIELDS[qtype]:
        d = (rng.random((n, k // block)) * 0.01).astype(np.float16)
        raw[..., at:at + 2] = d.view(np.uint8).reshape(n, k // block, 2)
    return raw.reshape(n, -1)


class Lantern:
    """quants.c and quants_x86.c built with `cc -O2` (no -m flags), the kernel set chosen by
    isa (LANTERN_KERNELS)."""

    def __init__(self, workdir: Path, isa: str | None):
        lib = workdir / "liblantern_quants.so"
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib),
                        str(NATIVE / "quants.c"), str(NATIVE / "quants_x86.c")], check=True)
        if isa:
            os.environ["LANTERN_KERNELS"] = isa
        self.lib = ctypes.CDLL(str(lib))
        self.lib.lq_isa.restype = ctypes.c_char_p
        self.isa = self.lib.lq_isa().decode()
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        self.lib.lq_act_bytes.argtypes = [ctypes.c_int, i64]
        self.lib.lq_act_bytes.restype = ctypes.c_size_t
        self.lib.lq_quantize_act.argtypes = [ctypes.c_int, i64, ptr, ptr]
        self.lib.lq_matmul_fast.argtypes = [ctypes.c_int, i64, i64, ptr, ptr, i64, i64, ptr,
                                            i64]

    def timer(self, qtype: T, k: int, copies: list[np.ndarray], x: np.ndarray):
        n, m = copies[0].shape[0], x.shape[0]
        xq = np.zeros((m, self.lib.lq_act_bytes(int(qtype), k)), np.uint8)
        for i in range(m):
            self.lib.lq_quantize_act(int(qtype), k, x[i].ctypes.data, xq[i].ctypes.data)
        y = np.zeros((m, n), np.float32)

        def run() -> None:
            for w in copies:
                self.lib.lq_matmul_fast(int(qtype), k, m, xq.ctypes.data, w.ctypes.data, 0, n,
                                        y.ctypes.data, n)

        return run


class GgmlInitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p),
                ("no_alloc", ctypes.c_bool)]


class GgmlCplan(ctypes.Structure):
    _fields_ = [("work_size", ctypes.c_size_t), ("work_data", ctypes.c_void_p),
                ("n_threads", ctypes.c_int), ("threadpool", ctypes.c_void_p),
                ("abort_callback", ctypes.c_void_p), ("abort_callback_data", ctypes.c_void_p),
                ("use_ref", ctypes.c_bool)]


class Ggml:
    """ggml's mul_mat through llama-cpp-python's shared libraries (ctypes on ggml.h)."""

    def __init__(self):
        spec = importlib.util.find_spec("llama_cpp")
        if spec is None or spec.origin is None:
            raise RuntimeError("llama-cpp-python is not installed: no llama.cpp yardstick")
        libdir = Path(spec.origin).parent / "lib"
        self.base = ctypes.CDLL(str(libdir / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
        self.cpu = ctypes.CDLL(str(libdir / "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
        vp = ctypes.c_void_p
        self.base.ggml_init.restype = vp
        self.base.ggml_init.argtypes = [GgmlInitParams]
        self.base.ggml_free.argtypes = [vp]
        self.base.ggml_new_tensor_2d.restype = vp
        self.base.ggml_new_tensor_2d.argtypes = [vp, ctypes.c_int, ctypes.c_int64,
                                                 ctypes.c_int64]
        self.base.ggml_mul_mat.restype = vp
        self.base.ggml_mul_mat.argtypes = [vp, vp, vp]
        self.base.ggml_new_graph.restype = vp
        self.base.ggml_new_graph.argtypes = [vp]
        self.base.ggml_build_forward_expand.argtypes = [vp, vp]
        self.base.ggml_get_data.restype = vp
        self.base.ggml_get_data.argtypes = [vp]
        self.cpu.ggml_graph_plan.restype = GgmlCplan
        self.cpu.ggml_graph_plan.argtypes = [vp, ctypes.c_int, vp]
        self.cpu.ggml_graph_compute.argtypes = [vp, ctypes.POINTER(GgmlCplan)]

    def timer(self, qtype: T, k: int, copies: list[np.ndarray], x: np.ndarray):
        n, m = copies[0].shape[0], x.shape[0]
        size = sum(w.nbytes for w in copies) + x.nbytes + 4 * m * n * len(copies)
        ctx = self.base.ggml_init(GgmlInitParams(size + (64 << 20), None, False))
        xt = self.base.ggml_new_tensor_2d(ctx, int(T.F32), k, m)
        ctypes.memmove(self.base.ggml_get_data(xt), x.ctypes.data, x.nbytes)
        graph = self.base.ggml_new_graph(ctx)
        for w in copies:
            wt = self.base.ggml_new_tensor_2d(ctx, int(qtype), k, n)
            ctypes.memmove(self.base.ggml_get_data(wt), w.ctypes.data, w.nbytes)
            self.base.ggml_build_forward_expand(graph, self.base.ggml_mul_mat(ctx, wt, xt))
        plan = self.cpu.ggml_graph_plan(graph, 1, None)
        work = np.zeros(max(plan.work_size, 1), np.uint8)
        plan.work_data = work.ctypes.data

        def run() -> None:
            self.cpu.ggml_graph_compute(graph, ctypes.byref(plan))

        run.keep = (ctx, work)  # the context and work buffer live as long as the timer
        return run


def best_seconds(runs: list, rounds: int) -> list[float]:
    """Best-round seconds per call of each timer, the timers alternating round by round."""
    times: list[list[float]] = [[] for _ in runs]
    for run in runs:
        run()  # warm-up
    for _ in range(rounds):
        for t, run in zip(times, runs, strict=True):
            start = time.thread_time()
            run()
            t.append(time.thread_time() - start)
    return [min(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--isa", help="LANTERN_KERNELS for Lantern's library (avx2, portable)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--formats", nargs="+", default=[f.name for f in FORMATS])
    parser.add_argument("--prefill-rows", type=int, default=PREFILL_ROWS,
                        help="rows of the many-row product (512: a prompt's prefill)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        lantern = Lantern(Path(tmp), args.isa)
        ggml = Ggml()
        print(f"Lantern kernels: {lantern.isa}; one thread; load average "
              f"{os.getloadavg()[0]:.2f}")
        print("| format | out x in | decode GB/s Lantern | llama.cpp | ratio "
              f"| prefill@{args.prefill_rows} GFLOP/s Lantern | llama.cpp | ratio |")
        print("|---|---|---|---|---|---|---|---|")
        for qtype in (T[name] for name in args.formats):
            block = GGML_QUANT_SIZES[qtype][0]
            for n, k in SHAPES:
                if k % block:
                    continue
                w = random_weights(qtype, n, k, rng)
                copies = [w] + [w.copy() for _ in range(max(0, STREAM_BYTES // w.nbytes - 1))]
                cells = []
                for m, mats in ((1, copies), (args.prefill_rows, [w])):
                    x = rng.standard_normal((m, k)).astype(np.float32)
                    ours, theirs = best_seconds(
                        [lantern.timer(qtype, k, mats, x), ggml.timer(qtype, k, mats, x)],
                        args.rounds)
                    if m == 1:
                        scale = w.nbytes * len(mats) / 1e9
                    else:
                        scale = 2 * m * n * k * len(mats) / 1e9
                    cells += [f"{scale / ours:.1f}", f"{scale / theirs:.1f}",
                              f"{theirs / ours:.2f}x"]
                print(f"| {qtype.name} | {n}x{k} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
