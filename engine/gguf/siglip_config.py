"""Gemma 3's SigLIP vision tower and projector in either GGUF layout, parsed into one
``VisionConfig`` (``tower="siglip"``) and one set of canonical (Ollama inline) tensor names.

- Ollama, inline: keys ``gemma3.vision.*`` and ``gemma3.mm.tokens_per_image`` in the model
  file; tensors ``v.patch_embedding``, ``v.blk.N.layer_norm1``, ``mm.mm_input_projection``...
- llama.cpp, projector: an mmproj (arch ``clip``, ``clip.projector_type = "gemma3"``, keys
  ``clip.vision.*``) with tensors ``v.patch_embd``, ``v.blk.N.ln1``, ``mm.input_projection``...
Both converters store the projector's RMSNorm weight with the 1 Gemma's norm adds.
"""

from __future__ import annotations

import math
import re

from engine.errors import CorruptModel, UnsupportedModel
from engine.gguf.config import VisionConfig
from engine.gguf.keys import Keys
from engine.gguf.reader import TensorInfo

PROJECTOR_TYPE = "gemma3"
TOKENS_PER_IMAGE = 256        # Gemma 3's mm_tokens_per_image where the file is silent
POOL_KERNEL = 4               # llama.cpp's default pooling kernel (896 / 14 / 16)
FFN_UP = "v.blk.0.mlp.fc1.weight"

# llama.cpp mmproj name -> canonical name
_PROJECTOR_NAMES = {
    "v.patch_embd.weight": "v.patch_embedding.weight",
    "v.patch_embd.bias": "v.patch_embedding.bias",
    "v.position_embd.weight": "v.position_embedding.weight",
    "v.post_ln.weight": "v.post_layernorm.weight",
    "v.post_ln.bias": "v.post_layernorm.bias",
    "mm.input_projection.weight": "mm.mm_input_projection.weight",
    "mm.soft_emb_norm.weight": "mm.mm_soft_emb_norm.weight",
}
_BLOCK_PARTS = {"ln1": "layer_norm1", "ln2": "layer_norm2", "attn_out": "attn_output",
                "ffn_up": "mlp.fc1", "ffn_down": "mlp.fc2", "attn_q": "attn_q",
                "attn_k": "attn_k", "attn_v": "attn_v"}
_BLOCK = re.compile(r"v\.blk\.(\d+)\.(\w+)\.(weight|bias)$")


def _ffn_width(tensors: dict[str, TensorInfo], path: object) -> int:
    if FFN_UP not in tensors:
        raise CorruptModel(f"{path}: vision tensor {FFN_UP} is missing")
    return tensors[FFN_UP].shape[0]


def inline_siglip_config(keys: Keys, tensors: dict[str, TensorInfo],
                         text_hidden: int) -> VisionConfig:
    """Ollama's one-file gemma3 layout."""
    p = "gemma3.vision."
    image_size = keys.integer(p + "image_size", 896)
    patch = keys.integer(p + "patch_size", 14)
    tokens = keys.integer("gemma3.mm.tokens_per_image", TOKENS_PER_IMAGE)
    return _config("inline", keys, p, tensors, text_hidden, image_size, patch, tokens)


