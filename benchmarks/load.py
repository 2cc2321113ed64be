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

``--serve`` measures instead what a later `lantern run` costs while `lantern serve` keeps
the model loaded: a server is started on a store holding the model and loads it once;
then, rounds alternating, the seconds from spawning `lantern run MODEL PROMPT
--num-predict 1` to its exit (the answer's first token printed) against a warm server, the
same with ``--no-server`` (a warm load in-process), llama.cpp's ``Llama()`` load, and
llama.cpp's load plus the same prompt's first token.

    .venv/bin/python -m benchmarks.load [--model 0.5b 1.5b] [--threads 2] [--rounds 3]
    .venv/bin/python -m benchmarks.load --serve [--model 0.5b 1.5b] [--rounds 3]
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


def _child_llama_cpp_first_token(path: str, threads: int) -> dict:
    from llama_cpp import Llama

    started = time.perf_counter()
    llm = Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=NUM_CTX,
                verbose=False)
    llm.create_chat_completion([{"role": "user", "content": PROMPT}], max_tokens=1,
                               temperature=0)
    return {"inside": time.perf_counter() - started, "cache": "-"}


CHILDREN = {"lantern": _child_lantern, "lantern one by one": _child_lantern_one_by_one,
            "llama.cpp": _child_llama_cpp, "llama.cpp first token": _child_llama_cpp_first_token}
PROMPT = "Write a haiku about the sea."


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


def _start_server(path: str, root: str, env: dict) -> tuple[subprocess.Popen, str]:
    """`lantern serve` on a store holding ``path`` as "demo", the model loaded once."""
    import socket

    from engine.catalog.importer import import_gguf
    from engine.errors import RemoteError
    from engine.remote.connection import Connection
    from engine.remote.http import post_json
    from engine.store import Store

    import_gguf(Store.open(os.path.join(root, "models")), path, "demo")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{probe.getsockname()[1]}"
    server = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "serve", "--keep-alive", "-1",
         "--models-dir", os.path.join(root, "models")],
        env={**env, "LANTERN_HOST": host}, stderr=subprocess.DEVNULL)
    connection = Connection(f"http://{host}", "ollama")
    for _ in range(600):
        try:
            post_json(connection, "/api/generate", {"model": "demo"}, read_timeout=None)
            return server, host
        except RemoteError:  # not listening yet
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("lantern serve did not start")


def time_run(root: str, env: dict, *flags: str) -> dict:
    """Seconds from spawning `lantern run demo PROMPT --num-predict 1` to its exit."""
    spawned = time.perf_counter()
    subprocess.run([sys.executable, "-m", "engine.cli", "run", "demo", PROMPT,
                    "--num-predict", "1", "--temperature", "0",
                    "--models-dir", os.path.join(root, "models"), *flags],
                   env=env, check=True, capture_output=True)
    return {"ready": time.perf_counter() - spawned, "cache": "-"}


def serve_rows(path: str, threads: int, rounds: int) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {"run, warm serve": [], "run --no-server": [],
                                   "llama.cpp": [], "llama.cpp 1st tok": []}
    with tempfile.TemporaryDirectory(prefix="lantern-serve-") as root:
        cache = os.path.join(root, "cache")
        env = {**os.environ, "LANTERN_CACHE_DIR": cache}
        server, host = _start_server(path, root, env)
        try:
            env["LANTERN_HOST"] = host
            for _ in range(rounds):
                rows["run, warm serve"].append(time_run(root, env))
                rows["llama.cpp"].append(measure("llama.cpp", path, threads, cache))
                rows["run --no-server"].append(time_run(root, env, "--no-server"))
                rows["llama.cpp 1st tok"].append(
                    measure("llama.cpp first token", path, threads, cache))
        finally:
            server.terminate()
            server.wait()
    return rows


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _run_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", choices=("0.5b", "1.5b"), default=["0.5b", "1.5b"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", action="store_true",
                        help="lantern run against a warm lantern serve (see above)")
    args = parser.parse_args()
    from benchmarks.decode import load_average
    from tests.fixtures.demo_models import DEMO_MODELS, fetch

    print(f"threads {args.threads}, nproc {os.cpu_count()}, {load_average()} at start")
    for key in args.model:
        path = str(fetch(DEMO_MODELS[key]))
        if args.serve:
            print_rows(key, path, serve_rows(path, args.threads, args.rounds))
            continue
        rows: dict[str, list[dict]] = {"lantern cold": [], "lantern warm": [],
                                       "warm, one by one": [], "llama.cpp": []}
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="lantern-load-") as cache:
                rows["lantern cold"].append(measure("lantern", path, args.threads, cache))
                rows["llama.cpp"].append(measure("llama.cpp", path, args.threads, cache))
                rows["lantern warm"].append(measure("lantern", path, args.threads, cache))
                rows["warm, one by one"].append(
                    measure("lantern one by one", path, args.threads, cache))
        print_rows(key, path, rows)
        for stage in rows["warm, one by one"][0]["stages"]:
            wall, cpu = (statistics.median(r["stages"][stage][i] for r in rows["warm, one by one"])
                         for i in (0, 1))
            print(f"  one by one, {stage}: {wall:.2f}s wall, {cpu:.2f}s CPU")


def print_rows(key: str, path: str, rows: dict[str, list[dict]]) -> None:
    """Medians per row, each round's time, and the ratio to llama.cpp's load."""
    from benchmarks.decode import load_average

    print(f"\n{key}: {path} ({load_average()})")
    print(f"{'engine':18} {'ready':>7} {'in load':>8} {'peak':>6}  per round (ready)")
    base = statistics.median(r["ready"] for r in rows["llama.cpp"])
    for name, results in rows.items():
        ready = statistics.median(r["ready"] for r in results)
        inside, peak = (f"{statistics.median(r[k] for r in results):{spec}}{unit}"
                        if k in results[0] else "-".rjust(int(spec[0]) + 1)
                        for k, spec, unit in (("inside", "7.2f", "s"), ("peak_mib", "5.0f", "M")))
        print(f"{name:18} {ready:6.2f}s {inside} {peak}  "
              + ", ".join(f"{r['ready']:.2f} ({r['cache']})" for r in results)
              + f"   ({ready / base:.2f}x llama.cpp)")


if __name__ == "__main__":
    main()
