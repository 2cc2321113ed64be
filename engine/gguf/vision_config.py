"""The Qwen2.5-VL and Qwen3-VL vision towers in either GGUF layout, parsed into one
``VisionConfig`` and one set of canonical tensor names (Ollama's inline Qwen2.5-VL names;
for Qwen3-VL, llama.cpp's mmproj names, Ollama's inline ones mapped onto them).

- Ollama, inline: keys ``qwen25vl.vision.*`` (``qwen3vl.vision.*``, ``qwen3vlmoe.vision.*``)
  in the model file;
  tensors ``v.*``.
- llama.cpp, projector: an mmproj file (arch ``clip``, ``clip.projector_type =
  "qwen2.5vl_merger"`` or ``"qwen3vl_merger"``, keys ``clip.vision.*``) whose tensor names
  are mapped here.
Defaults are the Qwen2.5-VL values (ARCHITECTURE.md §6) and are recorded as assumed.
"""

from __future__ import annotations

import re

import numpy as np

from engine.errors import CorruptModel, UnsupportedModel
from engine.gguf.config import VisionConfig
from engine.gguf.keys import Keys
from engine.gguf.reader import TensorInfo

PROJECTOR_TYPE = "qwen2.5vl_merger"
QWEN3VL_PROJECTOR_TYPE = "qwen3vl_merger"
TOWERS = {PROJECTOR_TYPE: "qwen25vl", QWEN3VL_PROJECTOR_TYPE: "qwen3vl"}
FFN_UP = "v.blk.0.ffn_up.weight"   # vision FFN width is only stored as this tensor's rows
POSITION_EMBD = "v.position_embd.weight"  # Qwen3-VL's learned positions, [side * side, D]

# llama.cpp mmproj name -> canonical name; v.blk.N.* is the same in both layouts.
CLIP_TO_CANONICAL = {
    "v.patch_embd.weight": "v.patch_embd_0.weight",
    "v.patch_embd.weight.1": "v.patch_embd_1.weight",
    "v.post_ln.weight": "v.merger.ln_q.weight",
    "mm.0.weight": "v.merger.mlp.0.weight",
    "mm.0.bias": "v.merger.mlp.0.bias",
    "mm.2.weight": "v.merger.mlp.2.weight",
    "mm.2.bias": "v.merger.mlp.2.bias",
}
# Qwen3-VL's mmproj: LayerNorms with biases, a Conv3d bias, its own merger names
_QWEN3VL_NAMES = {
    "v.patch_embd.weight": "v.patch_embd_0.weight",
    "v.patch_embd.weight.1": "v.patch_embd_1.weight",
    "v.patch_embd.bias": "v.patch_embd.bias",
    POSITION_EMBD: POSITION_EMBD,
    "v.post_ln.weight": "v.merger.norm.weight",
    "v.post_ln.bias": "v.merger.norm.bias",
    "mm.0.weight": "v.merger.fc1.weight",
    "mm.0.bias": "v.merger.fc1.bias",
    "mm.2.weight": "v.merger.fc2.weight",
    "mm.2.bias": "v.merger.fc2.bias",
}
_BLOCK = re.compile(r"v\.blk\.\d+\.")
_DEEPSTACK = re.compile(r"v\.deepstack\.\d+\.")


def _ffn_width(tensors: dict[str, TensorInfo], path: object) -> int:
    if FFN_UP not in tensors:
        raise CorruptModel(f"{path}: vision tensor {FFN_UP} is missing")
    return tensors[FFN_UP].shape[0]