def projector_siglip_config(keys: Keys, tensors: dict[str, TensorInfo],
                            text_hidden: int) -> VisionConfig:
    """llama.cpp's mmproj layout; ``tensors`` already carry canonical names. The pooled
    token count is stored as the pooling kernel (``clip.vision.projector.scale_factor``,
    written only when it is not 4)."""
    p = "clip.vision."
    image_size = keys.integer(p + "image_size")
    patch = keys.integer(p + "patch_size")
    kernel = keys.integer(p + "projector.scale_factor", POOL_KERNEL)
    out_hidden = keys.integer(p + "projection_dim", text_hidden)
    if out_hidden != text_hidden:
        raise CorruptModel(
            f"{keys.path}: projector outputs {out_hidden} values per token but the text "
            f"model's hidden size is {text_hidden}; the projector belongs to another model"
        )
    tokens = (image_size // patch // max(kernel, 1)) ** 2
    return _config("projector", keys, p, tensors, text_hidden, image_size, patch, tokens)


def _config(layout: str, keys: Keys, p: str, tensors: dict[str, TensorInfo], text_hidden: int,
            image_size: int, patch: int, tokens: int) -> VisionConfig:
    side = image_size // patch if patch > 0 else 0
    per_side = math.isqrt(tokens)
    if side <= 0 or image_size % patch or per_side**2 != tokens or side % per_side:
        raise CorruptModel(
            f"{keys.path}: a {image_size}-pixel image in {patch}-pixel patches does not pool "
            f"into {tokens} tokens"
        )
    return VisionConfig(
        layout=layout,
        n_layers=keys.integer(p + "block_count"),
        hidden_size=keys.integer(p + "embedding_length"),
        intermediate_size=_ffn_width(tensors, keys.path),
        n_heads=keys.integer(p + "attention.head_count"),
        num_channels=keys.integer(p + "num_channels", 3) or 3,
        patch_size=patch,
        spatial_merge_size=side // per_side,   # the pooling kernel
        temporal_patch_size=1,
        window_size=0,
        eps=keys.number(p + "attention.layer_norm_epsilon", 1e-6),
        rope_theta=0.0,
        fullatt_block_indexes=(),
        out_hidden_size=text_hidden,
        tower="siglip",
        image_size=image_size,
        tokens_per_image=tokens,
    )


def check_projector_type(keys: Keys) -> None:
    arch = keys.string("general.architecture")
    projector = keys.string("clip.projector_type", None)
    if arch != "clip" or projector != PROJECTOR_TYPE:
        raise UnsupportedModel(
            f"{keys.path}: projector is {arch!r} / {projector!r}; a gemma3 model needs a "
            f"'clip' projector of type {PROJECTOR_TYPE!r}"
        )


def canonical_siglip_tensors(tensors: dict[str, TensorInfo],
                             path: object) -> dict[str, TensorInfo]:
    """Rename a gemma3 mmproj's tensors to Ollama's inline names."""
    out: dict[str, TensorInfo] = {}
    for name, tensor in tensors.items():
        canonical = _PROJECTOR_NAMES.get(name)
        block = _BLOCK.match(name)
        if canonical is None and block and block[2] in _BLOCK_PARTS:
            canonical = f"v.blk.{block[1]}.{_BLOCK_PARTS[block[2]]}.{block[3]}"
        if canonical is None:
            raise UnsupportedModel(
                f"{path}: projector tensor {name} is not part of a Gemma 3 vision tower")
        out[canonical] = TensorInfo(
            canonical, tensor.ggml_type, tensor.shape, tensor.raw, tensor.n_elements)
    return out


def siglip_tensor_shapes(vision: VisionConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the SigLIP tower and projector read, numpy order (out-first); the input
    projection is stored [vision width, text hidden] and used as x @ W."""
    d, f, c, ps = vision.hidden_size, vision.intermediate_size, vision.num_channels, \
        vision.patch_size
    n_patches = (vision.image_size // ps) ** 2
    shapes: dict[str, tuple[int, ...]] = {
        "v.patch_embedding.weight": (d, c, ps, ps),
        "v.patch_embedding.bias": (d,),
        "v.position_embedding.weight": (n_patches, d),
        "v.post_layernorm.weight": (d,),
        "v.post_layernorm.bias": (d,),
        "mm.mm_soft_emb_norm.weight": (d,),
        "mm.mm_input_projection.weight": (d, vision.out_hidden_size),
    }
    for i in range(vision.n_layers):
        b = f"v.blk.{i}."
        for part, shape in (("layer_norm1", (d,)), ("layer_norm2", (d,)), ("attn_q", (d, d)),
                            ("attn_k", (d, d)), ("attn_v", (d, d)), ("attn_output", (d, d)),
                            ("mlp.fc1", (f, d)), ("mlp.fc2", (d, f))):
            shapes[f"{b}{part}.weight"] = shape
            shapes[f"{b}{part}.bias"] = (shape[0],)
    return shapes
