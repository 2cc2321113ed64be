"""What dropping a loaded model costs, with glibc's large blocks in 4 KiB pages and in
transparent huge pages (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``, as the desktop app
restarts itself with: app/desktop/huge_pages.py).

Each round is a fresh process per setting (the tunable is read at process start), turns
alternating: it loads the model on a thread as the app does (graph cache warm), drops it
and loads it again (as after a model switch), measures prefill and decode as
benchmarks/decode.py does, then drops the decoder on a second thread as the window's
release thread does: the time that takes, the longest gap of a 1 ms tick on the main
thread meanwhile (what the window's thread waits for the GIL: its longest stall), and
the ``malloc_trim`` after it. RSS after the runs and after the trim.

    .venv/bin/python -m benchmarks.model_release [--model 0.5b 1.5b] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from benchmarks.decode import (
    DECODE,
    LONG,
    _prompt,
    _rss_mib,
    _speeds,
    chosen_models,
    load_average,
)

SETTINGS = {"4 KiB pages": "", "huge pages": "glibc.malloc.hugetlb=1"}
TICK_S = 0.001


def _child(path: str, threads: int) -> dict:
    from engine.gguf import open_model
    from engine.heap import give_back_freed_memory
    from engine.runtime.decoder import DecoderSession

    def load() -> DecoderSession:         # on a thread of its own, as load_model does
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(DecoderSession, open_model(path), threads=threads,
                               max_cache_len=LONG + DECODE + 8).result()

    # loaded, dropped and loaded again, as after a model switch: glibc raises its mmap
    # threshold at the first large free, so the second session's blocks come from heaps
    held = [load()]
    held.clear()
    gc.collect()
    held.append(load())

    def prefill(ids: list[int]) -> int:
        held[0].reset()
        return int(held[0].forward(input_ids=ids).logits.argmax())

    def step(token: int) -> int:
        return int(held[0].forward(input_ids=[token]).logits.argmax())

    prefill(_prompt(8))
    speeds = _speeds(prefill, step)
    rss = _rss_mib()[0]
    took: list[float] = []

    def drop() -> None:                 # as the window's release thread drops a model
        started = time.perf_counter()
        held.clear()
        gc.collect()
        took.append(time.perf_counter() - started)

    dropper = threading.Thread(target=drop)
    longest_gap, last = 0.0, time.perf_counter()
    dropper.start()
    while dropper.is_alive():           # the window's thread: a 1 ms tick
        time.sleep(TICK_S)
        now = time.perf_counter()
        longest_gap, last = max(longest_gap, now - last - TICK_S), now
    started = time.perf_counter()
    give_back_freed_memory()
    trim = time.perf_counter() - started
    return {"decode": speeds[2], "prefill": speeds[1], "rss": rss, "drop_ms": took[0] * 1000,
            "gap_ms": longest_gap * 1000, "trim_ms": trim * 1000,
            "rss_after": _rss_mib()[0]}


def run(path: str, threads: int, tunable: str) -> dict:
    env = {**os.environ, "GLIBC_TUNABLES": tunable}
    code = ("import json, sys; from benchmarks.model_release import _child; "
            f"print(json.dumps(_child({path!r}, {threads})))")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", choices=("0.5b", "1.5b"), default=["0.5b", "1.5b"])
    parser.add_argument("--gguf", help="any GGUF instead of the demo models")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    models = chosen_models(args.gguf, args.model)
    print(f"threads {args.threads}, nproc {os.cpu_count()}, {load_average()} at start")
    for key, path in models.items():
        rows: dict[str, list[dict]] = {name: [] for name in SETTINGS}
        run(path, args.threads, "")                  # the graph cache filled first
        for _ in range(args.rounds):
            for name, tunable in SETTINGS.items():
                rows[name].append(run(path, args.threads, tunable))
        print(f"\n{key}: {path} ({load_average()}), medians of {args.rounds}")
        print(f"{'pages':12} {'drop ms':>8} {'gap ms':>7} {'(each)':>20} {'trim ms':>8} "
              f"{'pp@512':>7} {'decode':>7} {'RSS MiB':>8} {'after':>6}")
        for name, results in rows.items():
            m = {k: statistics.median(r[k] for r in results) for k in results[0]}
            each = " ".join(f"{r['gap_ms']:.0f}" for r in results)
            print(f"{name:12} {m['drop_ms']:8.0f} {m['gap_ms']:7.0f} {each:>20} "
                  f"{m['trim_ms']:8.0f} {m['prefill']:7.1f} {m['decode']:7.1f} "
                  f"{m['rss']:8.0f} {m['rss_after']:6.0f}")


if __name__ == "__main__":
    main()
