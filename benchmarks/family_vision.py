"""Image encode time of Gemma 3's SigLIP tower (896 px) and Qwen3-VL's tower against
llama.cpp's libmtmd on the same random-weight files.

As benchmarks.families makes its text models: a random HF model (Gemma 3 4B's SigLIP
So400m with fewer blocks, Qwen3-VL 2B's tower whole), converted
by llama.cpp's convert_hf_to_gguf.py into a text GGUF and an F16 mmproj, as llama.cpp's users
get them. The text model keeps the real width (the projector's output) but one or a few
layers and the small vocabulary, as only the tower runs. Lantern opens the pair (text +
mmproj), libmtmd the same two files; one warm-up each, then ``--runs`` encodes alternating.

    .venv/bin/python -m benchmarks.family_vision [--tower gemma3 qwen3vl] [--threads 2]
        [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from transformers import (
    Gemma3Config,
    Gemma3ForConditionalGeneration,
    Qwen3VLForConditionalGeneration,
)

from benchmarks.families import QWEN3VL_TOKENS, Family, qwen3vl, save_random
from benchmarks.vision import LlamaTower, random_image
from engine.gguf import open_model
from engine.runtime.vision_encoder import VisionEncoder
from engine.vision.gemma3 import preprocess_square
from engine.vision.preprocess import preprocess_for
from tests.fixtures.demo_models import cache_root
from tests.fixtures.hf_qwen3vl import PREPROCESSOR
from tests.fixtures.llama_converter import convert, published_vision_names
from tests.fixtures.sentencepiece_models import CONTROLS

GEMMA3_TOKENS = ("<start_of_image>", "<end_of_image>", "<image_soft_token>")
VOCAB = 1200  # the trained tokenizer's: only the tower runs
PICTURES = {"gemma3": "1024x768", "qwen3vl": "448x448"}  # Gemma 3 squashes any to 896x896


def gemma3(vision_layers: int) -> Gemma3Config:
    """Gemma 3 4B: SigLIP So400m at 896 px (patch 14, 4096 patches pooled to 256 tokens),
    projected to the 4B's width; one text layer."""
    boi, eoi, soft = (4 + len(CONTROLS) + i for i in range(3))
    return Gemma3Config(
        text_config=dict(
            vocab_size=VOCAB, hidden_size=2560, intermediate_size=10_240, num_hidden_layers=1,
            num_attention_heads=8, num_key_value_heads=4, head_dim=256, sliding_window=1024,
            query_pre_attn_scalar=256, max_position_embeddings=131_072,
            rope_theta=1_000_000.0, rope_local_base_freq=10_000.0,
            pad_token_id=0, eos_token_id=1, bos_token_id=2),
        vision_config=dict(hidden_size=1152, intermediate_size=4304,
                           num_hidden_layers=vision_layers, num_attention_heads=16,
                           image_size=896, patch_size=14, layer_norm_eps=1e-6),
        mm_tokens_per_image=256, boi_token_index=boi, eoi_token_index=eoi,
        image_token_index=soft)


TOWERS = {
    "gemma3": Family("Gemma 3 4B SigLIP (896 px)", Gemma3ForConditionalGeneration, gemma3,
                     4, 27, dummy_prefix=False, controls=CONTROLS + GEMMA3_TOKENS),
    "qwen3vl": Family("Qwen3-VL 2B tower", Qwen3VLForConditionalGeneration,
                      lambda layers: qwen3vl(4, layers, vocab=VOCAB), 24, 24,
                      controls=CONTROLS + QWEN3VL_TOKENS),
}
PREPROCESSORS = {
    "gemma3": {"image_mean": [0.5] * 3, "image_std": [0.5] * 3, "image_seq_length": 256},
    "qwen3vl": PREPROCESSOR,
}


def tower_files(name: str) -> tuple[Path, Path]:
    """(text GGUF, F16 mmproj) of tower ``name`` in the cache, made on first use."""
    family = TOWERS[name]
    folder = cache_root() / "families"
    text = folder / f"{name}-tower{family.layers}-text.gguf"
    projector = folder / f"mmproj-{name}-tower{family.layers}-f16.gguf"
    if text.is_file() and projector.is_file():
        return text, projector
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        hf = save_random(family, family.config(family.layers), Path(tmp))
        (hf / "preprocessor_config.json").write_text(json.dumps(PREPROCESSORS[name]))
        if name == "gemma3":
            published_vision_names(hf)
        convert(hf, Path(tmp) / text.name, outtype="f16").replace(text)
        convert(hf, Path(tmp) / projector.name, outtype="f16", mmproj=True).replace(projector)
    return text, projector


def encode_times(name: str, threads: int, runs: int) -> None:
    text, projector = tower_files(name)
    model = open_model(text, projector)
    encoder = VisionEncoder(model, threads=threads, cache_size=0)
    llama = LlamaTower.open(text, projector, threads)
    picture = random_image(PICTURES[name], np.random.default_rng(0))
    vision = model.config.vision
    image = (preprocess_square(picture, vision) if vision.siglip
             else preprocess_for(vision, picture))
    encoder.encode(image)  # warm-up
    theirs_tokens = llama.encode(picture) if llama else 0
    ours, theirs = [], []
    for _ in range(runs):
        started = time.perf_counter()
        encoder.encode(image)
        ours.append(time.perf_counter() - started)
        if llama:
            started = time.perf_counter()
            llama.encode(picture)
            theirs.append(time.perf_counter() - started)
    family = TOWERS[name]
    versus = (f"; llama.cpp mtmd best {min(theirs):.2f} s ({', '.join(f'{t:.2f}' for t in theirs)})"
              f" for {theirs_tokens} tokens: Lantern {min(ours) / min(theirs):.2f}x its time"
              if llama else "; Lantern alone (no llama.cpp)")
    print(f"{name}: {family.like}, {family.layers} of {family.like_layers} blocks, "
          f"{PICTURES[name]} picture -> {image.n_tokens} tokens; Lantern best {min(ours):.2f} s "
          f"({', '.join(f'{t:.2f}' for t in ours)}){versus} "
          f"(load average {os.getloadavg()[0]:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tower", nargs="+", choices=tuple(TOWERS), default=list(TOWERS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    print(f"threads {args.threads}, nproc {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    for name in args.tower:
        encode_times(name, args.threads, args.runs)


if __name__ == "__main__":
    main()
