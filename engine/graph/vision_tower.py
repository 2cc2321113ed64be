"""The Qwen2.5-VL vision tower as an in-memory ONNX graph (one image per run).

    x = Gather(pixel_values, patch_order) @ [W0 | W1].T        # window order, [S, D]
    h = rms_norm(x, ln1[0])
    for each block:
        x, h = x + attn_out(attention(h)),  rms_norm(..., ln2)    # SkipSimplifiedLayerNorm
        x, h = x + mlp(h),                  rms_norm(..., next)   # next block's ln1 / ln_q
    y = mlp2(gelu(mlp0(h as [S/4, 4D])))                         # merger
    embeds = Gather(y, restore)                                  # raster order, [S/4, out]

The host feeds everything that depends on the image's grid (engine.modelmath.vision_grid
computes it): the window order, the rotary cos/sin per row, and for windowed blocks the
padded window layout. Windowed attention runs as a batch of windows [W, L, D] padded to
the largest window L (64 patches), with padded keys masked; blocks in
fullatt_block_indexes attend over all S rows. Both use com.microsoft.MultiHeadAttention:
measured faster than MatMul/Softmax/MatMul on a full-attention layer of the 3B shape, and
it streams the scores where MatMul/Softmax holds all [heads, S, S] of them, gigabytes for a
large image (docs/benchmarks-journal.md, 'Figures behind design choices').

Weights: float tensors as fp32 MatMul (the 3420-wide FFN is F16 in real files), 4-bit
formats as MatMulNBits with float activations, 8-bit formats widened to fp32 (no float
kernel exists for 8-bit MatMulNBits, see engine.graph.linear). Activations are fp32.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import onnx

from engine.gguf import GGUFModel
from engine.gguf.config import VisionConfig
from engine.gguf.repack import PackedWeight, pack, unpack
from engine.graph.builder import GraphBuilder
from engine.graph.fuse import stack_rows
from engine.graph.linear import dense_matmul, linear
from engine.graph.norms import add_rms_norm, rms_norm
from engine.modelmath.vision_grid import MERGER_TENSORS, block_tensor_name, patch_embedding

PIXEL_VALUES = "pixel_values"  # float32 [S, C*T*P*P], merge-block order
PATCH_ORDER = "patch_order"    # int64 [S]: source row of each window-order row
COS, SIN = "cos", "sin"        # float32 [S, D/2] rotary per window-order row
POSITION_IDS = "position_ids"  # int64 [1, S]: row index into cos/sin
WINDOW_SLOTS = "window_slots"  # int64 [W*L]: window-order row of each padded slot (pad: 0)
WINDOW_MASK = "window_mask"    # int32 [W, L]: 1 for real slots, 0 for padding
WINDOW_ROWS = "window_rows"    # int64 [S]: padded slot of each window-order row
RESTORE = "restore"            # int64 [S/4]: window-order cell of each raster-order cell
EMBEDS = "embeds"              # float32 [S/4, text hidden]

EXACT_ACCURACY = 0  # MatMulNBits with float activations


@dataclass(frozen=True)
class VisionGraph:
    model: onnx.ModelProto
    external: dict[str, np.ndarray]  # initializer name -> array, fed from memory


def vision_matrix(model: GGUFModel, name: str) -> PackedWeight:
    """4-bit formats stay packed for MatMulNBits; everything else becomes one fp32 dense
    matrix, so that q|k|v and gate|up fuse whatever mix of float types they have."""
    weight = pack(model.tensors[name])
    if weight.bits == 4:
        return weight
    return PackedWeight(ggml_type=weight.ggml_type, n=weight.n, k=weight.k,
                        dense=unpack(weight))


class _Blocks:
    """Reads the tensors of one block by field name (see engine.modelmath.vision_grid)."""

    def __init__(self, model: GGUFModel, i: int):
        self.model, self.i = model, i

    def matrix(self, field: str) -> PackedWeight:
        return vision_matrix(self.model, block_tensor_name(self.i, field))

    def vector(self, field: str) -> np.ndarray:
        return self.model.tensors[block_tensor_name(self.i, field)].dequantize()


def build_vision(model: GGUFModel) -> VisionGraph:
    vision = model.config.vision
    if vision is None:
        raise ValueError(f"{model.path} has no vision tower")
    g = GraphBuilder("vision")
    project = partial(linear, g, accuracy_level=EXACT_ACCURACY)
    eps, f32 = vision.eps, np.float32

    [x] = g.add_node("Gather", [PIXEL_VALUES, PATCH_ORDER], ["patches"], axis=0)  # [S, CTPP]
    x = dense_matmul(g, x, patch_embedding(model), "v.patch_embd")  # [S, D]
    h = rms_norm(g, x, _Blocks(model, 0).vector("ln1"), eps, "v.blk.0.ln1", f32)
    full = set(vision.fullatt_block_indexes)
    for i in range(vision.n_layers):
        b = _Blocks(model, i)
        a = attention(g, h, b, vision, project, f"v.blk.{i}.attn", windowed=i not in full)
        h, x = add_rms_norm(g, a, x, b.vector("ln2"), eps, f"v.blk.{i}.ln2", f32)
        m = mlp(g, h, b, project, f"v.blk.{i}.ffn")
        if i + 1 < vision.n_layers:
            norm, norm_name = _Blocks(model, i + 1).vector("ln1"), f"v.blk.{i + 1}.ln1"
        else:
            norm, norm_name = model.tensors[MERGER_TENSORS["ln_q"]].dequantize(), "v.merger.ln_q"
        h, x = add_rms_norm(g, m, x, norm, eps, norm_name, f32)
    embeds = merger(g, h, model, vision, project)

    s, d = "S", vision.hidden_size
    half = d // vision.n_heads // 2
    patch = vision.num_channels * vision.temporal_patch_size * vision.patch_size**2
    inputs = [
        (PIXEL_VALUES, f32, [s, patch]),
        (PATCH_ORDER, np.int64, [s]),
        (COS, f32, [s, half]),
        (SIN, f32, [s, half]),
        (POSITION_IDS, np.int64, [1, s]),
        (WINDOW_SLOTS, np.int64, ["WL"]),
        (WINDOW_MASK, np.int32, ["W", "L"]),
        (WINDOW_ROWS, np.int64, [s]),
        (RESTORE, np.int64, ["N"]),
    ]
    outputs = [(embeds, f32, ["N", vision.out_hidden_size])]
    return VisionGraph(g.make_model(inputs, outputs), g.external)


def attention(g: GraphBuilder, x: str, b: _Blocks, vision: VisionConfig, project,
              name: str, windowed: bool) -> str:
    """x [S, D] -> [S, D]: fused q|k|v, 2-D rotary on q and k, non-causal attention over
    the whole image or inside each window, output projection."""
    d = vision.hidden_size
    weights = [b.matrix(p) for p in ("attn_q", "attn_k", "attn_v")]
    biases = [b.vector(f"{p}_bias") for p in ("attn_q", "attn_k", "attn_v")]
    fused = stack_rows(weights)
    if fused is None:
        q, k, v = (project(x, w, f"{name}.{p}", bias=bias)
                   for p, w, bias in zip("qkv", weights, biases, strict=True))
    else:
        qkv = project(x, fused, f"{name}.qkv", bias=np.concatenate(biases))  # [S, 3D]
        q, k, v = g.add_node("Split", [qkv], [f"{name}/q", f"{name}/k", f"{name}/v"], axis=-1,
                             num_outputs=3)
    batch = g.add_initializer(f"{name}.batch_shape", np.array([1, -1, d], np.int64))
    q, k = (rotary(g, y, batch, vision.n_heads, f"{name}/{p}_rot")
            for p, y in (("q", q), ("k", k)))
    if windowed:
        out = _window_attention(g, q, k, v, d, vision.n_heads, name)
    else:
        [v] = g.add_node("Reshape", [v, batch], [f"{name}/v_batch"])  # [1, S, D]
        [out] = g.add_node("MultiHeadAttention", [q, k, v], [f"{name}/mha"],
                           domain="com.microsoft", num_heads=vision.n_heads)  # [1, S, D]
        flat = g.add_initializer(f"{name}.flat_shape", np.array([-1, d], np.int64))
        [out] = g.add_node("Reshape", [out, flat], [f"{name}/flat"])  # [S, D]
    return project(out, b.matrix("attn_out"), f"{name}.out", bias=b.vector("attn_out_bias"))


def rotary(g: GraphBuilder, x: str, batch: str, n_heads: int, name: str) -> str:
    """NeoX rotary of x [S, D] by the host's per-row cos/sin -> [1, S, D]."""
    [x] = g.add_node("Reshape", [x, batch], [f"{name}/batch"])  # [1, S, D]
    [y] = g.add_node("RotaryEmbedding", [x, POSITION_IDS, COS, SIN], [name],
                     domain="com.microsoft", num_heads=n_heads, interleaved=0)
    return y


