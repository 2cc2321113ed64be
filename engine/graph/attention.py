"""Self-attention of one decoder block: q/k/v projections, (Qwen3) q/k norm, rotary, grouped
query attention over the in-place KV cache, output projection.

The whole cache step is one com.microsoft.GroupQueryAttention node:
- past_key/past_value [1, kv_heads, max_len, D] are the same buffers as present_key/value
  (bound to one OrtValue each by the session), written in place at slots past..past+S-1;
- seqlens_k [1] = total_len - 1 and total_sequence_length (scalar) give the lengths, so
  truncating the cache is just passing a smaller length;
- cos/sin [T, R/2] hold one row per cache slot (do_rotary=1 reads the rows of the new
  tokens), which serves plain RoPE and M-RoPE alike: the host computes the rows. GQA turns
  the first R = 2 x their width dims of each head (R = rope_dims: D, or Phi-4-mini's
  partial 3/4) and passes the rest.
Query head h reads kv head h // (n_heads / kv_heads); scale 1/sqrt(D) (or the model's);
scores soft-capped where the model caps them (Gemma 2: GQA's softcap, cap * tanh(s / cap),
before the mask); causal, and for a sliding layer (Gemma 2 and 3, gpt-oss) limited to the
last sliding_window keys.
Attention sinks (gpt-oss): one learned logit per head joins each softmax's denominator, as
a key whose value is zero (GQA's head_sink input); the masked path below has none.
With a mask (Gemma 3 with images) GQA only writes the cache; the rows attend again
through plain ops under the host's mask, since GQA is causal by construction.
Row-invariant (fast CPU mode, engine.graph.kernels, 3.): GQA gets a spare row, S + 1 rows
and lengths one longer, so probabilities x V never has a single row; the spare row lands
in slot past+S, which the next step overwrites, and its output is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from engine.errors import UnsupportedModel
from engine.gguf.config import TextConfig
from engine.gguf.repack import PackedWeight
from engine.graph.builder import GraphBuilder
from engine.graph.fuse import stack_rows
from engine.graph.linear import GgufWeight
from engine.graph.norms import head_rms_norm

Linear = Callable[..., str]  # (x, weight, name, bias=None) -> y, see engine.graph.linear


@dataclass(frozen=True)
class AttentionWeights:
    q: PackedWeight | GgufWeight      # [n_heads * D, H]
    k: PackedWeight | GgufWeight      # [kv_heads * D, H]
    v: PackedWeight | GgufWeight      # [kv_heads * D, H]
    output: PackedWeight | GgufWeight  # [H, n_heads * D]
    q_bias: np.ndarray | None = None  # [n_heads * D]   (Qwen2 family)
    k_bias: np.ndarray | None = None  # [kv_heads * D]
    v_bias: np.ndarray | None = None  # [kv_heads * D]
    q_norm: np.ndarray | None = None  # [D]             (Qwen3)
    k_norm: np.ndarray | None = None  # [D]
    sinks: np.ndarray | None = None   # [n_heads]       (gpt-oss: attention sinks)
    output_bias: np.ndarray | None = None  # [H]        (gpt-oss)


@dataclass(frozen=True)
class CacheStep:
    """Graph inputs every layer's attention shares."""

    seqlens_k: str   # int32 [1]: total_len - 1
    total_len: str   # int32 scalar
    cos: str         # [T, R/2] rows per cache slot
    sin: str         # [T, R/2]
    row_invariant: bool = False  # a spare row after the new tokens, counted in the lengths
    mask: str | None = None         # [S, T] additive mask: attention recomputed with it
    query_slots: str | None = None  # int64 [1, S]: cache slot of each new row (its cos/sin)


@dataclass(frozen=True)
class LayerCache:
    """Names of one layer's KV buffers: graph inputs and the outputs bound to the same memory."""

    past_key: str
    past_value: str
    present_key: str
    present_value: str


def rotary_width(cfg: TextConfig) -> int:
    """The columns of the cos/sin rows, R/2. When only part of a head turns, GQA takes a
    multiple of 8 columns, so that part must be a multiple of 16 dims (Phi-4-mini's 96 of 128
    is); a head that turns whole has no such limit."""
    if cfg.rope_dims < cfg.head_dim and cfg.rope_dims % 16:
        raise UnsupportedModel(f"rotary over {cfg.rope_dims} dims of each head: ONNX Runtime's "
                               "attention turns a multiple of 16 dims")
    return cfg.rope_dims // 2


