"""Decoder speed on real GGUFs: load time, prefill and decode tokens/s, RSS; optionally
against llama.cpp (llama-cpp-python, not a Lantern dependency) on the same file and threads.

Fast mode (int8 activations), CPU. Each round loads every engine twice, each time in a
fresh child process (so RSS is that load's own): "cold" with an empty Lantern graph cache
(re-pack, store, map), then "warm" (a cache hit) which also measures speed and memory.
GGUF pages may be in the OS page cache either way. Rounds alternate the engines so a busy
machine slows them alike; the table shows medians, then the best round per engine. Prefill
runs on a fresh KV cache; decode feeds one token at a time (the argmax) after 20 tokens.
Re-quantized runs are labelled: their weights are NOT the GGUF's exact values.

    .venv/bin/python -m benchmarks.decode [--model 0.5b 1.5b] [--threads 2]
        [--requantize q4 ...] [--vs-llama-cpp] [--rounds 3]
    .venv/bin/python -m benchmarks.decode --gguf path/to/model.gguf
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SHORT, LONG, DECODE = 20, 512, 64
EXACT_WEIGHTS = "exact"


@dataclass(frozen=True)
class Result:
    load_cold: float      # s, first load (Lantern: empty graph cache)
    peak_cold: float      # MiB, peak RSS of the process that loaded cold
    load_warm: float      # s, a new process loading again (Lantern: cache hit)
    prefill_short: float  # tok/s at SHORT
    prefill_long: float   # tok/s at LONG
    decode: float         # tok/s
    rss: float            # MiB after the runs (warm process)
    peak_rss: float       # MiB, peak of the warm process


def _prompt(n: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(n).integers(0, 10_000, n)]


def _rss_mib() -> tuple[float, float]:
    """(current, peak) resident memory of this process."""
    with open("/proc/self/status") as f:
        current = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
    return current / 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _speeds(prefill: Callable[[list[int]], int], step: Callable[[int], int]) -> list[float]:
    """[prefill tok/s at SHORT, at LONG, decode tok/s]; ``prefill`` starts a fresh cache."""
    rates = []
    for n in (SHORT, LONG):
        best = float("inf")
        for _ in range(3 if n == SHORT else 1):
            started = time.perf_counter()
            prefill(_prompt(n))
            best = min(best, time.perf_counter() - started)
        rates.append(n / best)
    token = step(prefill(_prompt(SHORT)))  # warm the one-token shapes
    started = time.perf_counter()
    for _ in range(DECODE):
        token = step(token)
    return [*rates, DECODE / (time.perf_counter() - started)]


def lantern(path: str, threads: int, requantize: str | None, measure: bool) -> list[float]:
    """Load (cold or warm: LANTERN_CACHE_DIR is set by the caller) and, if ``measure``, run."""
    from engine.gguf import open_model
    from engine.runtime.decoder import DecoderSession

    session = DecoderSession(open_model(path), threads=threads, requantize=requantize,
                             max_cache_len=LONG + DECODE + 8)
    if not measure:
        return [session.load_seconds, *_rss_mib()]

    def prefill(ids: list[int]) -> int:
        session.reset()
        return int(session.forward(input_ids=ids).logits.argmax())

    def step(token: int) -> int:
        return int(session.forward(input_ids=[token]).logits.argmax())

    return [session.load_seconds, *_speeds(prefill, step), *_rss_mib()]


def llama_cpp(path: str, threads: int, requantize: str | None, measure: bool) -> list[float]:
    from llama_cpp import Llama

    started = time.perf_counter()
    llm = Llama(model_path=path, n_threads=threads, n_threads_batch=threads,
                n_ctx=LONG + DECODE + 8, n_batch=LONG, verbose=False)
    load = time.perf_counter() - started
    if not measure:
        return [load, *_rss_mib()]

    def prefill(ids: list[int]) -> int:
        llm.reset()
        llm.eval(ids)
        return int(np.argmax(llm.scores[llm.n_tokens - 1]))

    def step(token: int) -> int:
        llm.eval([token])
        return int(np.argmax(llm.scores[llm.n_tokens - 1]))

    return [load, *_speeds(prefill, step), *_rss_mib()]


ENGINES = {"lantern": lantern, "llama.cpp": llama_cpp}


def _child(engine: str, args: tuple, cache: str, queue) -> None:
    os.environ["LANTERN_CACHE_DIR"] = cache
    queue.put(ENGINES[engine](*args))  # [load, (speeds,) RSS, peak RSS] with the model loaded


def _in_child(engine: str, args: tuple, cache: str) -> list[float]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_child, args=(engine, args, cache, queue))
    child.start()
    values = queue.get()
    child.join()
    return values


def run_round(engine: str, path: str, threads: int, requantize: str | None) -> Result:
    """A cold load in one process, then load, speeds and memory in a second one."""
    with tempfile.TemporaryDirectory(prefix="lantern-bench-") as cache:
        cold, _, peak_cold = _in_child(engine, (path, threads, requantize, False), cache)
        load, short, long, decode, rss, peak = _in_child(
            engine, (path, threads, requantize, True), cache)
    return Result(cold, peak_cold, load, short, long, decode, rss, peak)


def median(results: list[Result]) -> Result:
    return Result(*(statistics.median(getattr(r, f) for r in results)
                    for f in Result.__dataclass_fields__))


def fastest(results: list[Result]) -> Result:
    """Each field's maximum: for the speeds, the quietest round (load fields meaningless)."""
    return Result(*(max(getattr(r, f) for r in results) for f in Result.__dataclass_fields__))


