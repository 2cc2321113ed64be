"""Model-ready time as a user of `lantern run` sees it, against llama.cpp's load of the file.

Each measurement is a fresh Python process, timed from its spawn to the moment the model
can take a prompt: the interpreter, the imports `lantern run` makes, the GGUF, the
tokenizer, the ONNX session (Lantern) or ``Llama(model_path, n_threads)`` (llama-cpp-python,
not a Lantern dependency). Lantern loads "cold" with an empty graph cache (re-pack, store,
map), then "warm" (a cache hit: what every later start costs). GGUF pages are in the OS
page cache for both engines. Rounds alternate the engines so a busy machine slows them
alike; the table shows medians and the ratio to llama.cpp. "warm, one by one" makes the
same pieces one after another (how load_model worked before it made the tokenizer and the
session side by side) and prints each one's wall and CPU seconds.

    .venv/bin/python -m benchmarks.load [--model 0.5b 1.5b] [--threads 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

NUM_CTX = 4096  # lantern run's default context; llama.cpp gets the same


def _child_lantern(path: str, threads: int) -> dict:
    from engine.cli import build_parser

    build_parser()  # the imports `lantern run` makes before it loads
    from engine.runtime.loader import load_model

    model = load_model(path, num_ctx=NUM_CTX)
    return {"inside": model.load_duration / 1e9, "cache": model.decoder.cache_state}


def _child_lantern_one_by_one(path: str, threads: int) -> dict:
    """The same pieces one after another, as load_model made them before 2026-11-22."""
    from engine.cli import build_parser

    build_parser()
    from engine.gguf import open_model
    from engine.runtime.decoder import DecoderSession
    from engine.tokenizer import load_tokenizer

    stages, started = {}, time.perf_counter()
    clock = [started, time.process_time()]

    def stage(name: str) -> None:  # wall and CPU seconds since the previous stage
        now = [time.perf_counter(), time.process_time()]
        stages[name] = [now[0] - clock[0], now[1] - clock[1]]
        clock[:] = now

    gguf = open_model(path)
    stage("open_model")
    load_tokenizer(path)
    stage("load_tokenizer")
    decoder = DecoderSession(gguf, max_cache_len=NUM_CTX)
    stage("DecoderSession")
    return {"inside": time.perf_counter() - started, "cache": decoder.cache_state,
            "stages": stages}


def _child_llama_cpp(path: str, threads: int) -> dict:
    from llama_cpp import Llama

    started = time.perf_counter()
    Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=NUM_CTX,
          verbose=False)
    return {"inside": time.perf_counter() - started, "cache": "-"}


CHILDREN = {"lantern": _child_lantern, "lantern one by one": _child_lantern_one_by_one,
            "llama.cpp": _child_llama_cpp}


def measure(engine: str, path: str, threads: int, cache: str) -> dict:
    """Spawn a process that loads ``path``; seconds from spawn to ready, and its peak RSS."""
    env = {**os.environ, "LANTERN_CACHE_DIR": cache}
    spawned = time.time()
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.load", "--child", engine, path, str(threads)],
        env=env, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.splitlines()[-1])
    return {**result, "ready": result["ready_at"] - spawned}


def _run_child(engine: str, path: str, threads: int) -> None:
    import resource

    result = CHILDREN[engine](path, threads)
    result["ready_at"] = time.time()
    result["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _run_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", choices=("0.5b", "1.5b"), default=["0.5b", "1.5b"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from benchmarks.decode import load_average
    from tests.fixtures.demo_models import DEMO_MODELS, fetch

    print(f"threads {args.threads}, nproc {os.cpu_count()}, {load_average()} at start")
    for key in args.model:
        path = str(fetch(DEMO_MODELS[key]))
        rows: dict[str, list[dict]] = {"lantern cold": [], "lantern warm": [],
                                       "warm, one by one": [], "llama.cpp": []}
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="lantern-load-") as cache:
                rows["lantern cold"].append(measure("lantern", path, args.threads, cache))
                rows["llama.cpp"].append(measure("llama.cpp", path, args.threads, cache))
                rows["lantern warm"].append(measure("lantern", path, args.threads, cache))
                rows["warm, one by one"].append(
                    measure("lantern one by one", path, args.threads, cache))
        print(f"\n{key}: {path} ({load_average()})")
        print(f"{'engine':16} {'ready':>7} {'in load':>8} {'peak':>6}  per round (ready)")
        base = statistics.median(r["ready"] for r in rows["llama.cpp"])
        for name, results in rows.items():
            ready = statistics.median(r["ready"] for r in results)
            inside = statistics.median(r["inside"] for r in results)
            peak = statistics.median(r["peak_mib"] for r in results)
            print(f"{name:16} {ready:6.2f}s {inside:7.2f}s {peak:5.0f}M  "
                  + ", ".join(f"{r['ready']:.2f} ({r['cache']})" for r in results)
                  + f"   ({ready / base:.2f}x llama.cpp)")
        for stage in rows["warm, one by one"][0]["stages"]:
            wall, cpu = (statistics.median(r["stages"][stage][i] for r in rows["warm, one by one"])
                         for i in (0, 1))
            print(f"  one by one, {stage}: {wall:.2f}s wall, {cpu:.2f}s CPU")


if __name__ == "__main__":
    main()