def attention(g: GraphBuilder, x: str, w: AttentionWeights, cfg: TextConfig, step: CacheStep,
              cache: LayerCache, linear: Linear, name: str, dtype: type,
              rows: str | None = None, window: int | None = None) -> str:
    """x [1, S, H] -> [1, S, H] (or [1, N, H], the last N positions, where ``rows`` names
    an int64 [1] graph input holding N). ``window``: each query sees only that many keys,
    itself included (a sliding layer; ``step`` then holds that layer's rotary rows)."""
    q, k, v = project_qkv(g, x, w, linear, name)  # [1, S, heads * D] each; k, v may be ""
    if cfg.qk_norm:
        q = head_rms_norm(g, q, w.q_norm, cfg.n_heads, cfg.rms_eps, f"{name}.q_norm", dtype)
        k = head_rms_norm(g, k, w.k_norm, cfg.n_kv_heads, cfg.rms_eps, f"{name}.k_norm", dtype)
    if step.row_invariant:
        q, k, v = (with_spare_row(g, t, f"{name}/{part}") if t else t
                   for part, t in zip("qkv", (q, k, v), strict=True))
    inputs = [q, k, v, cache.past_key, cache.past_value, step.seqlens_k, step.total_len,
              step.cos, step.sin]
    if w.sinks is not None:  # after position_ids and attention_bias, both absent
        inputs += ["", "", g.add_initializer(f"{name}.sinks", w.sinks.astype(dtype))]
    out, _, _ = g.add_node(
        "GroupQueryAttention", inputs,
        [f"{name}/gqa", cache.present_key, cache.present_value],
        domain="com.microsoft", num_heads=cfg.n_heads, kv_num_heads=cfg.n_kv_heads,
        do_rotary=1, rotary_interleaved=int(cfg.rope_interleaved),
        **_scale_and_window(cfg, window),
    )  # [1, S, n_heads * D] (S + 1 with the spare row)
    if step.row_invariant:
        out = drop_last_row(g, out, f"{name}/real_rows")
    if step.mask is not None:
        out = masked_attention(g, q, cache, cfg, step, name, dtype)
    if rows is not None:
        out = last_rows(g, out, rows, f"{name}/last")  # [1, N, n_heads * D]
    return linear(out, w.output, f"{name}.output", bias=w.output_bias)


def masked_attention(g: GraphBuilder, q: str, cache: LayerCache, cfg: TextConfig,
                     step: CacheStep, name: str, dtype: type) -> str:
    """Attention of the new rows q [1, S, heads * D] over the keys GQA just wrote, with the
    host's additive mask [S, T] in place of GQA's causal one (Gemma 3: the rows of one image
    see each other) -> [1, S, heads * D]."""
    d, heads, group = cfg.head_dim, cfg.n_heads, cfg.n_heads // cfg.n_kv_heads
    [q] = g.add_node("RotaryEmbedding", [q, step.query_slots, step.cos, step.sin],
                     [f"{name}/q_rot"], domain="com.microsoft", num_heads=heads,
                     rotary_embedding_dim=cfg.rope_dims, interleaved=int(cfg.rope_interleaved))
    split = g.add_initializer(f"{name}.heads_shape", np.array([1, -1, heads, d], np.int64))
    [q] = g.add_node("Reshape", [q, split], [f"{name}/q_heads"])
    [q] = g.add_node("Transpose", [q], [f"{name}/q_bnsd"], perm=[0, 2, 1, 3])  # [1, h, S, D]
    [total] = g.add_node("Cast", [step.total_len], [f"{name}/total"], to=onnx.TensorProto.INT64)
    end = g.add_initializer(f"{name}.shape1", np.array([1], np.int64))
    [end] = g.add_node("Reshape", [total, end], [f"{name}/end"])
    start = g.add_initializer(f"{name}.start", np.array([0], np.int64))
    axis = g.add_initializer(f"{name}.axis", np.array([2], np.int64))
    expand = g.add_initializer(f"{name}.group", np.array([1, 1, group, 1, 1], np.int64))
    merged = g.add_initializer(f"{name}.kv_shape", np.array([1, heads, -1, d], np.int64))
    kv = []
    for part, buffer in (("k", cache.present_key), ("v", cache.present_value)):
        [t] = g.add_node("Slice", [buffer, start, end, axis], [f"{name}/{part}_used"])
        [t] = g.add_node("Unsqueeze", [t, g.add_initializer(f"{name}.{part}_axis",
                                                            np.array([2], np.int64))],
                         [f"{name}/{part}_5d"])
        [t] = g.add_node("Expand", [t, expand], [f"{name}/{part}_groups"])
        [t] = g.add_node("Reshape", [t, merged], [f"{name}/{part}_heads"])  # [1, h, T, D]
        kv.append(t)
    [kt] = g.add_node("Transpose", [kv[0]], [f"{name}/k_t"], perm=[0, 1, 3, 2])
    [scores] = g.add_node("MatMul", [q, kt], [f"{name}/scores"])  # [1, h, S, T]
    scale = cfg.attention_scale or 1.0 / float(np.sqrt(d))
    factor = g.add_initializer(f"{name}.scale", np.array(scale, dtype))
    [scores] = g.add_node("Mul", [scores, factor], [f"{name}/scaled"])
    [scores] = g.add_node("Add", [scores, step.mask], [f"{name}/masked"])
    [probs] = g.add_node("Softmax", [scores], [f"{name}/probs"], axis=-1)
    [out] = g.add_node("MatMul", [probs, kv[1]], [f"{name}/context"])  # [1, h, S, D]
    [out] = g.add_node("Transpose", [out], [f"{name}/bsnd"], perm=[0, 2, 1, 3])
    flat = g.add_initializer(f"{name}.out_shape", np.array([1, -1, heads * d], np.int64))
    [out] = g.add_node("Reshape", [out, flat], [f"{name}/masked_out"])
    return out