def inline_vision_config(
    keys: Keys, tensors: dict[str, TensorInfo], text_hidden: int
) -> VisionConfig:
    """Ollama's one-file qwen25vl layout."""
    p = "qwen25vl.vision."
    n_layers = keys.integer(p + "block_count", 32)
    return VisionConfig(
        layout="inline",
        n_layers=n_layers,
        hidden_size=keys.integer(p + "embedding_length", 1280),
        intermediate_size=_ffn_width(tensors, keys.path),
        n_heads=keys.integer(p + "attention.head_count", 16),
        num_channels=_channels(keys, p + "num_channels"),
        patch_size=keys.integer(p + "patch_size", 14),
        spatial_merge_size=keys.integer(p + "spatial_merge_size", 2),
        temporal_patch_size=_temporal(keys, keys.integer(p + "temporal_patch_size", 2)),
        window_size=keys.integer(p + "window_size", 112),
        eps=keys.number(p + "attention.layer_norm_epsilon", 1e-6),
        rope_theta=keys.number(p + "rope.freq_base", 1e4),
        fullatt_block_indexes=keys.integers(p + "fullatt_block_indexes", (7, 15, 23, 31)),
        out_hidden_size=text_hidden,
    )


def projector_vision_config(
    keys: Keys, tensors: dict[str, TensorInfo], text_hidden: int
) -> VisionConfig:
    """llama.cpp's mmproj layout; ``tensors`` already carry canonical names."""
    tower = projector_tower(keys)
    p = "clip.vision."
    n_layers = keys.integer(p + "block_count")
    width = _ffn_width(tensors, keys.path)
    if keys.integer(p + "feed_forward_length", width) != width:
        raise CorruptModel(
            f"{keys.path}: {p}feed_forward_length {keys.metadata[p + 'feed_forward_length']} "
            f"disagrees with {FFN_UP} rows ({width})"
        )
    out_hidden = keys.integer(p + "projection_dim", text_hidden)
    if out_hidden != text_hidden:
        raise CorruptModel(
            f"{keys.path}: projector outputs {out_hidden} values per token but the text "
            f"model's hidden size is {text_hidden}; the projector belongs to another model"
        )
    if tower == "qwen3vl":
        return qwen3vl_projector_config(keys, tensors, n_layers, width, text_hidden)
    return VisionConfig(
        layout="projector",
        n_layers=n_layers,
        hidden_size=keys.integer(p + "embedding_length"),
        intermediate_size=width,
        n_heads=keys.integer(p + "attention.head_count"),
        num_channels=3,
        patch_size=keys.integer(p + "patch_size", 14),
        spatial_merge_size=keys.integer(p + "spatial_merge_size", 2),
        temporal_patch_size=2,   # llama.cpp always splits the Conv3d kernel in two
        window_size=keys.integer(p + "window_size", 112),
        eps=keys.number(p + "attention.layer_norm_epsilon", 1e-6),
        rope_theta=1e4,          # not stored by llama.cpp
        fullatt_block_indexes=_full_attention_blocks(keys, n_layers),
        out_hidden_size=text_hidden,
    )


def projector_tower(keys: Keys) -> str:
    """Which tower an mmproj holds ("qwen25vl" or "qwen3vl"), from its projector type."""
    arch = keys.string("general.architecture")
    projector = keys.string("clip.projector_type", None)
    if arch != "clip" or projector not in TOWERS:
        raise UnsupportedModel(
            f"{keys.path}: projector is {arch!r} / {projector!r}; Lantern supports only "
            f"'clip' projectors of type {PROJECTOR_TYPE!r} (Qwen2.5-VL) or "
            f"{QWEN3VL_PROJECTOR_TYPE!r} (Qwen3-VL)"
        )
    return TOWERS[projector]


