"""Decoder speed on a real GGUF: load time, prefill and decode tokens/s, peak RSS.

Fast mode (int8 activations), CPU. "cold" is the first session of the process (GGUF pages
may already be in the OS cache), "warm" a second one built right after. Prefill runs on a
fresh cache; decode feeds the argmax back one token at a time.

    .venv/bin/python -m benchmarks.decode --model 0.5b [--threads 2] [--decode 64]
    .venv/bin/python -m benchmarks.decode --gguf path/to/model.gguf
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from engine.gguf import open_model
from engine.runtime.decoder import DecoderSession


def tokens_per_second(session: DecoderSession, n_prompt: int, n_decode: int, repeats: int):
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, 10_000, n_prompt)
    best = float("inf")
    for _ in range(repeats):
        session.reset()
        started = time.perf_counter()
        step = session.forward(input_ids=prompt)
        best = min(best, time.perf_counter() - started)
    prefill = n_prompt / best
    if not n_decode:
        return prefill, None
    session.forward(input_ids=[int(step.logits.argmax())])  # warm the decode shapes
    started = time.perf_counter()
    for _ in range(n_decode):
        step = session.forward(input_ids=[int(step.logits.argmax())])
    return prefill, n_decode / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("0.5b", "1.5b"), default="0.5b")
    parser.add_argument("--gguf", help="any GGUF instead of a demo model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--decode", type=int, default=64)
    parser.add_argument("--long", type=int, default=512, help="long prefill length")
    args = parser.parse_args()
    if args.gguf:
        path = args.gguf
    else:
        from tests.fixtures.demo_models import DEMO_MODELS, fetch

        path = fetch(DEMO_MODELS[args.model])

    model = open_model(path)
    cache = args.long + args.decode + 8
    cold = DecoderSession(model, threads=args.threads, max_cache_len=cache)
    print(f"{model.config.name}: {model.config.quantization}, threads {args.threads}, "
          f"provider {cold.provider}")
    print(f"load cold  {cold.load_seconds:6.2f} s (graph build {cold.build_seconds:.2f} s)")
    del cold
    session = DecoderSession(model, threads=args.threads, max_cache_len=cache)
    print(f"load warm  {session.load_seconds:6.2f} s")
    short, decode = tokens_per_second(session, 20, args.decode, repeats=3)
    long, _ = tokens_per_second(session, args.long, 0, repeats=1)
    print(f"prefill    {short:6.1f} tok/s @ 20,  {long:6.1f} tok/s @ {args.long}")
    print(f"decode     {decode:6.1f} tok/s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"peak RSS   {peak:6.0f} MiB")


if __name__ == "__main__":
    main()