def softcap(g: GraphBuilder, x: str, cap: float, name: str, dtype: type) -> str:
    """cap * tanh(x / cap): x kept within (-cap, cap), nearly unchanged well inside it."""
    c = g.add_initializer(f"{name}.cap", np.array(cap, dtype))
    [y] = g.add_node("Div", [x, c], [f"{name}/div"])
    [y] = g.add_node("Tanh", [y], [f"{name}/tanh"])
    [y] = g.add_node("Mul", [y, c], [name])
    return y


def _scale_and_window(cfg: TextConfig, window: int | None) -> dict[str, float | int]:
    """GQA's optional attributes: a query scale other than 1/sqrt(D), the scores' soft cap,
    and the sliding window (GQA's local_window_size counts the query's own key too, as Gemma
    does)."""
    attributes: dict[str, float | int] = {}
    if cfg.attention_scale is not None:
        attributes["scale"] = cfg.attention_scale
    if cfg.attn_logit_softcap:
        attributes["softcap"] = cfg.attn_logit_softcap
    if window is not None:
        attributes["local_window_size"] = window
    return attributes


def project_qkv(g: GraphBuilder, x: str, w: AttentionWeights, linear: Linear,
                name: str) -> tuple[str, str, str]:
    """q, k, v projections; one fused matmul when the three weights share a layout.

    Without q/k norm the fused [1, S, (n_heads + 2 kv_heads) * D] goes to GQA as packed
    QKV (k and v returned as ""); with it, the result is split for the norms.
    """
    biases = (w.q_bias, w.k_bias, w.v_bias)
    fused = stack_rows([w.q, w.k, w.v])
    if fused is None:
        return tuple(linear(x, weight, f"{name}.{part}", bias=bias)
                     for part, weight, bias in zip("qkv", (w.q, w.k, w.v), biases, strict=True))
    bias = None if w.q_bias is None else np.concatenate(biases)
    qkv = linear(x, fused, f"{name}.qkv", bias=bias)
    if w.q_norm is None:
        return qkv, "", ""
    sizes = g.add_initializer(f"{name}.qkv_sizes", np.array([w.q.n, w.k.n, w.v.n], np.int64))
    q, k, v = g.add_node("Split", [qkv, sizes], [f"{name}/q", f"{name}/k", f"{name}/v"], axis=-1)
    return q, k, v


def last_rows(g: GraphBuilder, x: str, count: str, name: str) -> str:
    """x [1, S, C] -> [1, N, C], the last N tokens; ``count`` is an int64 [1] holding N."""
    [start] = g.add_node("Neg", [count], [f"{name}.start"])
    end = g.add_initializer(f"{name}.end", np.array([np.iinfo(np.int64).max], np.int64))
    axis = g.add_initializer(f"{name}.axis", np.array([1], np.int64))
    [y] = g.add_node("Slice", [x, start, end, axis], [name])
    return y


def with_spare_row(g: GraphBuilder, x: str, name: str, axis: int = 1) -> str:
    """x [1, S, C] -> [1, S + 1, C], the last row repeated (engine.graph.kernels, 3.); or
    along ``axis`` of any tensor."""
    pads = g.add_initializer(f"{name}/spare.pads", np.array([0, 1], np.int64))
    axes = g.add_initializer(f"{name}/spare.axes", np.array([axis], np.int64))
    [y] = g.add_node("Pad", [x, pads, "", axes], [f"{name}/spare"], mode="edge")
    return y


def drop_last_row(g: GraphBuilder, x: str, name: str) -> str:
    """x [1, S + 1, C] -> [1, S, C]."""
    start = g.add_initializer(f"{name}.start", np.array([0], np.int64))
    end = g.add_initializer(f"{name}.end", np.array([-1], np.int64))
    axis = g.add_initializer(f"{name}.axis", np.array([1], np.int64))
    [y] = g.add_node("Slice", [x, start, end, axis], [name])
    return y


def last_position(g: GraphBuilder, x: str, name: str, axis: int = 1) -> str:
    """x [1, S, C] -> [1, 1, C], the last token only (or the last entry along ``axis``)."""
    start = g.add_initializer(f"{name}.start", np.array([-1], np.int64))
    end = g.add_initializer(f"{name}.end", np.array([np.iinfo(np.int64).max], np.int64))
    axis = g.add_initializer(f"{name}.axis", np.array([axis], np.int64))
    [y] = g.add_node("Slice", [x, start, end, axis], [name])
    return y