def qwen3vl_projector_config(keys: Keys, tensors: dict[str, TensorInfo], n_layers: int,
                             width: int, text_hidden: int) -> VisionConfig:
    """Qwen3-VL's tower from llama.cpp's mmproj: the DeepStack blocks are flagged one by
    one (is_deepstack_layers), the position table's side follows from its rows."""
    p = "clip.vision."
    if POSITION_EMBD not in tensors:
        raise CorruptModel(f"{keys.path}: vision tensor {POSITION_EMBD} is missing")
    cells = tensors[POSITION_EMBD].shape[0]
    side = round(cells ** 0.5)
    if side * side != cells:
        raise CorruptModel(f"{keys.path}: {POSITION_EMBD} has {cells} rows, not a square grid")
    flags = keys.metadata.get(p + "is_deepstack_layers", ())
    return VisionConfig(
        layout="projector",
        n_layers=n_layers,
        hidden_size=keys.integer(p + "embedding_length"),
        intermediate_size=width,
        n_heads=keys.integer(p + "attention.head_count"),
        num_channels=3,
        patch_size=keys.integer(p + "patch_size", 16),
        spatial_merge_size=keys.integer(p + "spatial_merge_size", 2),
        temporal_patch_size=2,   # llama.cpp always splits the Conv3d kernel in two
        window_size=0,
        eps=keys.number(p + "attention.layer_norm_epsilon", 1e-6),
        rope_theta=1e4,          # not stored by llama.cpp; HF's fixed value
        fullatt_block_indexes=(),
        out_hidden_size=text_hidden,
        tower="qwen3vl",
        position_side=side,
        deepstack_layers=tuple(i for i, flag in enumerate(flags) if flag),
    )


def _channels(keys: Keys, key: str) -> int:
    """Ollama's converter writes 0 when the HF config names the field differently."""
    value = keys.integer(key, 3)
    if value == 0:
        keys.assumed.append(key)
        return 3
    return value


def _temporal(keys: Keys, value: int) -> int:
    if value != 2:
        raise UnsupportedModel(f"{keys.path}: temporal patch size {value} (only 2 is supported)")
    return value


def _full_attention_blocks(keys: Keys, n_layers: int) -> tuple[int, ...]:
    """llama.cpp stores the period ``n_wa_pattern``: block i is global when (i+1) % n == 0."""
    period = keys.integer("clip.vision.n_wa_pattern", 8)
    if period <= 0:
        raise CorruptModel(f"{keys.path}: clip.vision.n_wa_pattern is {period}")
    return tuple(i for i in range(n_layers) if (i + 1) % period == 0)


def canonical_projector_tensors(
    tensors: dict[str, TensorInfo], path: object, tower: str = "qwen25vl"
) -> dict[str, TensorInfo]:
    """Rename an mmproj's tensors to the inline names (``v.blk.N.*`` and Qwen3-VL's
    ``v.deepstack.N.*`` unchanged)."""
    names, kept = (_QWEN3VL_NAMES, (_BLOCK, _DEEPSTACK)) if tower == "qwen3vl" else (
        CLIP_TO_CANONICAL, (_BLOCK,))
    out: dict[str, TensorInfo] = {}
    for name, tensor in tensors.items():
        canonical = names.get(name) or (
            name if any(pattern.match(name) for pattern in kept) else None)
        if canonical is None:
            raise UnsupportedModel(
                f"{path}: projector tensor {name} is not part of a {tower} vision tower"
            )
        out[canonical] = TensorInfo(
            canonical, tensor.ggml_type, tensor.shape, tensor.raw, tensor.n_elements
        )
    return out


