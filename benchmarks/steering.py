"""What the steering input costs: prefill and decode speed of a demo model in fast mode
with nothing steering (zeros fed), with a control vector in every layer, and, with
``--baseline DIR``, from another checkout whose graph has no steering input at all. Each
measurement runs in a child process (the graph from the cache after the first round);
rounds alternate the variants so a busy machine slows them alike; medians are printed.

    .venv/bin/python -m benchmarks.steering [--model 0.5b] [--rounds 3] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, sys, time
import numpy as np
from engine.gguf import open_model
from engine.runtime.decoder import DecoderSession
path, steered, threads = sys.argv[1], sys.argv[2] == "steered", int(sys.argv[3])
model = open_model(path)
cfg = model.config.text
decoder = DecoderSession(model, max_cache_len=1024, threads=threads)
if steered:
    table = np.random.default_rng(0).standard_normal((cfg.n_layers, cfg.hidden_size))
    table[0] = 0
    decoder.steer(table.astype(np.float32) * 0.1)
prompt = [int(t) for t in np.random.default_rng(1).integers(0, 10_000, 128)]
start = time.perf_counter()
token = int(decoder.forward(input_ids=prompt).logits.argmax())
prefill = len(prompt) / (time.perf_counter() - start)
start = time.perf_counter()
for _ in range(64):
    token = int(decoder.forward(input_ids=[token]).logits.argmax())
print(json.dumps({"prefill": prefill, "decode": 64 / (time.perf_counter() - start)}))
"""


def measure(tree: Path, path: Path, variant: str, threads: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), variant, str(threads)],
                         env=env, capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from tests.fixtures.demo_models import DEMO_MODELS, fetch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="0.5b", choices=sorted(DEMO_MODELS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="a checkout without the steering input, measured alike")
    args = parser.parse_args()
    path = fetch(DEMO_MODELS[args.model])
    here = Path(__file__).resolve().parent.parent
    variants = [("not steered", here, "plain"), ("steered", here, "steered")]
    if args.baseline:
        variants.insert(0, ("no steering input (baseline)", args.baseline.resolve(), "plain"))
    for _, tree, variant in variants:  # warm the graph cache
        measure(tree, path, variant, args.threads)
    results: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
    for _ in range(args.rounds):
        for name, tree, variant in variants:
            results[name].append(measure(tree, path, variant, args.threads))
    print(f"{args.model}, {args.threads} threads, {args.rounds} rounds, load average "
          f"{os.getloadavg()[0]:.1f}: median prefill (128 tokens) and decode tok/s")
    for name, runs in results.items():
        print(f"  {name:30s} prefill {statistics.median(r['prefill'] for r in runs):7.1f}"
              f"   decode {statistics.median(r['decode'] for r in runs):6.1f}")


if __name__ == "__main__":
    main()
