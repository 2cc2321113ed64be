"""The Qwen3-VL vision tower in plain numpy: the yardstick its ONNX graph is checked against,
read from the GGUF's canonical ``v.*`` tensors (engine.gguf.vision_config).

    x = patches @ [W0 | W1].T + b + positions        # Conv3d as one matmul, [S, D]; the
    #                                                   learned table read bilinearly
    for each block:
        x = x + attn_out(attention(layer_norm(x, ln1)))   # the whole image, 2-D rotary
        x = x + fc2(gelu_tanh(fc1(layer_norm(x, ln2))))
        if the block is a DeepStack layer:                # its own merger, normed after
            deepstack += [fc2(gelu(fc1(layer_norm(x as [S/4, 4D]))))]   # the 2x2 shuffle
    embeds = fc2(gelu(fc1(layer_norm(x, ln_q) as [S/4, 4D])))

Rows stay in merge-block order throughout, which is the raster order of merged cells. The
k-th DeepStack output is added to the hidden states after the k-th decoder layer at the
image rows (engine.reference.text.forward's ``deepstack``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import DTypeLike

from engine.modelmath.rope import apply_rope, vision_rope_angles
from engine.modelmath.vision_grid import (
    check_grid,
    patch_positions,
    position_interpolation,
)
from engine.reference.text import gelu_tanh, linear, softmax
from engine.reference.vision_tower import VisionWeights, gelu

if TYPE_CHECKING:
    from engine.gguf import GGUFModel
    from engine.gguf.config import VisionConfig


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + x.dtype.type(eps)) * weight + bias


@dataclass(frozen=True)
class Qwen3VLOutput:
    hidden_states: list[np.ndarray]  # n_layers + 1 of [S, D]: patch embeddings (positions
    #                                  added), then each block's output
    embeds: np.ndarray               # [S/4, text hidden], raster order of merged cells
    deepstack: np.ndarray            # [len(deepstack_layers), S/4, text hidden]


class Qwen3VLWeights(VisionWeights):
    """De-quantized tower tensors in the requested precision (read by name: its blocks
    are not Qwen2.5-VL's)."""

    def __init__(self, model: GGUFModel, dtype: DTypeLike = np.float32):
        if model.config.vision is None or model.config.vision.tower != "qwen3vl":
            raise ValueError(f"{model.path} has no Qwen3-VL vision tower")
        super().__init__(model, dtype)


def attention(x: np.ndarray, w: Qwen3VLWeights, prefix: str, n_heads: int,
              angles: np.ndarray) -> np.ndarray:
    """Non-causal attention of x [S, D] over the whole image, fused q|k|v with bias."""
    s, d = x.shape
    hd = d // n_heads
    qkv = linear(x, w.tensor(prefix + "attn_qkv.weight"), w.tensor(prefix + "attn_qkv.bias"))
    q, k, v = (part.reshape(s, n_heads, hd).transpose(1, 0, 2)
               for part in np.split(qkv, 3, axis=-1))  # [heads, S, hd]
    q = apply_rope(q, angles, interleaved=False)
    k = apply_rope(k, angles, interleaved=False)
    scores = q @ k.transpose(0, 2, 1) / x.dtype.type(math.sqrt(hd))  # [heads, S, S]
    out = (softmax(scores) @ v).transpose(1, 0, 2).reshape(s, d)
    return linear(out, w.tensor(prefix + "attn_out.weight"), w.tensor(prefix + "attn_out.bias"))


def block(x: np.ndarray, w: Qwen3VLWeights, i: int, vision: VisionConfig,
          angles: np.ndarray) -> np.ndarray:
    p = f"v.blk.{i}."
    h = layer_norm(x, w.tensor(p + "ln1.weight"), w.tensor(p + "ln1.bias"), vision.eps)
    x = x + attention(h, w, p, vision.n_heads, angles)
    h = layer_norm(x, w.tensor(p + "ln2.weight"), w.tensor(p + "ln2.bias"), vision.eps)
    h = gelu_tanh(linear(h, w.tensor(p + "ffn_up.weight"), w.tensor(p + "ffn_up.bias")))
    return x + linear(h, w.tensor(p + "ffn_down.weight"), w.tensor(p + "ffn_down.bias"))


def merge(x: np.ndarray, w: Qwen3VLWeights, prefix: str, eps: float,
          after_shuffle: bool) -> np.ndarray:
    """[S, D] -> [S/4, text hidden]: each merged cell's 4 patches side by side, LayerNorm
    before the shuffle (the final merger) or after it (the DeepStack mergers)."""
    merged = w.tensor(prefix + "fc1.weight").shape[1]
    norm = w.tensor(prefix + "norm.weight"), w.tensor(prefix + "norm.bias")
    if after_shuffle:
        x = layer_norm(x.reshape(-1, merged), *norm, eps)
    else:
        x = layer_norm(x, *norm, eps).reshape(-1, merged)
    x = gelu(linear(x, w.tensor(prefix + "fc1.weight"), w.tensor(prefix + "fc1.bias")))
    return linear(x, w.tensor(prefix + "fc2.weight"), w.tensor(prefix + "fc2.bias"))


def positions_table(w: Qwen3VLWeights, gh: int, gw: int) -> np.ndarray:
    """The interpolated learned positions [S, D], merge-block order."""
    vision = w.config
    rows, weights = position_interpolation(gh, gw, vision.position_side,
                                           vision.spatial_merge_size)
    table = w.tensor("v.position_embd.weight")
    return (table[rows] * weights[..., None].astype(w.dtype)).sum(axis=0)


def forward(model: GGUFModel, pixel_values: np.ndarray, grid: tuple[int, int, int],
            dtype: DTypeLike = np.float32,
            weights: Qwen3VLWeights | None = None) -> Qwen3VLOutput:
    """Encode one image: pixel_values [gh*gw, C*T*P*P] in merge-block order (as
    engine.vision.preprocess lays them out) -> embeddings and DeepStack features."""
    w = weights or Qwen3VLWeights(model, dtype)
    vision = w.config
    gh, gw = check_grid(grid, vision)
    angles = vision_rope_angles(patch_positions(gh, gw, vision.spatial_merge_size),
                                vision.hidden_size // vision.n_heads, vision.rope_theta)
    x = linear(np.asarray(pixel_values, w.dtype), w.patch_embedding(),
               w.tensor("v.patch_embd.bias"))
    x = x + positions_table(w, gh, gw)
    hidden_states, deepstack = [x], []
    for i in range(vision.n_layers):
        x = block(x, w, i, vision, angles)
        hidden_states.append(x)
        if i in vision.deepstack_layers:
            deepstack.append(merge(x, w, f"v.deepstack.{i}.", vision.eps, after_shuffle=True))
    embeds = merge(x, w, "v.merger.", vision.eps, after_shuffle=False)
    stacked = np.stack(deepstack) if deepstack else np.zeros((0, *embeds.shape), embeds.dtype)
    return Qwen3VLOutput(hidden_states=hidden_states, embeds=embeds, deepstack=stacked)
