"""Speed of the newer families against llama.cpp on the same random-weight GGUFs.

Each family is a random HF model of a released model's widths, vocabulary size and
attention layout (fewer layers, so that making it takes minutes), saved with a small
SentencePiece tokenizer trained here (the converter pads the vocabulary to the model's
size), converted by llama.cpp's own convert_hf_to_gguf.py to F16 and quantized to Q4_K_M
by llama.cpp's quantizer (llama-cpp-python), as Ollama ships them. The files stay in the
test-model cache (``families/``) and are reused. Then benchmarks.decode times them: load,
prefill, decode, Lantern and llama.cpp alternating on the same file and threads.

    .venv/bin/python -m benchmarks.families [--family gemma3 qwen3vl phi3 llama]
        [--threads 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import (
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    MistralConfig,
    MistralForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    PretrainedConfig,
    PreTrainedModel,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
)

from benchmarks.decode import compare
from tests.fixtures.demo_models import cache_root
from tests.fixtures.llama_converter import convert
from tests.fixtures.sentencepiece_models import CONTROLS, train

IDS = dict(pad_token_id=0, eos_token_id=1, bos_token_id=2)


@dataclass(frozen=True)
class Family:
    like: str                                  # the released model whose shape this is
    model: type[PreTrainedModel]
    config: Callable[[int], PretrainedConfig]  # layers -> config
    layers: int                                # of the released model's ``like_layers``
    like_layers: int
    dummy_prefix: bool = True                  # the tokenizer's space prefix
    controls: tuple[str, ...] = CONTROLS


def gemma3(layers: int) -> Gemma3TextConfig:
    """Gemma 3 1B (text only): five sliding-window layers to one global."""
    return Gemma3TextConfig(
        vocab_size=262_144, hidden_size=1152, intermediate_size=6912,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=1, head_dim=256,
        sliding_window=512, query_pre_attn_scalar=256, max_position_embeddings=32_768,
        rope_theta=1_000_000.0, rope_local_base_freq=10_000.0, **IDS)


QWEN3VL_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")


def qwen3vl(layers: int, vision_layers: int = 24, vocab: int = 151_936) -> Qwen3VLConfig:
    """Qwen3-VL 2B Instruct: tied embeddings, interleaved M-RoPE, DeepStack from vision
    blocks 5, 11, 17 (so more than 3 text layers). Image token ids as trained here."""
    return Qwen3VLConfig(
        text_config=dict(
            vocab_size=vocab, hidden_size=2048, intermediate_size=6144,
            num_hidden_layers=layers, num_attention_heads=16, num_key_value_heads=8,
            head_dim=128, rms_norm_eps=1e-6, max_position_embeddings=262_144,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 5_000_000.0,
                             "mrope_section": [24, 20, 20], "mrope_interleaved": True}),
        vision_config=dict(
            depth=vision_layers, hidden_size=1024, intermediate_size=4096, num_heads=16,
            in_channels=3, patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
            out_hidden_size=2048, num_position_embeddings=2304,
            deepstack_visual_indexes=[5, 11, 17]),
        vision_start_token_id=len(CONTROLS) + 4, vision_end_token_id=len(CONTROLS) + 5,
        image_token_id=len(CONTROLS) + 6, video_token_id=len(CONTROLS) + 7,
        tie_word_embeddings=True)


def phi3(layers: int) -> Phi3Config:
    """Phi-3.5-mini-instruct: fused q|k|v and gate|up, LongRoPE (factors random here)."""
    rng = np.random.default_rng(0)
    half = 3072 // 32 // 2
    return Phi3Config(
        vocab_size=32_064, hidden_size=3072, intermediate_size=8192,
        num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=32,
        max_position_embeddings=131_072, original_max_position_embeddings=4096,
        sliding_window=None, tie_word_embeddings=False,
        rope_parameters={"rope_theta": 10_000.0, "rope_type": "longrope",
                         "original_max_position_embeddings": 4096,
                         "short_factor": (1.0 + 2.0 * rng.random(half)).tolist(),
                         "long_factor": (1.0 + 60.0 * rng.random(half)).tolist()},
        **IDS)


def mistral(layers: int) -> MistralConfig:
    """Mistral 7B v0.3's text shape: a llama-architecture model, SentencePiece vocabulary."""
    return MistralConfig(
        vocab_size=32_768, hidden_size=4096, intermediate_size=14_336,
        num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        sliding_window=None, max_position_embeddings=32_768, rope_theta=1_000_000.0,
        tie_word_embeddings=False, **IDS)


FAMILIES = {
    "gemma3": Family("Gemma 3 1B", Gemma3ForCausalLM, gemma3, 6, 26, dummy_prefix=False),
    "qwen3vl": Family("Qwen3-VL 2B (text)", Qwen3VLForConditionalGeneration, qwen3vl, 4, 28,
                      controls=CONTROLS + QWEN3VL_TOKENS),
    "phi3": Family("Phi-3.5-mini", Phi3ForCausalLM, phi3, 4, 32),
    "llama": Family("Mistral 7B v0.3", MistralForCausalLM, mistral, 3, 32),
}


def quantize(source: Path, out: Path, threads: int) -> Path:
    """llama.cpp's quantizer (what ``llama-quantize`` runs): ``source`` -> Q4_K_M ``out``."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.nthread = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M, threads
    if llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), params) != 0:
        raise RuntimeError(f"llama.cpp could not quantize {source}")
    return out


def save_random(family: Family, config: PretrainedConfig, folder: Path) -> Path:
    """The HF folder of a random ``family`` model with a tokenizer trained here."""
    tokenizer = train(folder / "sp", "bpe", add_dummy_prefix=family.dummy_prefix,
                      controls=family.controls)
    torch.manual_seed(0)
    family.model(config).save_pretrained(folder / "hf")
    (folder / "hf" / "tokenizer.model").write_bytes(tokenizer.read_bytes())
    return folder / "hf"


def family_file(name: str, threads: int) -> Path:
    """The Q4_K_M GGUF of family ``name`` in the cache, made on first use."""
    family = FAMILIES[name]
    out = cache_root() / "families" / f"{name}-{family.layers}l-q4_k_m.gguf"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        hf = save_random(family, family.config(family.layers), Path(tmp))
        f16 = convert(hf, Path(tmp) / "f16.gguf", outtype="f16")
        shutil.rmtree(hf)
        quantize(f16, Path(tmp) / out.name, threads)
        (Path(tmp) / out.name).replace(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", nargs="+", choices=tuple(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    models = {}
    for name in args.family:
        family = FAMILIES[name]
        models[name] = str(family_file(name, args.threads))
        print(f"{name}: {family.like} shape, {family.layers} of {family.like_layers} layers, "
              f"Q4_K_M: {models[name]}")
    compare(models, args.threads, args.rounds, [], vs_llama_cpp=True)


if __name__ == "__main__":
    main()
