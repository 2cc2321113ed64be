"""``lantern pull`` throughput over loopback from a real docker-registry: one stream vs
parallel byte ranges, rounds alternating, each into an empty store.

    .venv/bin/python -m benchmarks.pull --model 0.5b --rounds 3

Loopback has no latency to hide, so this measures Lantern's own cost per byte (HTTP
reads, writes at offsets, the sha256 check); parallel ranges pay off on real links.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from engine.catalog.importer import import_gguf
from engine.store import Store
from engine.store.pull import PART_SIZE, pull_model
from tests.fixtures.demo_models import QWEN_05B, QWEN_15B, fetch
from tests.fixtures.registry import LocalRegistry

MODELS = {"0.5b": QWEN_05B, "1.5b": QWEN_15B}
MODES = {"1 stream": (1, 1 << 62), "4 ranges": (4, PART_SIZE)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, default="0.5b")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lantern-pull-bench-"))
    registry = LocalRegistry.start(work / "registry")
    try:
        scratch = Store.open(work / "scratch")
        import_gguf(scratch, fetch(MODELS[args.model]), "bench")
        registry.push_model(scratch, "bench", "library/bench", "latest")
        name = f"{registry.host}/library/bench"
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        size = 0
        for _ in range(args.rounds):
            for mode, (workers, part_size) in MODES.items():
                target = work / "models"
                started = time.perf_counter()
                result = pull_model(Store.open(target), name, insecure=True,
                                    workers=workers, part_size=part_size)
                times[mode].append(time.perf_counter() - started)
                size = result.size
                shutil.rmtree(target)
        print(f"model {args.model}: {size / 1e6:.0f} MB, {args.rounds} rounds, "
              f"load average {os.getloadavg()[0]:.2f}")
        for mode, seconds in times.items():
            median = statistics.median(seconds)
            print(f"  {mode:9s} median {median:6.2f} s  {size / 1e6 / median:7.1f} MB/s  "
                  f"(best {min(seconds):.2f} s)")
    finally:
        registry.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