def _window_attention(g: GraphBuilder, q: str, k: str, v: str, d: int, n_heads: int,
                      name: str) -> str:
    """q, k [1, S, D], v [S, D] -> [S, D], each row attending inside its window."""
    flat = g.add_initializer(f"{name}.flat_shape", np.array([-1, d], np.int64))
    [shape] = g.add_node("Shape", [WINDOW_MASK], [f"{name}/windows"])  # [W, L]
    dim = g.add_initializer(f"{name}.d", np.array([d], np.int64))
    [windows] = g.add_node("Concat", [shape, dim], [f"{name}/window_shape"], axis=0)  # [W, L, D]
    padded = []
    for part, y in (("q", q), ("k", k), ("v", v)):
        [y] = g.add_node("Reshape", [y, flat], [f"{name}/{part}_rows"])  # [S, D]
        [y] = g.add_node("Gather", [y, WINDOW_SLOTS], [f"{name}/{part}_slots"], axis=0)
        [y] = g.add_node("Reshape", [y, windows], [f"{name}/{part}_windows"])  # [W, L, D]
        padded.append(y)
    [out] = g.add_node("MultiHeadAttention", [*padded, "", WINDOW_MASK], [f"{name}/mha"],
                       domain="com.microsoft", num_heads=n_heads)  # [W, L, D]
    [out] = g.add_node("Reshape", [out, flat], [f"{name}/slots"])  # [W*L, D]
    [out] = g.add_node("Gather", [out, WINDOW_ROWS], [f"{name}/rows"], axis=0)  # [S, D]
    return out


