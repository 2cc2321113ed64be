"""The wall a decode step runs into: the machine's read bandwidth with 1 and 2 threads, and
the decode tokens/s it allows each demo model.

A one-token step reads every weight of the model once (the token embedding: one row,
unless it is also the output matrix) plus the KV cache so far; at the demo models' sizes
that is far more than the last-level cache, so a step cannot run faster than those bytes
stream from memory. Bandwidth: a sum over a buffer much larger than the LLC
(benchmarks/stream_read.c, built with `cc -O2`), each thread reading its own slice, best
and median of rounds (the machine may be shared: the best round is nearest the ceiling).
With --decode, Lantern (fast mode) and llama.cpp decode on the same GGUF with the same
threads in this process, rounds alternating between the bandwidth measurements: how near
each comes to the wall.

    .venv/bin/python -m benchmarks.memory_ceiling [--model 0.5b 1.5b] [--mib 1024] [--decode]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("stream_read.c")


def stream_reader(workdir: Path) -> ctypes.CDLL:
    lib_path = workdir / "libstream_read.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib_path), str(SOURCE)],
                   check=True)
    lib = ctypes.CDLL(str(lib_path))
    lib.stream_sum.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.stream_sum.restype = ctypes.c_uint64
    return lib


def read_seconds(lib: ctypes.CDLL, buf: np.ndarray, threads: int, passes: int) -> float:
    """Wall seconds for ``threads`` threads to read their slices of ``buf`` ``passes`` times
    (ctypes lets go of the GIL during the call)."""
    slices = np.array_split(buf, threads)
    start = threading.Barrier(threads + 1)

    def worker(part: np.ndarray) -> None:
        start.wait()
        for _ in range(passes):
            lib.stream_sum(part.ctypes.data, part.nbytes)

    workers = [threading.Thread(target=worker, args=(part,)) for part in slices]
    for w in workers:
        w.start()
    start.wait()
    began = time.perf_counter()
    for w in workers:
        w.join()
    return time.perf_counter() - began


def bandwidth(lib: ctypes.CDLL, mib: int, threads: int, rounds: int) -> tuple[float, float]:
    """(best, median) GB/s over ``rounds``."""
    buf = np.ones(mib << 20, np.uint8)  # written, so every page is real memory
    passes = 3
    read_seconds(lib, buf, threads, 1)  # warm-up
    rates = [buf.nbytes * passes / read_seconds(lib, buf, threads, passes) / 1e9
             for _ in range(rounds)]
    return max(rates), statistics.median(rates)


def step_bytes(path: Path, context: int) -> tuple[int, int]:
    """(weight bytes a one-token step reads, KV cache bytes at ``context`` positions in
    float32)."""
    from engine.gguf import open_model

    model = open_model(path)
    text = model.config.text
    weights = 0
    for name, t in model.tensors.items():
        if name == "token_embd.weight" and not text.tie_embeddings:
            weights += t.n_bytes // t.shape[0]  # the one row of the token
        elif not name.startswith(("v.", "mm.")):  # the vision tower runs once per image
            weights += t.n_bytes
    kv_per_position = 2 * text.n_layers * text.n_kv_heads * text.head_dim * 4
    return weights, kv_per_position * context


def decode_rates(path: Path, threads: int, tokens: int, rounds: int) -> dict[str, float]:
    """Best decode tokens/s per engine: ``tokens`` one-token steps after a 20-token prompt."""
    from llama_cpp import Llama

    from engine.gguf import open_model
    from engine.runtime.decoder import DecoderSession

    prompt = [int(t) for t in np.random.default_rng(0).integers(0, 10_000, 20)]
    session = DecoderSession(open_model(path), threads=threads,
                             max_cache_len=len(prompt) + tokens + 8)
    llm = Llama(model_path=str(path), n_threads=threads, n_threads_batch=threads,
                n_ctx=len(prompt) + tokens + 8, verbose=False)

    def lantern(ids: list[int]) -> int:
        return int(session.forward(input_ids=ids).logits.argmax())

    def llama_cpp(ids: list[int]) -> int:
        llm.eval(ids)
        return int(np.argmax(llm.scores[llm.n_tokens - 1]))

    engines = {"Lantern": (session.reset, lantern), "llama.cpp": (llm.reset, llama_cpp)}
    best = dict.fromkeys(engines, 0.0)
    for _ in range(rounds):
        for name, (reset, step) in engines.items():
            reset()
            token = step(prompt)
            started = time.perf_counter()
            for _ in range(tokens):
                token = step([token])
            best[name] = max(best[name], tokens / (time.perf_counter() - started))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="+", choices=("0.5b", "1.5b"), default=["0.5b", "1.5b"])
    parser.add_argument("--mib", type=int, default=1024, help="buffer size (>> the LLC)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--context", type=int, default=128,
                        help="KV cache positions a step reads (float32, as Lantern keeps it)")
    parser.add_argument("--decode", action="store_true",
                        help="also decode with Lantern and llama.cpp (2 threads) and compare")
    parser.add_argument("--tokens", type=int, default=32, help="decode steps per round")
    args = parser.parse_args()
    from engine.cpu import cpu_info
    from tests.fixtures.demo_models import DEMO_MODELS, fetch

    print(f"{cpu_info().describe()}, {os.cpu_count()} CPUs; load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    paths = {key: fetch(DEMO_MODELS[key]) for key in args.model}
    rates = {}
    with tempfile.TemporaryDirectory() as tmp:
        lib = stream_reader(Path(tmp))
        ceilings = {1: 0.0, 2: 0.0}
        for phase in ("before", "after") if args.decode else ("",):
            for threads in (1, 2):
                best, med = bandwidth(lib, args.mib, threads, args.rounds)
                ceilings[threads] = max(ceilings[threads], best)
                print(f"read, {threads} thread{'s' * (threads > 1)}{' ' * bool(phase)}{phase}: "
                      f"best {best:.1f} GB/s, median {med:.1f} GB/s ({args.rounds} rounds of "
                      f"{args.mib} MiB x 3)", flush=True)
            if phase == "before":
                rates = {key: decode_rates(paths[key], 2, args.tokens, 3) for key in paths}
    print(f"\n| model | weights a step reads | KV at {args.context} | decode ceiling, 1 thread "
          "| 2 threads | 1.1x llama.cpp possible while llama.cpp below |")
    print("|---|---|---|---|---|---|")
    steps = {}
    for key, path in paths.items():
        weights, kv = step_bytes(path, args.context)
        steps[key] = weights + kv
        one, two = (ceilings[t] * 1e9 / steps[key] for t in (1, 2))
        print(f"| {key} | {weights / 1e6:.0f} MB | {kv / 1e6:.1f} MB | {one:.1f} tok/s "
              f"| {two:.1f} tok/s | {two / 1.1:.1f} tok/s |")
    if rates:
        print("\n| model | engine | decode tok/s (best of 3) | reads at "
              "| of the 2-thread ceiling |")
        print("|---|---|---|---|---|")
        for key, by_engine in rates.items():
            for engine, rate in by_engine.items():
                gbs = rate * steps[key] / 1e9
                print(f"| {key} | {engine} | {rate:.1f} | {gbs:.1f} GB/s "
                      f"| {gbs / ceilings[2]:.0%} |")


if __name__ == "__main__":
    main()
