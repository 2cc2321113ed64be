"""Vision-tower encode time on a random-weight tower of Qwen2.5-VL-3B's vision shape.

32 blocks, width 1280, 16 heads, FFN 3420, full attention in blocks 7/15/23/31, F16
weights (as in the real GGUFs), written once to a temp GGUF by the test fixtures' writer.
Each image size is encoded ``--runs`` times after one warm-up run; the yardstick is
llama.cpp on the same machine and thread count (DESIGN §5: 10.8 s for 448x448, 51 s for
1024x768).

    .venv/bin/python -m benchmarks.vision [--threads 2] [--runs 2] [--sizes 448x448 1024x768]
        [--first-token 448x448]

``--first-token SIZE`` also times an image prompt end to end (preprocess, encode, prefill,
first token) through a ChatSession, with that tower in front of a random text decoder of
the 0.5B model's shape (24 layers, width 896, Q8_0 weights).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from engine.gguf import open_model
from engine.runtime.vision import VisionEncoder
from engine.vision import preprocess
from tests.fixtures.synthetic_gguf import T, TextSpec, VisionSpec, write_model

VISION_3B = VisionSpec(hidden=1280, heads=16, layers=32, ffn=3420,
                       fullatt_blocks=(7, 15, 23, 31))
TEXT_3B_WIDTH = TextSpec(hidden=2048, heads=16, kv_heads=2, layers=1, ffn=256)  # only the
#                        merger's output width matters here
LLAMA_CPP_SECONDS = {"448x448": 10.8, "1024x768": 51.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--sizes", nargs="+", default=["448x448", "1024x768"])
    parser.add_argument("--first-token", metavar="SIZE", nargs="*", default=[])
    args = parser.parse_args()
    if args.sizes:
        encode_times(args)
    if args.first_token:
        first_token_latency(args)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: CPU time / threads "
          "is the wall time an otherwise idle machine would give")


def random_image(size: str, rng: np.random.Generator) -> Image.Image:
    width, height = (int(v) for v in size.split("x"))
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def encode_times(args: argparse.Namespace) -> None:

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        path = write_model(Path(tmp) / "vision-3b.gguf", "qwen25vl", TEXT_3B_WIDTH, VISION_3B,
                           default_type=T.F16, std=0.02)
        print(f"wrote random tower in {time.perf_counter() - started:.1f} s")
        model = open_model(path)
        encoder = VisionEncoder(model, threads=args.threads, cache_size=0)
        print(f"graph + session: {encoder.load_seconds:.1f} s, {args.threads} threads")
        rng = np.random.default_rng(0)
        for size in args.sizes:
            image = preprocess(random_image(size, rng))
            encoder.encode(image)  # warm-up
            times, cpu = [], []
            for _ in range(args.runs):
                started, cpu_started = time.perf_counter(), time.process_time()
                encoder.encode(image)
                times.append(time.perf_counter() - started)
                cpu.append(time.process_time() - cpu_started)
            best = min(times)
            yardstick = LLAMA_CPP_SECONDS.get(size)
            versus = f", llama.cpp {yardstick:.1f} s ({yardstick / best:.2f}x)" if yardstick else ""
            print(f"{size}: grid {image.grid[1]}x{image.grid[2]}, {image.n_tokens} tokens, "
                  f"best {best:.2f} s of {args.runs} (all: "
                  f"{', '.join(f'{t:.2f}' for t in times)}), CPU {min(cpu):.1f} s{versus}")


TEXT_05B = TextSpec(hidden=896, heads=14, kv_heads=2, layers=24, ffn=4864, vocab=151936)
TEXT_KINDS = ("token_embd", "output", "attn_q", "attn_k", "attn_v", "attn_output",
              "ffn_gate", "ffn_up", "ffn_down")


def first_token_latency(args: argparse.Namespace) -> None:
    from engine.chat.events import TokenEvent
    from engine.chat.options import Options
    from engine.runtime.chat import ChatSession
    from engine.runtime.loader import load_model

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        path = write_model(Path(tmp) / "vl-05b.gguf", "qwen25vl", TEXT_05B, VISION_3B,
                           default_type=T.F16, types={k: T.Q8_0 for k in TEXT_KINDS},
                           std=0.02)
        print(f"wrote a random 3B tower + 0.5B-shaped decoder in "
              f"{time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        model = load_model(path, num_ctx=4096)
        model.vision_encoder()
        print(f"text decoder + vision session: {time.perf_counter() - started:.1f} s")
        rng = np.random.default_rng(1)
        for size in args.first_token:
            chat = ChatSession(model, Options(temperature=0, num_predict=1))
            started = time.perf_counter()
            image = preprocess(random_image(size, rng))
            preprocessed = time.perf_counter()
            for event in chat.send("Describe this image.", (image,)):
                if isinstance(event, TokenEvent):
                    first = time.perf_counter()
                    break
            print(f"{size}: first token after {first - started:.2f} s "
                  f"(preprocess {preprocessed - started:.2f} s, then encode + prefill of "
                  f"{len(chat.last_prompt)} tokens incl. {image.n_tokens} image rows)")


if __name__ == "__main__":
    main()
