"""The Qwen2.5-VL vision tower in plain numpy: the yardstick the ONNX vision graph is
checked against, read from the GGUF's canonical ``v.*`` tensors.

    x = patches @ [W0 | W1].T                       # Conv3d as one matmul, [S, D]
    x = x[window order]                             # windows of 4x4 merged cells
    for each block:
        x = x + attn_out(attention(rms_norm(x, ln1)))   # windowed, or the whole image
        x = x + mlp(rms_norm(x, ln2))                   # SwiGLU with biases
    y = mlp2(gelu(mlp0(rms_norm(x, ln_q) as [S/4, 4D])))  # merger
    y = y[raster order]

The grid arithmetic (patch positions, rotary angles, window layout) and the tensor names
are engine.modelmath's, shared with the graph and the runtime and checked against HF
transformers on their own (tests/unit/vision/test_vision_tower.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import DTypeLike

from engine.modelmath.rope import apply_rope, vision_rope_angles
from engine.modelmath.vision_grid import (
    BLOCK_TENSORS,
    MERGER_TENSORS,
    block_tensor_name,
    check_grid,
    patch_embedding,
    patch_positions,
    window_layout,
)
from engine.reference.text import linear, rms_norm, silu, softmax

if TYPE_CHECKING:
    from engine.gguf import GGUFModel
    from engine.gguf.config import VisionConfig

@dataclass(frozen=True)
class VisionBlockWeights:
    """One vision block; D = vision width, F = FFN width (3420 in the real models)."""

    ln1: np.ndarray            # [D]
    attn_q: np.ndarray         # [D, D]
    attn_q_bias: np.ndarray    # [D]
    attn_k: np.ndarray         # [D, D]
    attn_k_bias: np.ndarray    # [D]
    attn_v: np.ndarray         # [D, D]
    attn_v_bias: np.ndarray    # [D]
    attn_out: np.ndarray       # [D, D]
    attn_out_bias: np.ndarray  # [D]
    ln2: np.ndarray            # [D]
    ffn_gate: np.ndarray       # [F, D]
    ffn_gate_bias: np.ndarray  # [F]
    ffn_up: np.ndarray         # [F, D]
    ffn_up_bias: np.ndarray    # [F]
    ffn_down: np.ndarray       # [D, F]
    ffn_down_bias: np.ndarray  # [D]


@dataclass(frozen=True)
class MergerWeights:
    ln_q: np.ndarray       # [D]
    mlp0: np.ndarray       # [4D, 4D]
    mlp0_bias: np.ndarray  # [4D]
    mlp2: np.ndarray       # [text hidden, 4D]
    mlp2_bias: np.ndarray  # [text hidden]


class VisionWeights:
    """De-quantized vision tensors (``TensorInfo.dequantize``) in the requested precision."""

    def __init__(self, model: GGUFModel, dtype: DTypeLike = np.float32):
        if model.config.vision is None:
            raise ValueError(f"{model.path} has no vision tower")
        self.config: VisionConfig = model.config.vision
        self.dtype = np.dtype(dtype)
        self._model = model

    def tensor(self, name: str) -> np.ndarray:
        return self._model.tensors[name].dequantize().astype(self.dtype, copy=False)

    def patch_embedding(self) -> np.ndarray:
        return patch_embedding(self._model, self.dtype)

    def block(self, i: int) -> VisionBlockWeights:
        return VisionBlockWeights(
            **{field: self.tensor(block_tensor_name(i, field)) for field in BLOCK_TENSORS})

    def merger(self) -> MergerWeights:
        return MergerWeights(**{f: self.tensor(name) for f, name in MERGER_TENSORS.items()})


@dataclass(frozen=True)
class VisionOutput:
    hidden_states: list[np.ndarray]  # n_layers + 1 of [S, D] in window order (SigLIP: raster
    #                                  order): patch embeddings, then each block's output
    embeds: np.ndarray               # [S/4, text hidden], raster order of merged cells


def attention(x: np.ndarray, w: VisionBlockWeights, n_heads: int, angles: np.ndarray,
              bounds: np.ndarray) -> np.ndarray:
    """Non-causal attention of x [S, D] inside each span of ``bounds`` [n + 1]."""
    s, d = x.shape
    hd = d // n_heads
    q = linear(x, w.attn_q, w.attn_q_bias).reshape(s, n_heads, hd).transpose(1, 0, 2)
    k = linear(x, w.attn_k, w.attn_k_bias).reshape(s, n_heads, hd).transpose(1, 0, 2)
    v = linear(x, w.attn_v, w.attn_v_bias).reshape(s, n_heads, hd).transpose(1, 0, 2)
    q = apply_rope(q, angles, interleaved=False)  # [heads, S, hd]
    k = apply_rope(k, angles, interleaved=False)
    out = np.empty_like(q)
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        span = slice(start, end)
        scores = q[:, span] @ k[:, span].transpose(0, 2, 1) / math.sqrt(hd)  # [heads, n, n]
        out[:, span] = softmax(scores) @ v[:, span]
    out = out.transpose(1, 0, 2).reshape(s, d)  # [S, D]
    return linear(out, w.attn_out, w.attn_out_bias)


def mlp(x: np.ndarray, w: VisionBlockWeights) -> np.ndarray:
    gate = linear(x, w.ffn_gate, w.ffn_gate_bias)
    up = linear(x, w.ffn_up, w.ffn_up_bias)
    return linear(silu(gate) * up, w.ffn_down, w.ffn_down_bias)


def vision_block(x: np.ndarray, w: VisionBlockWeights, vision: VisionConfig,
                 angles: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    residual = x
    x = rms_norm(x, w.ln1, vision.eps)
    x = attention(x, w, vision.n_heads, angles, bounds)
    x = x + residual
    residual = x
    x = rms_norm(x, w.ln2, vision.eps)
    x = mlp(x, w)
    return x + residual


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, as torch.nn.GELU()."""
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)).astype(x.dtype))


