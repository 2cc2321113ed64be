"""Lantern's two CPU matmul paths on one GGUF, alternating: GgufMatMul (the GGUF's bytes in
place) and MatMulNBits (``LANTERN_NATIVE=off``). Each run is a fresh process with a warm
graph cache: load time, prefill of 512 tokens, 16 one-token steps, and the process's
anonymous / file-backed RSS. Fast mode unless ``--exact``.

    PYTHONPATH=. .venv/bin/python -m benchmarks.matmul_paths [--model 0.5b] [--rounds 3]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

PROMPT, STEPS = 512, 16


def _run(path: str, exact: bool, native: bool, cache: str, queue) -> None:
    os.environ["LANTERN_CACHE_DIR"] = cache
    if not native:
        os.environ["LANTERN_NATIVE"] = "off"
    from engine.gguf import open_model
    from engine.runtime.decoder import DecoderSession

    started = time.perf_counter()
    session = DecoderSession(open_model(path), exact=exact, threads=2,
                             max_cache_len=PROMPT + STEPS + 8)
    load = time.perf_counter() - started
    started = time.perf_counter()
    token = int(session.forward(input_ids=list(range(100, 100 + PROMPT))).logits.argmax())
    prefill = PROMPT / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(STEPS):
        token = int(session.forward(input_ids=[token]).logits.argmax())
    decode = STEPS / (time.perf_counter() - started)
    rss = {line.split(":")[0]: int(line.split()[1]) // 1024
           for line in Path("/proc/self/status").read_text().splitlines()
           if line.startswith(("RssAnon", "RssFile"))}
    queue.put((session.matmul, load, prefill, decode, rss["RssAnon"], rss["RssFile"]))


def _in_child(*args) -> tuple:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_run, args=(*args, queue))
    child.start()
    result = queue.get()
    child.join()
    return result


def main() -> None:
    from benchmarks.decode import chosen_models, load_average

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("0.5b", "1.5b"), default="0.5b")
    parser.add_argument("--gguf", help="any GGUF instead of a demo model")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--exact", action="store_true")
    args = parser.parse_args()
    [path] = chosen_models(args.gguf, [args.model]).values()
    print(f"{path}, {'exact' if args.exact else 'fast'} mode, {load_average()}")
    print("round  path          load s  prefill@512  decode tok/s  RSS anon / file MiB")
    with tempfile.TemporaryDirectory() as cache:
        for native in (True, False):  # fill each path's cache entry first
            _in_child(path, args.exact, native, cache)
        for r in range(args.rounds):
            for native in (True, False):
                matmul, load, prefill, decode, anon, file = _in_child(path, args.exact,
                                                                      native, cache)
                name = "GgufMatMul" if native else "MatMulNBits"
                print(f"{r + 1:5}  {name:12} {load:7.2f} {prefill:12.1f} {decode:13.1f}"
                      f"  {anon} / {file}    {matmul}")
        print(f"{load_average()} at the end")


if __name__ == "__main__":
    main()
