"""``open_model``: one GGUF (plus an optional llama.cpp projector) -> a checked ``GGUFModel``.

Checks happen here, once, so that graph builders can trust the config: required keys
present, every expected tensor present with the expected shape, nothing unexpected,
head counts that split evenly. Errors name the file and the key or tensor at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import CorruptModel, Remedy, UnsupportedModel
from engine.gguf.architectures import (
    ARCHITECTURES,
    architecture,
    text_config,
    text_tensor_shapes,
)
from engine.gguf.config import ModelConfig, SpecialTokens, TextConfig, VisionConfig
from engine.gguf.keys import Keys
from engine.gguf.labels import human_number, parameter_count, quantization_label
from engine.gguf.ollama_names import llama_cpp_names
from engine.gguf.reader import Metadata, TensorInfo, read_gguf
from engine.gguf.siglip_config import (
    canonical_siglip_tensors,
    check_projector_type,
    inline_siglip_config,
    projector_siglip_config,
    siglip_tensor_shapes,
)
from engine.gguf.vision_config import (
    canonical_projector_tensors,
    inline_vision_config,
    projector_tower,
    projector_vision_config,
    qwen3vl_inline,
    vision_tensor_shapes,
)

VISION_TOKENS = {"image_pad": "<|image_pad|>", "vision_start": "<|vision_start|>",
                 "vision_end": "<|vision_end|>"}
VIDEO_PAD = "<|video_pad|>"
SIGLIP_TOKENS = {"image_pad": "<image_soft_token>", "vision_start": "<start_of_image>",
                 "vision_end": "<end_of_image>"}


@dataclass(frozen=True)
class GGUFModel:
    """A model ready for the engine: config, metadata and canonical tensor views."""

    path: Path
    projector_path: Path | None
    config: ModelConfig
    metadata: Metadata                   # the model file's keys (lazy for big arrays)
    tensors: dict[str, TensorInfo]       # canonical names, text + vision
    projector_metadata: Metadata | None = None

    def array(self, key: str) -> np.ndarray | list[str]:
        """A metadata array without a list copy for numbers (e.g. tokenizer.ggml.token_type)."""
        return self.metadata.array(key)


def open_model(path: str | Path, projector_path: str | Path | None = None) -> GGUFModel:
    """Read and check a model; raises CorruptModel or UnsupportedModel with the reason."""
    path = Path(path)
    text_file = read_gguf(path)
    keys = Keys(text_file.metadata, path)
    arch = architecture(keys)
    tensors = dict(text_file.tensors)
    if arch.ollama_gpt_oss:
        tensors = llama_cpp_names(tensors)
    text = text_config(arch, keys, tensors)

    vision: VisionConfig | None = None
    projector_metadata: Metadata | None = None
    projector_keys: list[str] = []
    if projector_path is not None:
        projector_path = Path(projector_path)
        projector_file = read_gguf(projector_path)
        if arch.vision not in ("projector", "either"):
            raise _projector_not_read(arch.name, path, projector_file.metadata)
        projector_metadata = projector_file.metadata
        pkeys = Keys(projector_metadata, projector_path)
        vision, projected = _projector(arch.gemma3, pkeys, projector_file.tensors,
                                       text.hidden_size)
        clash = sorted(set(projected) & set(tensors))
        if clash:
            raise CorruptModel(f"{path}: holds vision tensor {clash[0]} and also has a projector")
        tensors |= projected
        projector_keys = pkeys.assumed
    elif arch.vision == "inline":
        vision = inline_vision_config(keys, tensors, text.hidden_size)
    elif arch.vision == "either" and keys.has(f"{arch.name}.vision.block_count"):
        if arch.gemma3:
            vision = inline_siglip_config(keys, tensors, text.hidden_size)
        else:
            vision, tensors = qwen3vl_inline(keys, tensors, text.hidden_size, arch.name)

    shapes = siglip_tensor_shapes if vision and vision.siglip else vision_tensor_shapes
    expected = text_tensor_shapes(text) | (shapes(vision) if vision else {})
    unused = arch.unused_prefixes if vision is None else ()  # an inline tower left unread
    used = {name: t for name, t in tensors.items() if not name.startswith(unused)}
    _check_inventory(used, expected, path, projector_path)
    _check_heads(text, vision, path)

    special = _special_tokens(keys, text_file.metadata, vision)
    config = ModelConfig(
        architecture=arch.name,
        text=text,
        vision=vision,
        special=special,
        chat_template=keys.string("tokenizer.chat_template", None),
        name=keys.string("general.name", None),
        parameter_count=(count := parameter_count(tensors.values())),
        parameter_size=human_number(count),
        quantization=quantization_label(
            keys.optional_integer("general.file_type"), text_file.tensors.values()
        ),
        assumed=tuple(keys.assumed + projector_keys),
    )
    return GGUFModel(path, projector_path, config, text_file.metadata, tensors, projector_metadata)


def _check_inventory(
    tensors: dict[str, TensorInfo],
    expected: dict[str, tuple[int, ...]],
    path: Path,
    projector_path: Path | None,
) -> None:
    where = f"{path}" + (f" + {projector_path}" if projector_path else "")
    for name, shape in expected.items():
        if name not in tensors:
            raise CorruptModel(f"{where}: tensor {name} {shape} is missing")
        if tensors[name].shape != shape:
            raise CorruptModel(
                f"{where}: tensor {name} has shape {tensors[name].shape}, expected {shape}"
            )
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        listed = ", ".join(unexpected[:5]) + (" ..." if len(unexpected) > 5 else "")
        raise UnsupportedModel(
            f"{where}: {len(unexpected)} tensor(s) Lantern does not know how to use: {listed}"
        )


def _check_heads(text: TextConfig, vision: VisionConfig | None, path: Path) -> None:
    if text.n_kv_heads <= 0 or text.n_heads % text.n_kv_heads:
        raise CorruptModel(
            f"{path}: {text.n_heads} query heads cannot share {text.n_kv_heads} key/value heads"
        )
    if text.head_dim % 2:
        raise CorruptModel(f"{path}: head_dim {text.head_dim} is odd; rotary needs pairs")
    if vision is None:
        return
    if len(vision.deepstack_layers) >= text.n_layers:
        raise CorruptModel(f"{path}: {len(vision.deepstack_layers)} DeepStack feature maps "
                           f"for {text.n_layers} text layers")
    if vision.n_heads <= 0 or vision.hidden_size % vision.n_heads:
        raise CorruptModel(
            f"{path}: vision width {vision.hidden_size} does not split into {vision.n_heads} heads"
        )
    outside = [i for i in vision.fullatt_block_indexes if not 0 <= i < vision.n_layers]
    if outside:
        raise CorruptModel(
            f"{path}: full-attention vision blocks {outside} lie outside 0..{vision.n_layers - 1}"
        )


def _projector_not_read(arch: str, path: Path, metadata: Metadata) -> UnsupportedModel:
    """A text model of ``arch`` paired with an image projector Lantern does not read (LLaVA:
    llama text and a CLIP tower with an MLP projector, projector type "mlp")."""
    kind = metadata.get("clip.projector_type")
    what = f"a {arch!r} model with an image projector" + (f" of type {kind!r}" if kind else "")
    readers = ", ".join(sorted(a.name for a in ARCHITECTURES.values()
                               if a.vision in ("projector", "either")))
    return UnsupportedModel(f"{path}: {what}: Lantern reads a separate image projector only "
                            f"with the architectures {readers}", remedy=Remedy.OLLAMA)


def _projector(gemma3: bool, keys: Keys, tensors: dict[str, TensorInfo],
               text_hidden: int) -> tuple[VisionConfig, dict[str, TensorInfo]]:
    """An mmproj's config and its tensors under canonical names."""
    if gemma3:
        check_projector_type(keys)
        projected = canonical_siglip_tensors(tensors, keys.path)
        return projector_siglip_config(keys, projected, text_hidden), projected
    projected = canonical_projector_tensors(tensors, keys.path, projector_tower(keys))
    return projector_vision_config(keys, projected, text_hidden), projected