def merger(x: np.ndarray, w: MergerWeights, vision: VisionConfig) -> np.ndarray:
    """[S, D] -> [S/4, text hidden]: each merged cell's 4 patches side by side."""
    x = rms_norm(x, w.ln_q, vision.eps)
    x = x.reshape(-1, w.mlp0.shape[1])  # [S/4, 4D]
    x = gelu(linear(x, w.mlp0, w.mlp0_bias))
    return linear(x, w.mlp2, w.mlp2_bias)


def forward(model: GGUFModel, pixel_values: np.ndarray, grid: tuple[int, int, int],
            dtype: DTypeLike = np.float32,
            weights: VisionWeights | None = None) -> VisionOutput:
    """Encode one image: pixel_values [gh*gw, C*T*P*P] in merge-block order (as
    engine.vision.preprocess lays them out) -> embeddings [gh*gw/4, text hidden]."""
    weights = weights or VisionWeights(model, dtype)
    vision = weights.config
    gh, gw = check_grid(grid, vision)
    layout = window_layout(gh, gw, vision)
    order = layout.patch_order
    angles = vision_rope_angles(patch_positions(gh, gw, vision.spatial_merge_size)[order],
                                vision.hidden_size // vision.n_heads, vision.rope_theta)
    whole = np.array([0, gh * gw])
    full = set(vision.fullatt_block_indexes)

    x = linear(np.asarray(pixel_values, weights.dtype)[order], weights.patch_embedding())
    hidden_states = [x]
    for i in range(vision.n_layers):
        bounds = whole if i in full else layout.bounds
        x = vision_block(x, weights.block(i), vision, angles, bounds)
        hidden_states.append(x)
    embeds = merger(x, weights.merger(), vision)[layout.restore]
    return VisionOutput(hidden_states=hidden_states, embeds=embeds)
