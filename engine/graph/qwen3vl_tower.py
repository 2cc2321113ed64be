"""The Qwen3-VL vision tower as an in-memory ONNX graph (one image per run).

    x = pixel_values @ [W0 | W1].T + b                      # [S, D], merge-block order
    x = x + sum_k Gather(table, rows[k]) * weights[k]        # learned positions, bilinear
    for each block:
        x = x + attn_out(attention(layer_norm(x, ln1)))      # whole image, 2-D rotary
        x = x + fc2(gelu_tanh(fc1(layer_norm(x, ln2))))
        DeepStack block: deepstack += [fc2(gelu(fc1(layer_norm(x as [S/4, 4D]))))]
    embeds = fc2(gelu(fc1(layer_norm(x, ln_q) as [S/4, 4D])))

The host feeds what depends on the image's grid (engine.modelmath.vision_grid computes it):
the position table's rows and weights and the rotary cos/sin per row. The numpy reference
is engine/reference/qwen3vl_tower.py. Weights as in engine/graph/vision_tower.py (fp32 or
4-bit MatMulNBits with float activations); activations are fp32.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from engine.gguf import GGUFModel
from engine.graph.builder import GraphBuilder
from engine.graph.linear import dense_matmul, linear
from engine.graph.norms import layer_norm
from engine.graph.vision_tower import (
    COS,
    EMBEDS,
    EXACT_ACCURACY,
    PIXEL_VALUES,
    POSITION_IDS,
    SIN,
    VisionGraph,
    rotary,
    vision_matrix,
)
from engine.modelmath.vision_grid import patch_embedding

POSITION_ROWS = "position_rows"        # int64 [4, S]: the table rows around each patch
POSITION_WEIGHTS = "position_weights"  # float32 [4, S, 1]: their bilinear weights
DEEPSTACK = "deepstack"                # float32 [K, S/4, text hidden]


def build_qwen3vl_tower(model: GGUFModel) -> VisionGraph:
    vision = model.config.vision
    if vision is None or vision.tower != "qwen3vl":
        raise ValueError(f"{model.path} has no Qwen3-VL vision tower")
    g = GraphBuilder("qwen3vl_vision")
    t = model.tensors
    project = partial(linear, g, accuracy_level=EXACT_ACCURACY)
    f32 = np.float32

    def vector(name: str) -> np.ndarray:
        return t[name].dequantize().astype(f32)

    x = dense_matmul(g, PIXEL_VALUES, patch_embedding(model), "v.patch_embd",
                     bias=vector("v.patch_embd.bias"))  # [S, D]
    table = g.add_initializer("v.position_embd", vector("v.position_embd.weight"))
    [pos] = g.add_node("Gather", [table, POSITION_ROWS], ["v.position/rows"], axis=0)  # [4,S,D]
    [pos] = g.add_node("Mul", [pos, POSITION_WEIGHTS], ["v.position/weighted"])
    axis = g.add_initializer("v.position.axis", np.array([0], np.int64))
    [pos] = g.add_node("ReduceSum", [pos, axis], ["v.position/sum"], keepdims=0)  # [S, D]
    [x] = g.add_node("Add", [x, pos], ["v.position/added"])

    deepstack = []
    for i in range(vision.n_layers):
        p = f"v.blk.{i}."
        h = layer_norm(g, x, vector(p + "ln1.weight"), vector(p + "ln1.bias"), vision.eps,
                       p + "ln1")
        a = attention(g, h, model, i, vision.n_heads, project)
        [x] = g.add_node("Add", [x, a], [p + "attn_residual"])
        h = layer_norm(g, x, vector(p + "ln2.weight"), vector(p + "ln2.bias"), vision.eps,
                       p + "ln2")
        h = project(h, vision_matrix(model, p + "ffn_up.weight"), p + "ffn_up",
                    bias=vector(p + "ffn_up.bias"))
        [h] = g.add_node("Gelu", [h], [p + "gelu"], approximate="tanh")
        h = project(h, vision_matrix(model, p + "ffn_down.weight"), p + "ffn_down",
                    bias=vector(p + "ffn_down.bias"))
        [x] = g.add_node("Add", [x, h], [p + "ffn_residual"])
        if i in vision.deepstack_layers:
            deepstack.append(merger(g, x, model, f"v.deepstack.{i}.", vision.eps, project,
                                    after_shuffle=True))
    embeds = merger(g, x, model, "v.merger.", vision.eps, project, after_shuffle=False)
    [embeds] = g.add_node("Identity", [embeds], [EMBEDS])
    outputs = [(embeds, f32, ["N", vision.out_hidden_size])]
    if deepstack:
        stacked = [g.add_node("Unsqueeze", [y, axis], [f"{y}/stacked"])[0] for y in deepstack]
        [stacked] = g.add_node("Concat", stacked, [DEEPSTACK], axis=0)  # [K, S/4, out]
        outputs.append((stacked, f32, [len(deepstack), "N", vision.out_hidden_size]))

    s, d = "S", vision.hidden_size
    patch = vision.num_channels * vision.temporal_patch_size * vision.patch_size**2
    half = d // vision.n_heads // 2
    inputs = [
        (PIXEL_VALUES, f32, [s, patch]),
        (POSITION_ROWS, np.int64, [4, s]),
        (POSITION_WEIGHTS, f32, [4, s, 1]),
        (COS, f32, [s, half]),
        (SIN, f32, [s, half]),
        (POSITION_IDS, np.int64, [1, s]),
    ]
    return VisionGraph(g.make_model(inputs, outputs), g.external)


def attention(g: GraphBuilder, x: str, model: GGUFModel, i: int, n_heads: int,
              project) -> str:
    """x [S, D] -> [S, D]: fused q|k|v with bias, 2-D rotary on q and k, non-causal
    attention over the whole image, output projection."""
    p = f"v.blk.{i}."
    t = model.tensors
    d = model.config.vision.hidden_size
    qkv = project(x, vision_matrix(model, p + "attn_qkv.weight"), p + "attn_qkv",
                  bias=t[p + "attn_qkv.bias"].dequantize().astype(np.float32))  # [S, 3D]
    q, k, v = g.add_node("Split", [qkv], [p + "q", p + "k", p + "v"], axis=-1, num_outputs=3)
    batch = g.add_initializer(p + "batch_shape", np.array([1, -1, d], np.int64))
    q, k = (rotary(g, y, batch, n_heads, f"{p}{name}_rot") for name, y in (("q", q), ("k", k)))
    [v] = g.add_node("Reshape", [v, batch], [p + "v_batch"])  # [1, S, D]
    [out] = g.add_node("MultiHeadAttention", [q, k, v], [p + "mha"], domain="com.microsoft",
                       num_heads=n_heads)  # [1, S, D]
    flat = g.add_initializer(p + "flat_shape", np.array([-1, d], np.int64))
    [out] = g.add_node("Reshape", [out, flat], [p + "mha_flat"])  # [S, D]
    return project(out, vision_matrix(model, p + "attn_out.weight"), p + "attn_out",
                   bias=t[p + "attn_out.bias"].dequantize().astype(np.float32))


def merger(g: GraphBuilder, x: str, model: GGUFModel, prefix: str, eps: float, project,
           after_shuffle: bool) -> str:
    """x [S, D] -> [S/4, out]: each merged cell's 4 patches side by side, LayerNorm before
    the shuffle (the final merger) or after it (DeepStack's)."""
    t = model.tensors
    fc1 = vision_matrix(model, prefix + "fc1.weight")
    cells = g.add_initializer(prefix + "cells_shape", np.array([-1, fc1.k], np.int64))
    norm = (t[prefix + "norm.weight"].dequantize(), t[prefix + "norm.bias"].dequantize())
    if after_shuffle:
        [x] = g.add_node("Reshape", [x, cells], [prefix + "cells"])  # [S/4, 4D]
        x = layer_norm(g, x, *norm, eps, prefix + "norm")
    else:
        x = layer_norm(g, x, *norm, eps, prefix + "norm")
        [x] = g.add_node("Reshape", [x, cells], [prefix + "cells"])
    x = project(x, fc1, prefix + "fc1", bias=t[prefix + "fc1.bias"].dequantize())
    [x] = g.add_node("Gelu", [x], [prefix + "gelu"], approximate="none")
    return project(x, vision_matrix(model, prefix + "fc2.weight"), prefix + "fc2",
                   bias=t[prefix + "fc2.bias"].dequantize())
