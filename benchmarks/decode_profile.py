"""Where a decode step's time goes: ONNX Runtime's own profiler on the decoder's session,
kernel times summed per operator and per matmul (its node name with the block number
dropped), over one-token steps after a short prompt.

    .venv/bin/python -m benchmarks.decode_profile 1.5b [--steps 32] [--exact]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

PROFILED: list[ort.InferenceSession] = []


class ProfiledSession(ort.InferenceSession):
    """An InferenceSession with the profiler on (the decoder makes its own)."""

    def __init__(self, model, options: ort.SessionOptions | None = None, *args, **kwargs):
        options = options or ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tempfile.gettempdir()) / "lantern_decode")
        super().__init__(model, options, *args, **kwargs)
        PROFILED.append(self)


def node_times(events: list[dict], after: int) -> list[tuple[str, str, int]]:
    """(operator, node name, microseconds) of every node run that began at ``after`` or later."""
    return [(e["args"].get("op_name", "?"), e["name"].removesuffix("_kernel_time"), e["dur"])
            for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")
            and e["ts"] >= after]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=("0.5b", "1.5b"))
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--exact", action="store_true", help="exact mode (fp32 activations)")
    args = parser.parse_args()
    import engine.graph.builder as builder

    builder.ort.InferenceSession = ProfiledSession
    from engine.gguf import open_model
    from engine.runtime.decoder import DecoderSession
    from tests.fixtures.demo_models import DEMO_MODELS, fetch

    session = DecoderSession(open_model(fetch(DEMO_MODELS[args.model])), max_cache_len=256,
                             exact=args.exact, threads=2)
    prompt = [int(i) for i in np.random.default_rng(0).integers(0, 10_000, 20)]
    token = int(session.forward(input_ids=prompt).logits.argmax())
    for _ in range(args.steps):
        token = int(session.forward(input_ids=[token]).logits.argmax())
    profile = Path(PROFILED[-1].end_profiling())
    events = json.loads(profile.read_text())
    profile.unlink()
    runs = [e for e in events if e.get("name") == "model_run"][1:]   # the prefill left out
    step_us = sum(r["dur"] for r in runs) / len(runs)
    nodes = node_times(events, runs[0]["ts"])
    mode = "exact" if args.exact else "fast"
    print(f"{args.model} {mode}: {len(runs)} one-token steps, {step_us / 1000:.2f} ms a step")
    for label, key in (("operator", lambda op, name: op),
                       ("matmul", lambda op, name: re.sub(r"\d+", "N", name))):
        totals = collections.Counter()
        for op, name, us in nodes:
            if label == "operator" or op == "GgufMatMul":
                totals[key(op, name)] += us
        print(f"per {label}:")
        for what, us in totals.most_common(10):
            print(f"  {what:48} {us / len(runs) / 1000:7.2f} ms ({us / len(runs) / step_us:5.1%})")


if __name__ == "__main__":
    main()