def mlp(g: GraphBuilder, x: str, b: _Blocks, project, name: str) -> str:
    """SwiGLU with biases: down(silu(gate(x)) * up(x)); gate|up in one matmul when they fuse."""
    gate_w, up_w = b.matrix("ffn_gate"), b.matrix("ffn_up")
    gate_b, up_b = b.vector("ffn_gate_bias"), b.vector("ffn_up_bias")
    fused = stack_rows([gate_w, up_w])
    if fused is None:
        gate = project(x, gate_w, f"{name}.gate", bias=gate_b)
        up = project(x, up_w, f"{name}.up", bias=up_b)
    else:
        gate_up = project(x, fused, f"{name}.gate_up", bias=np.concatenate([gate_b, up_b]))
        gate, up = g.add_node("Split", [gate_up], [f"{name}/gate", f"{name}/up"], axis=-1,
                              num_outputs=2)  # [S, F] each
    [sig] = g.add_node("Sigmoid", [gate], [f"{name}/sigmoid"])
    [act] = g.add_node("Mul", [gate, sig], [f"{name}/silu"])
    [act] = g.add_node("Mul", [act, up], [f"{name}/silu_up"])
    return project(act, b.matrix("ffn_down"), f"{name}.down", bias=b.vector("ffn_down_bias"))


def merger(g: GraphBuilder, h: str, model: GGUFModel, vision: VisionConfig, project) -> str:
    """h [S, D] (already ln_q-normed) -> [S/4, out] in raster order of merged cells."""
    merged = vision.hidden_size * vision.spatial_merge_size**2
    cells = g.add_initializer("v.merger.cells_shape", np.array([-1, merged], np.int64))
    [x] = g.add_node("Reshape", [h, cells], ["v.merger/cells"])  # [S/4, 4D]
    tensor = model.tensors
    x = project(x, vision_matrix(model, MERGER_TENSORS["mlp0"]), "v.merger.mlp0",
                bias=tensor[MERGER_TENSORS["mlp0_bias"]].dequantize())
    [x] = g.add_node("Gelu", [x], ["v.merger/gelu"], approximate="none")
    x = project(x, vision_matrix(model, MERGER_TENSORS["mlp2"]), "v.merger.mlp2",
                bias=tensor[MERGER_TENSORS["mlp2_bias"]].dequantize())
    [y] = g.add_node("Gather", [x, RESTORE], [EMBEDS], axis=0)
    return y
