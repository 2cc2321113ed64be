"""Gemma 3's SigLIP vision tower and projector in plain numpy: the yardstick its ONNX graph is
checked against, read from the GGUF's canonical tensors (engine.gguf.siglip_config).

    x = patches @ patch_embedding.T + bias + position_embedding   # conv as a matmul, [S, D]
    for each block:                                              # pre-LN ViT block
        x = x + attn_output(attention(layer_norm(x, layer_norm1)))   # non-causal
        x = x + fc2(gelu_tanh(fc1(layer_norm(x, layer_norm2))))
    x = layer_norm(x, post_layernorm)
    y = average_pool(x, k x k patches) -> [tokens_per_image, D]
    y = rms_norm(y, mm_soft_emb_norm) @ mm_input_projection        # [N, text hidden]

The projector's norm weight is stored with Gemma's +1 already added.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import DTypeLike

from engine.reference.text import gelu_tanh, linear, rms_norm, softmax
from engine.reference.vision_tower import VisionOutput

if TYPE_CHECKING:
    from engine.gguf import GGUFModel

BLOCK_PARTS = ("layer_norm1", "attn_q", "attn_k", "attn_v", "attn_output", "layer_norm2",
               "mlp.fc1", "mlp.fc2")


@dataclass(frozen=True)
class SiglipBlockWeights:
    """One block: (weight, bias) per part of BLOCK_PARTS."""

    parts: dict[str, tuple[np.ndarray, np.ndarray]]

    def __getitem__(self, part: str) -> tuple[np.ndarray, np.ndarray]:
        return self.parts[part]


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis."""
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + eps) * weight \
        + bias


def attention(x: np.ndarray, w: SiglipBlockWeights, n_heads: int) -> np.ndarray:
    """Every patch attends to every patch: x [S, D] -> [S, D]."""
    s, d = x.shape
    hd = d // n_heads
    q, k, v = (linear(x, *w[part]).reshape(s, n_heads, hd).transpose(1, 0, 2)
               for part in ("attn_q", "attn_k", "attn_v"))  # [heads, S, hd]
    probs = softmax(q @ k.transpose(0, 2, 1) / math.sqrt(hd))  # [heads, S, S]
    out = (probs @ v).transpose(1, 0, 2).reshape(s, d)
    return linear(out, *w["attn_output"])


def siglip_block(x: np.ndarray, w: SiglipBlockWeights, n_heads: int, eps: float) -> np.ndarray:
    x = x + attention(layer_norm(x, *w["layer_norm1"], eps), w, n_heads)
    h = gelu_tanh(linear(layer_norm(x, *w["layer_norm2"], eps), *w["mlp.fc1"]))
    return x + linear(h, *w["mlp.fc2"])


def average_pool(x: np.ndarray, side: int, kernel: int) -> np.ndarray:
    """[side*side, D] in raster order -> [(side/kernel)^2, D], each token the mean of a
    kernel x kernel square of patches."""
    t = side // kernel
    return x.reshape(t, kernel, t, kernel, -1).mean(axis=(1, 3)).reshape(t * t, -1)


def forward(model: GGUFModel, pixel_values: np.ndarray,
            dtype: DTypeLike = np.float32) -> VisionOutput:
    """Encode one image: pixel_values [S, C*P*P] in raster order (engine.vision.gemma3)
    -> embeddings [tokens_per_image, text hidden]."""
    vision = model.config.vision
    if vision is None or not vision.siglip:
        raise ValueError(f"{model.path} has no SigLIP vision tower")

    def tensor(name: str) -> np.ndarray:
        return model.tensors[name].dequantize().astype(dtype, copy=False)

    def pair(name: str) -> tuple[np.ndarray, np.ndarray]:
        return tensor(f"{name}.weight"), tensor(f"{name}.bias")

    d, eps = vision.hidden_size, vision.eps
    x = np.asarray(pixel_values, dtype)
    x = linear(x, tensor("v.patch_embedding.weight").reshape(d, -1),
               tensor("v.patch_embedding.bias"))
    x = x + tensor("v.position_embedding.weight")
    hidden_states = [x]
    for i in range(vision.n_layers):
        w = SiglipBlockWeights({part: pair(f"v.blk.{i}.{part}") for part in BLOCK_PARTS})
        x = siglip_block(x, w, vision.n_heads, eps)
        hidden_states.append(x)
    x = layer_norm(x, *pair("v.post_layernorm"), eps)
    pooled = average_pool(x, vision.image_size // vision.patch_size, vision.spatial_merge_size)
    embeds = rms_norm(pooled, tensor("mm.mm_soft_emb_norm.weight"), eps) \
        @ tensor("mm.mm_input_projection.weight")
    return VisionOutput(hidden_states=hidden_states, embeds=embeds)
