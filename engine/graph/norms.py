"""RMSNorm as ONNX Runtime's fused kernels: plain, residual-add + norm, and per head.

``add_rms_norm`` is the residual stream's step: it returns both the new residual
(x + residual, the "hidden state" the reference reports) and its normalised copy, in one
SkipSimplifiedLayerNormalization node.
"""

from __future__ import annotations

import numpy as np

from engine.graph.builder import GraphBuilder


def rms_norm(g: GraphBuilder, x: str, weight: np.ndarray, eps: float, name: str,
             dtype: type) -> str:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""
    gamma = g.add_initializer(f"{name}.weight", weight.astype(dtype))
    [y] = g.add_node("SimplifiedLayerNormalization", [x, gamma], [name], axis=-1,
                     epsilon=eps, stash_type=1)
    return y


def add_rms_norm(g: GraphBuilder, x: str, residual: str, weight: np.ndarray, eps: float,
                 name: str, dtype: type) -> tuple[str, str]:
    """residual = x + residual; return (rms_norm(residual), residual)."""
    gamma = g.add_initializer(f"{name}.weight", weight.astype(dtype))
    normed, _mean, _inv_std, total = g.add_node(
        "SkipSimplifiedLayerNormalization", [x, residual, gamma],
        [name, f"{name}/mean", f"{name}/inv_std", f"{name}/residual"],
        domain="com.microsoft", epsilon=eps)
    return normed, total


def head_rms_norm(g: GraphBuilder, x: str, weight: np.ndarray, n_heads: int, eps: float,
                  name: str, dtype: type) -> str:
    """RMSNorm of every head of x [1, S, n_heads * D] (Qwen3's q/k norm)."""
    head_dim = len(weight)
    heads = g.add_initializer(f"{name}.heads_shape", np.array([1, -1, n_heads, head_dim], np.int64))
    flat = g.add_initializer(f"{name}.flat_shape", np.array([1, -1, n_heads * head_dim], np.int64))
    [x] = g.add_node("Reshape", [x, heads], [f"{name}/heads"])  # [1, S, n_heads, D]
    x = rms_norm(g, x, weight, eps, name, dtype)
    [x] = g.add_node("Reshape", [x, flat], [f"{name}/flat"])  # [1, S, n_heads * D]
    return x


def layer_norm(g: GraphBuilder, x: str, weight: np.ndarray, bias: np.ndarray, eps: float,
               name: str) -> str:
    """LayerNorm with scale and shift over the last axis (the vision towers' norm)."""
    scale = g.add_initializer(f"{name}.weight", weight.astype(np.float32))
    shift = g.add_initializer(f"{name}.bias", bias.astype(np.float32))
    [y] = g.add_node("LayerNormalization", [x, scale, shift], [name], axis=-1, epsilon=eps)
    return y
