"""Vision-tower encode time on a random-weight tower of Qwen2.5-VL-3B's vision shape.

32 blocks, width 1280, 16 heads, FFN 3420, full attention in blocks 7/15/23/31, F16
weights (as in the real GGUFs), written once to a temp GGUF by the test fixtures' writer.
Each image size is encoded ``--runs`` times after one warm-up run. The yardstick is
llama.cpp in the same run: the same random tower written as llama.cpp's mmproj (with a
one-layer text model of the 3B's width, which mtmd needs to start), encoded by libmtmd
(llama-cpp-python's mtmd_cpp) with the same threads, rounds alternating with Lantern's,
its image-token count printed next to Lantern's so the shapes can be compared. Without
llama-cpp-python no ratio is printed.

    .venv/bin/python -m benchmarks.vision [--threads 2] [--runs 2] [--sizes 448x448 1024x768]
        [--first-token 448x448]

``--first-token SIZE`` also times an image prompt end to end (preprocess, encode, prefill,
first token) through a LocalSession, with that tower in front of a random text decoder of
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
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision import preprocess
from tests.fixtures.synthetic_gguf import T, TextSpec, VisionSpec, write_model, write_qwen2vl_pair

VISION_3B = VisionSpec(hidden=1280, heads=16, layers=32, ffn=3420,
                       fullatt_blocks=(7, 15, 23, 31))
TEXT_3B_WIDTH = TextSpec(hidden=2048, heads=16, kv_heads=2, layers=1, ffn=256)  # only the
#                        merger's output width matters here


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
        llama = LlamaTower.open(*write_qwen2vl_pair(
            Path(tmp) / "llama-text.gguf", Path(tmp) / "llama-mmproj.gguf", TEXT_3B_WIDTH,
            VISION_3B, default_type=T.F16, std=0.02), args.threads)
        rng = np.random.default_rng(0)
        for size in args.sizes:
            picture = random_image(size, rng)
            image = preprocess(picture)
            encoder.encode(image)  # warm-up
            llama_tokens = llama.encode(picture) if llama else 0
            times, cpu, theirs = [], [], []
            for _ in range(args.runs):
                started, cpu_started = time.perf_counter(), time.process_time()
                encoder.encode(image)
                times.append(time.perf_counter() - started)
                cpu.append(time.process_time() - cpu_started)
                if llama:
                    started = time.perf_counter()
                    llama.encode(picture)
                    theirs.append(time.perf_counter() - started)
            best = min(times)
            versus = (f", llama.cpp best {min(theirs):.2f} s for {llama_tokens} tokens "
                      f"({min(theirs) / best:.2f}x)" if llama else ", no llama.cpp: no ratio")
            print(f"{size}: grid {image.grid[1]}x{image.grid[2]}, {image.n_tokens} tokens, "
                  f"best {best:.2f} s of {args.runs} (all: "
                  f"{', '.join(f'{t:.2f}' for t in times)}), CPU {min(cpu):.1f} s{versus}")


class LlamaTower:
    """A tower in llama.cpp's libmtmd (its mmproj layout)."""

    def __init__(self, mtmd, ctx, llm):
        self.mtmd, self.ctx, self.llm = mtmd, ctx, llm

    @classmethod
    def open(cls, text: Path, projector: Path, threads: int) -> LlamaTower | None:
        """mtmd on the mmproj ``projector``; it needs the text model ``text`` to start."""
        try:
            from llama_cpp import Llama
            from llama_cpp import mtmd_cpp as mtmd
        except ImportError:
            print("llama-cpp-python is not installed: no llama.cpp yardstick")
            return None
        llm = Llama(str(text), n_threads=threads, n_threads_batch=threads, n_ctx=4096,
                    verbose=False)
        params = mtmd.mtmd_context_params_default()
        params.use_gpu, params.n_threads, params.print_timings = False, threads, False
        params.warmup = False
        ctx = mtmd.mtmd_init_from_file(str(projector).encode(), llm.model, params)
        if not ctx:
            print("llama.cpp's mtmd could not open the tower: no llama.cpp yardstick")
            return None
        return cls(mtmd, ctx, llm)

    def encode(self, picture: Image.Image) -> int:
        """Encode ``picture`` once; the number of image tokens llama.cpp made of it."""
        import ctypes

        mtmd = self.mtmd
        rgb = np.ascontiguousarray(np.asarray(picture.convert("RGB"), dtype=np.uint8))
        data = rgb.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        bitmap = mtmd.mtmd_bitmap_init(picture.width, picture.height, data)
        text = mtmd.mtmd_default_marker()
        prompt = mtmd.mtmd_input_text(text, len(text), False, True)
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
            if mtmd.mtmd_tokenize(self.ctx, chunks, ctypes.byref(prompt), bitmaps, 1) != 0:
                raise RuntimeError("mtmd_tokenize failed")
            for i in range(mtmd.mtmd_input_chunks_size(chunks)):
                chunk = mtmd.mtmd_input_chunks_get(chunks, i)
                if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
                    if mtmd.mtmd_encode_chunk(self.ctx, chunk) != 0:
                        raise RuntimeError("mtmd_encode_chunk failed")
                    return mtmd.mtmd_input_chunk_get_n_tokens(chunk)
            raise RuntimeError("mtmd made no image chunk")
        finally:
            mtmd.mtmd_input_chunks_free(chunks)
            mtmd.mtmd_bitmap_free(bitmap)


TEXT_05B = TextSpec(hidden=896, heads=14, kv_heads=2, layers=24, ffn=4864, vocab=151936)
TEXT_KINDS = ("token_embd", "output", "attn_q", "attn_k", "attn_v", "attn_output",
              "ffn_gate", "ffn_up", "ffn_down")


def first_token_latency(args: argparse.Namespace) -> None:
    from engine.chat.events import TokenEvent
    from engine.chat.options import Options
    from engine.runtime.loader import load_model
    from engine.runtime.session import LocalSession

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
            chat = LocalSession(model, Options(temperature=0, num_predict=1))
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
