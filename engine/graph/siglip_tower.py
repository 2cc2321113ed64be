"""Gemma 3's SigLIP vision tower and projector as an in-memory ONNX graph (one image per run).

    x = pixel_values @ patch_embedding.T + bias + position_embedding   # [S, D]
    for each block:
        x = x + attn_output(MultiHeadAttention(layer_norm1(x)))        # fused q|k|v, non-causal
        x = x + fc2(gelu_tanh(fc1(layer_norm2(x))))
    x = post_layernorm(x)
    y = ReduceMean over k x k patches -> [N, D]; rms_norm; @ mm_input_projection

Every image has the same size, so nothing depends on the image but its pixels. Weights as
in engine.graph.vision_tower (4-bit formats as MatMulNBits with float activations, the rest
fp32); activations fp32. The reference is engine.reference.siglip_tower.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from engine.gguf import GGUFModel
from engine.gguf.config import VisionConfig
from engine.graph.builder import GraphBuilder
from engine.graph.fuse import stack_rows
from engine.graph.linear import dense_matmul, linear
from engine.graph.norms import layer_norm, rms_norm
from engine.graph.vision_tower import (
    EMBEDS,
    EXACT_ACCURACY,
    PIXEL_VALUES,
    VisionGraph,
    vision_matrix,
)


def build_siglip(model: GGUFModel) -> VisionGraph:
    vision = model.config.vision
    if vision is None or not vision.siglip:
        raise ValueError(f"{model.path} has no SigLIP vision tower")
    g = GraphBuilder("siglip")
    project = partial(linear, g, accuracy_level=EXACT_ACCURACY)
    vector = _vectors(model)
    d = vision.hidden_size

    x = dense_matmul(g, PIXEL_VALUES, vector("v.patch_embedding.weight").reshape(d, -1),
                     "v.patch_embedding", bias=vector("v.patch_embedding.bias"))
    positions = g.add_initializer("v.position_embedding", vector("v.position_embedding.weight"))
    [x] = g.add_node("Add", [x, positions], ["v.embeddings"])  # [S, D]
    for i in range(vision.n_layers):
        b = f"v.blk.{i}."
        h = _layer_norm(g, x, vector, b + "layer_norm1", vision.eps)
        [x] = g.add_node("Add", [x, _attention(g, h, model, vision, project, b)], [b + "attn_res"])
        h = _layer_norm(g, x, vector, b + "layer_norm2", vision.eps)
        h = project(h, vision_matrix(model, b + "mlp.fc1.weight"), b + "fc1",
                    bias=vector(b + "mlp.fc1.bias"))
        [h] = g.add_node("Gelu", [h], [b + "gelu"], approximate="tanh")
        h = project(h, vision_matrix(model, b + "mlp.fc2.weight"), b + "fc2",
                    bias=vector(b + "mlp.fc2.bias"))
        [x] = g.add_node("Add", [x, h], [b + "ffn_res"])
    x = _layer_norm(g, x, vector, "v.post_layernorm", vision.eps)
    x = _average_pool(g, x, vision)
    x = rms_norm(g, x, vector("mm.mm_soft_emb_norm.weight"), vision.eps, "mm.soft_emb_norm",
                 np.float32)
    projection = vector("mm.mm_input_projection.weight")  # [D, text hidden], used as x @ W
    [y] = g.add_node("MatMul", [x, g.add_initializer("mm.input_projection", projection)],
                     [EMBEDS])
    s = (vision.image_size // vision.patch_size) ** 2
    patch = vision.num_channels * vision.patch_size**2
    inputs = [(PIXEL_VALUES, np.float32, [s, patch])]
    outputs = [(y, np.float32, [vision.tokens_per_image, vision.out_hidden_size])]
    return VisionGraph(g.make_model(inputs, outputs), g.external)


def _vectors(model: GGUFModel):
    def vector(name: str) -> np.ndarray:
        return model.tensors[name].dequantize().astype(np.float32, copy=False)
    return vector


def _layer_norm(g: GraphBuilder, x: str, vector, name: str, eps: float) -> str:
    return layer_norm(g, x, vector(f"{name}.weight"), vector(f"{name}.bias"), eps, name)


def _attention(g: GraphBuilder, x: str, model: GGUFModel, vision: VisionConfig, project,
               b: str) -> str:
    """x [S, D] -> [S, D]: every patch attends to every patch."""
    d = vision.hidden_size
    parts = ("attn_q", "attn_k", "attn_v")
    weights = [vision_matrix(model, f"{b}{p}.weight") for p in parts]
    biases = [model.tensors[f"{b}{p}.bias"].dequantize() for p in parts]
    batch = g.add_initializer(f"{b}batch_shape", np.array([1, -1, d], np.int64))
    fused = stack_rows(weights)
    if fused is None:
        q, k, v = (project(x, w, f"{b}{p}", bias=bias)
                   for p, w, bias in zip(parts, weights, biases, strict=True))
    else:
        qkv = project(x, fused, f"{b}qkv", bias=np.concatenate(biases))  # [S, 3D]
        q, k, v = g.add_node("Split", [qkv], [f"{b}q", f"{b}k", f"{b}v"], axis=-1,
                             num_outputs=3)
    q, k, v = (g.add_node("Reshape", [t, batch], [f"{t}/batch"])[0] for t in (q, k, v))
    [out] = g.add_node("MultiHeadAttention", [q, k, v], [f"{b}mha"], domain="com.microsoft",
                       num_heads=vision.n_heads)  # [1, S, D]
    flat = g.add_initializer(f"{b}flat_shape", np.array([-1, d], np.int64))
    [out] = g.add_node("Reshape", [out, flat], [f"{b}attn_flat"])
    return project(out, vision_matrix(model, f"{b}attn_output.weight"), f"{b}attn_output",
                   bias=model.tensors[f"{b}attn_output.bias"].dequantize())


def _average_pool(g: GraphBuilder, x: str, vision: VisionConfig) -> str:
    """[side*side, D] raster order -> [tokens, D], the mean of each k x k square."""
    k = vision.spatial_merge_size
    t = vision.image_size // vision.patch_size // k
    squares = g.add_initializer("mm.pool_shape", np.array([t, k, t, k, -1], np.int64))
    [y] = g.add_node("Reshape", [x, squares], ["mm.pool_squares"])
    axes = g.add_initializer("mm.pool_axes", np.array([1, 3], np.int64))
    [y] = g.add_node("ReduceMean", [y, axes], ["mm.pool_mean"], keepdims=0)  # [t, t, D]
    flat = g.add_initializer("mm.pool_flat", np.array([t * t, -1], np.int64))
    [y] = g.add_node("Reshape", [y, flat], ["mm.pooled"])
    return y