def vision_tensor_shapes(vision: VisionConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the vision tower reads, numpy order (out-first)."""
    if vision.tower == "qwen3vl":
        return qwen3vl_tensor_shapes(vision)
    d, f, c = vision.hidden_size, vision.intermediate_size, vision.num_channels
    ps = vision.patch_size
    merged = d * vision.spatial_merge_size**2
    shapes: dict[str, tuple[int, ...]] = {
        "v.patch_embd_0.weight": (d, c, ps, ps),
        "v.patch_embd_1.weight": (d, c, ps, ps),
        "v.merger.ln_q.weight": (d,),
        "v.merger.mlp.0.weight": (merged, merged),
        "v.merger.mlp.0.bias": (merged,),
        "v.merger.mlp.2.weight": (vision.out_hidden_size, merged),
        "v.merger.mlp.2.bias": (vision.out_hidden_size,),
    }
    for i in range(vision.n_layers):
        b = f"v.blk.{i}."
        shapes |= {
            b + "ln1.weight": (d,),
            b + "ln2.weight": (d,),
            b + "ffn_gate.weight": (f, d),
            b + "ffn_gate.bias": (f,),
            b + "ffn_up.weight": (f, d),
            b + "ffn_up.bias": (f,),
            b + "ffn_down.weight": (d, f),
            b + "ffn_down.bias": (d,),
        }
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out"):
            shapes |= {b + proj + ".weight": (d, d), b + proj + ".bias": (d,)}
    return shapes


def qwen3vl_tensor_shapes(vision: VisionConfig) -> dict[str, tuple[int, ...]]:
    """Qwen3-VL's tower: Conv3d with bias, position table, LayerNorm blocks with fused
    q|k|v, the final merger and one merger per DeepStack block."""
    d, f, c, ps = vision.hidden_size, vision.intermediate_size, vision.num_channels, \
        vision.patch_size
    merged, out = d * vision.spatial_merge_size**2, vision.out_hidden_size
    shapes: dict[str, tuple[int, ...]] = {
        "v.patch_embd_0.weight": (d, c, ps, ps),
        "v.patch_embd_1.weight": (d, c, ps, ps),
        "v.patch_embd.bias": (d,),
        POSITION_EMBD: (vision.position_side**2, d),
    }
    for i in range(vision.n_layers):
        b = f"v.blk.{i}."
        for name, shape in (("ln1", (d,)), ("ln2", (d,)), ("attn_qkv", (3 * d, d)),
                            ("attn_out", (d, d)), ("ffn_up", (f, d)), ("ffn_down", (d, f))):
            shapes |= {b + name + ".weight": shape, b + name + ".bias": shape[:1]}
    mergers = {"v.merger.": d} | {f"v.deepstack.{i}.": merged for i in vision.deepstack_layers}
    for prefix, normed in mergers.items():
        shapes |= {prefix + "norm.weight": (normed,), prefix + "norm.bias": (normed,),
                   prefix + "fc1.weight": (merged, merged), prefix + "fc1.bias": (merged,),
                   prefix + "fc2.weight": (out, merged), prefix + "fc2.bias": (out,)}
    return shapes


# Ollama's inline qwen3vl names (its converter: q|k|v split, the Conv3d kept whole as
# [D*C, T, P, P], DeepStack mergers numbered by list position) -> canonical suffixes
_OLLAMA_QWEN3VL = (
    (re.compile(r"v\.blk\.(\d+)\.norm([12])\.(weight|bias)$"), r"v.blk.\1.ln\2.\3"),
    (re.compile(r"v\.blk\.(\d+)\.mlp\.linear_fc1\.(weight|bias)$"), r"v.blk.\1.ffn_up.\2"),
    (re.compile(r"v\.blk\.(\d+)\.mlp\.linear_fc2\.(weight|bias)$"), r"v.blk.\1.ffn_down.\2"),
    (re.compile(r"v\.blk\.(\d+)\.attn_out\.(weight|bias)$"), r"v.blk.\1.attn_out.\2"),
    (re.compile(r"v\.merger\.norm\.(weight|bias)$"), r"v.merger.norm.\1"),
    (re.compile(r"v\.merger\.linear_fc([12])\.(weight|bias)$"), r"v.merger.fc\1.\2"),
    (re.compile(r"v\.pos_embed\.weight$"), POSITION_EMBD),
    (re.compile(r"v\.patch_embed\.bias$"), "v.patch_embd.bias"),
)
_OLLAMA_QKV = re.compile(r"v\.blk\.(\d+)\.attn_([qkv])\.(weight|bias)$")
_OLLAMA_DEEPSTACK = re.compile(
    r"v\.deepstack_merger\.(\d+)\.(norm|linear_fc1|linear_fc2)\.(weight|bias)$")


def qwen3vl_inline(keys: Keys, tensors: dict[str, TensorInfo], text_hidden: int,
                   arch: str) -> tuple[VisionConfig, dict[str, TensorInfo]]:
    """Ollama's one-file qwen3vl (or qwen3vlmoe, keys under its own name): the tower's config
    and the file's tensors under canonical names (q|k|v fused again, the Conv3d split into
    its two temporal halves)."""
    p = f"{arch}.vision."
    indexes = keys.integers(p + "deepstack_visual_indexes", ())
    out: dict[str, TensorInfo] = {}
    qkv: dict[tuple[str, str], dict[str, TensorInfo]] = {}
    for name, tensor in tensors.items():
        if not name.startswith("v."):
            out[name] = tensor
        elif match := _OLLAMA_QKV.match(name):
            qkv.setdefault((match[1], match[3]), {})[match[2]] = tensor
        elif match := _OLLAMA_DEEPSTACK.match(name):
            part = {"norm": "norm", "linear_fc1": "fc1", "linear_fc2": "fc2"}[match[2]]
            out[f"v.deepstack.{indexes[int(match[1])]}.{part}.{match[3]}"] = tensor
        elif name == "v.patch_embed.weight":
            out |= _patch_halves(tensor, keys, p)
        else:
            canonical = next((pattern.sub(target, name) for pattern, target in _OLLAMA_QWEN3VL
                              if pattern.match(name)), None)
            if canonical is None:
                raise UnsupportedModel(
                    f"{keys.path}: tensor {name} is not part of a Qwen3-VL tower")
            out[canonical] = tensor
    for (block, kind), parts in qkv.items():
        out[f"v.blk.{block}.attn_qkv.{kind}"] = _stacked(parts, f"v.blk.{block}.attn_qkv.{kind}",
                                                         keys)
    width = _ffn_width(out, keys.path)
    side = round((out[POSITION_EMBD].shape[0]) ** 0.5) if POSITION_EMBD in out else 0
    config = VisionConfig(
        layout="inline",
        n_layers=keys.integer(p + "block_count"),
        hidden_size=keys.integer(p + "embedding_length"),
        intermediate_size=width,
        n_heads=keys.integer(p + "attention.head_count", 16),
        num_channels=_channels(keys, p + "num_channels"),
        patch_size=keys.integer(p + "patch_size", 16),
        spatial_merge_size=keys.integer(p + "spatial_merge_size", 2),
        temporal_patch_size=_temporal(keys, keys.integer(p + "temporal_patch_size", 2)),
        window_size=0,
        eps=keys.number(p + "attention.layer_norm_epsilon", 1e-6),
        rope_theta=keys.number(p + "rope.freq_base", 1e4),
        fullatt_block_indexes=(),
        out_hidden_size=text_hidden,
        tower="qwen3vl",
        position_side=side,
        deepstack_layers=tuple(indexes),
    )
    return config, out


def _stacked(parts: dict[str, TensorInfo], name: str, keys: Keys) -> TensorInfo:
    """q, k and v rows one under the other, as the mmproj stores attn_qkv."""
    if set(parts) != {"q", "k", "v"} or len({t.ggml_type for t in parts.values()}) != 1:
        raise UnsupportedModel(f"{keys.path}: {name}: q, k and v differ in type or are missing")
    q, k, v = parts["q"], parts["k"], parts["v"]
    raw = np.concatenate([q.raw, k.raw, v.raw], axis=0)
    shape = (q.shape[0] + k.shape[0] + v.shape[0], *q.shape[1:])
    return TensorInfo(name, q.ggml_type, shape, raw, q.n_elements + k.n_elements + v.n_elements)


def _patch_halves(tensor: TensorInfo, keys: Keys, p: str) -> dict[str, TensorInfo]:
    """Ollama's Conv3d [D*C, T, P, P] -> the mmproj's two temporal halves [D, C, P, P]."""
    channels = _channels(keys, p + "num_channels")
    rows, temporal, ps, _ = tensor.shape
    raw = tensor.raw.reshape(rows // channels, channels, temporal, ps, -1)
    return {
        f"v.patch_embd_{t}.weight": TensorInfo(
            f"v.patch_embd_{t}.weight", tensor.ggml_type, (rows // channels, channels, ps, ps),
            np.ascontiguousarray(raw[:, :, t]), tensor.n_elements // temporal)
        for t in range(temporal)
    }