def load_average() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", choices=("0.5b", "1.5b"), default=["0.5b"])
    parser.add_argument("--gguf", help="any GGUF instead of the demo models")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--requantize", nargs="*", default=[], metavar="SPEC",
                        help="also run re-quantized weights (q4, q4/64, q4/128): NOT exact")
    parser.add_argument("--vs-llama-cpp", action="store_true",
                        help="run llama-cpp-python on the same GGUF and threads, print ratios")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    models = chosen_models(args.gguf, args.model)
    compare(models, args.threads, args.rounds, args.requantize, args.vs_llama_cpp)


def chosen_models(gguf: str | None, keys: list[str]) -> dict[str, str]:
    """Name -> GGUF path: ``--gguf`` when given, else the demo models ``--model`` names."""
    if gguf:
        return {os.path.basename(gguf): gguf}
    from tests.fixtures.demo_models import DEMO_MODELS, fetch

    return {key: str(fetch(DEMO_MODELS[key])) for key in keys}


def compare(models: dict[str, str], threads: int, rounds: int, requantize: list[str],
            vs_llama_cpp: bool) -> None:
    """Print the table (and ratios) for every model (key -> GGUF path), rounds alternating."""
    runs = [("lantern", None), *(("lantern", spec) for spec in requantize)]
    if vs_llama_cpp:
        runs.append(("llama.cpp", None))
    print(f"threads {threads}, nproc {os.cpu_count()}, {load_average()} at start")
    for key, path in models.items():
        results: dict[tuple, list[Result]] = {run: [] for run in runs}
        for _ in range(rounds):
            for engine, spec in runs:
                results[(engine, spec)].append(run_round(engine, path, threads, spec))
        print(f"\n{key}: {path} ({load_average()})")
        _print_model(key, results, vs_llama_cpp)


def _print_model(key: str, results: dict[tuple, list[Result]], vs_llama_cpp: bool) -> None:
    print(f"{'model':6} {'engine':10} {'weights':22} {'cold':>7} {'peak':>6} {'warm':>6} "
          f"{'pp@20':>7} {'pp@512':>7} {'decode':>7} {'RSS':>6} {'peak':>6}")
    table = {run: median(rs) for run, rs in results.items()}
    for (engine, spec), r in table.items():
        weights = ("GGUF (llama.cpp)" if engine == "llama.cpp" else
                   f"{spec} NOT exact" if spec else "exact GGUF mapping")
        print(f"{key:6} {engine:10} {weights:22} {r.load_cold:6.2f}s {r.peak_cold:6.0f} "
              f"{r.load_warm:5.2f}s {r.prefill_short:7.1f} {r.prefill_long:7.1f} "
              f"{r.decode:7.1f} {r.rss:6.0f} {r.peak_rss:6.0f}")
    if vs_llama_cpp:
        best = {run: fastest(rs) for run, rs in results.items()}
        for label, rows in (("median", table), ("best round", best)):
            base = rows[("llama.cpp", None)]
            for (engine, spec), r in rows.items():
                if engine == "lantern":
                    print(f"{key:6} {label} vs llama.cpp ({spec or 'exact'}): "
                          f"prefill@20 {r.prefill_short / base.prefill_short:.2f}x, "
                          f"prefill@512 {r.prefill_long / base.prefill_long:.2f}x, "
                          f"decode {r.decode / base.decode:.2f}x, "
                          f"warm load {r.load_warm / base.load_warm:.2f}x")
    for run, rs in results.items():
        print(f"  {run[0]} {run[1] or EXACT_WEIGHTS}: decode per round "
              + ", ".join(f"{r.decode:.1f}" for r in rs)
              + "; prefill@512 " + ", ".join(f"{r.prefill_long:.0f}" for r in rs))


if __name__ == "__main__":
    main()