def _special_tokens(keys: Keys, metadata: Metadata, vision: VisionConfig | None) -> SpecialTokens:
    """Ids from tokenizer.ggml.*; vision tokens looked up by their text in the vocabulary."""
    texts = SIGLIP_TOKENS if vision is not None and vision.siglip else VISION_TOKENS
    found = {
        field: metadata.string_index("tokenizer.ggml.tokens", text)
        for field, text in texts.items()
    }
    if vision is not None:
        for field, index in found.items():
            if index is None:
                raise CorruptModel(
                    f"{keys.path}: vision model without {texts[field]} in its vocabulary"
                )
    if vision is not None and vision.tower == "qwen3vl":  # video: optional, looked up alike
        found["video_pad"] = metadata.string_index("tokenizer.ggml.tokens", VIDEO_PAD)
    eos_ids = keys.integers("tokenizer.ggml.eos_token_ids") if keys.has(
        "tokenizer.ggml.eos_token_ids") else ()
    return SpecialTokens(
        bos=keys.optional_integer("tokenizer.ggml.bos_token_id"),
        eos=keys.optional_integer("tokenizer.ggml.eos_token_id"),
        eos_ids=eos_ids,
        pad=keys.optional_integer("tokenizer.ggml.padding_token_id"),
        add_bos=keys.flag("tokenizer.ggml.add_bos_token", False),
        **found,
    )
