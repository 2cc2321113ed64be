"""The text decoder in plain numpy: the yardstick every ONNX graph is checked against.

Qwen2 / Qwen2.5 / Qwen2.5-VL text / Qwen3 / Llama share one pre-norm block,

    residual = x; x = rms_norm(x, attn_norm); x = attention(x); x = x + residual
    residual = x; x = rms_norm(x, ffn_norm);  x = mlp(x);       x = x + residual

and differ only in config flags: q/k/v bias (Qwen2), per-head q/k RMSNorm before the
rotary (Qwen3), interleaved rotary pairs (llama GGUF), M-RoPE sections (Qwen2-VL).
Gemma 2 and 3 scale the embeddings by sqrt(H), norm each sublayer's output before the add,

    x = x + rms_norm(attention(rms_norm(x, attn_norm)), post_attention_norm)
    x = x + rms_norm(mlp(rms_norm(x, ffn_norm)), post_ffw_norm)

use GELU (tanh) in the gated MLP and their own query scale. Gemma 2 soft-caps the attention
scores (cap * tanh(scores / cap)) and lets every other layer see only the last
sliding_window keys; Gemma 3 lets five of every six layers see them, rotated with their
own base. Phi-3's fused matrices are split when read (ReferenceWeights); its window holds
on every layer. Qwen3-MoE's mlp(x) is a mixture of experts (``experts_mlp``): softmax over a
router's logits, each token takes its top k experts' gated MLPs weighted by their
probabilities (renormalised to sum to one where the config says). gpt-oss's router takes the
top k logits (with a bias) and a softmax over those k; its experts carry biases and a
clamped SwiGLU, (clip(up) + 1) * g * sigmoid(alpha g) with g the gate clamped above (``glu``);
it adds sinks to
the attention's softmax and an output bias, and slides every other layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from engine.modelmath.rope import apply_rope, long_rope, rope_amplitude, text_rope_angles
from engine.reference.weights import LayerWeights, ReferenceWeights

if TYPE_CHECKING:
    from engine.gguf import GGUFModel
    from engine.gguf.config import TextConfig


@dataclass(frozen=True)
class ReferenceOutput:
    hidden_states: list[np.ndarray]  # n_layers + 1 of [S, H]: embeddings, then each block's
    #                                  output (the last one before output_norm)
    logits: np.ndarray               # [S, V]
    attentions: list[np.ndarray] | None = None  # per layer [n_heads, R, T]: softmax
    #                                  probabilities of the rows asked for (attention_rows)


class KVCache:
    """Rotated keys and values of the tokens seen so far, so decoding one token at a time
    gives the same numbers as re-running the whole sequence."""

    def __init__(self) -> None:
        self.keys: list[np.ndarray] = []    # per layer [n_kv_heads, T, D]
        self.values: list[np.ndarray] = []  # per layer [n_kv_heads, T, D]

    @property
    def length(self) -> int:
        return self.keys[0].shape[1] if self.keys else 0

    def update(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Append k, v [n_kv_heads, S, D] to ``layer``; return all keys and values so far."""
        if layer == len(self.keys):
            self.keys.append(k)
            self.values.append(v)
        else:
            self.keys[layer] = np.concatenate([self.keys[layer], k], axis=1)
            self.values[layer] = np.concatenate([self.values[layer], v], axis=1)
        return self.keys[layer], self.values[layer]


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + float(eps)) * weight


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """x [..., in] @ weight [out, in]^T (+ bias [out]) -> [..., out]."""
    y = x @ weight.T
    return y if bias is None else y + bias


def silu(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(-x) overflows to inf for x << 0; x / inf = 0
        return x / (1 + np.exp(-x))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU with the tanh approximation (Gemma's gelu_pytorch_tanh)."""
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


ACTIVATIONS = {"silu": silu, "gelu_tanh": gelu_tanh}


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@dataclass
class AttentionProbe:
    """Asks attention() to keep the probabilities of some query rows (inspection); with
    ``parts`` also each head's output through o_proj and the MLP's output of those rows
    (direct contributions), and with ``hidden_keys`` no other query reads those keys
    (occlusion: the tokens stay in place, their positions unchanged)."""

    rows: np.ndarray                                        # int [R], rows of this call
    probs: list[np.ndarray] = field(default_factory=list)   # per layer [n_heads, R, T]
    parts: bool = False
    heads: list[np.ndarray] = field(default_factory=list)   # per layer [n_heads, R, H]
    mlps: list[np.ndarray] = field(default_factory=list)    # per layer [R, H]
    # mixture of experts, per layer: the experts rows R chose, best first, and their weights
    expert_ids: list[np.ndarray] = field(default_factory=list)      # per layer int [R, K]
    expert_weights: list[np.ndarray] = field(default_factory=list)  # per layer [R, K]
    hidden_keys: np.ndarray | None = None                   # int [K], absolute key indices


def attention(
    x: np.ndarray, w: LayerWeights, cfg: TextConfig, angles: np.ndarray,
    cache: KVCache | None = None, layer: int = 0, probe: AttentionProbe | None = None,
    groups: np.ndarray | None = None,
) -> np.ndarray:
    """Causal grouped-query self-attention of x [S, H] -> [S, H]; angles [S, R/2] (this
    layer's: sliding layers turn with their own base). ``groups`` [S]: rows of one image
    (same id >= 0) also see each other's later keys (Gemma 3)."""
    s, d = len(x), cfg.head_dim
    q = linear(x, w.attn_q, w.attn_q_bias).reshape(s, cfg.n_heads, d).transpose(1, 0, 2)
    k = linear(x, w.attn_k, w.attn_k_bias).reshape(s, cfg.n_kv_heads, d).transpose(1, 0, 2)
    v = linear(x, w.attn_v, w.attn_v_bias).reshape(s, cfg.n_kv_heads, d).transpose(1, 0, 2)
    # q: [n_heads, S, D]; k, v: [n_kv_heads, S, D]
    if cfg.qk_norm:
        q = rms_norm(q, w.attn_q_norm, cfg.rms_eps)
        k = rms_norm(k, w.attn_k_norm, cfg.rms_eps)
    amplitude = rope_amplitude(cfg, local=cfg.local_rope and cfg.slides(layer))
    q = apply_rope(q, angles, cfg.rope_interleaved, amplitude)
    k = apply_rope(k, angles, cfg.rope_interleaved, amplitude)
    if cache is not None:
        k, v = cache.update(layer, k, v)  # [n_kv_heads, T, D], T = past + S
    group = cfg.n_heads // cfg.n_kv_heads
    k = np.repeat(k, group, axis=0)  # [n_heads, T, D]: query head h reads kv head h // group
    v = np.repeat(v, group, axis=0)
    t = k.shape[1]
    scale = cfg.attention_scale or 1 / math.sqrt(d)
    scores = q @ k.transpose(0, 2, 1) * scale  # [n_heads, S, T]
    if cfg.attn_logit_softcap:  # Gemma 2
        scores = cfg.attn_logit_softcap * np.tanh(scores / cfg.attn_logit_softcap)
    distance = np.arange(t - s, t)[:, None] - np.arange(t)[None, :]  # [S, T]: query - key
    masked = distance < 0  # the key comes after the query
    if cfg.slides(layer):
        masked |= distance >= cfg.sliding_window
    if groups is not None:  # keys from earlier calls belong to no image of this one
        keys = np.concatenate([np.full(t - s, -1), groups])
        masked &= ~((groups[:, None] >= 0) & (groups[:, None] == keys[None, :]))
    if probe is not None and probe.hidden_keys is not None:
        hidden = np.isin(np.arange(t), probe.hidden_keys)[None, :]  # [1, T]
        masked |= hidden & ~np.eye(s, t, t - s, dtype=bool)
    scores = np.where(masked, -np.inf, scores)
    probs = softmax_with_sinks(scores, w.attn_sinks)  # [n_heads, S, T]
    if probe is not None:
        probe.probs.append(probs[:, probe.rows, :])
    out = probs @ v  # [n_heads, S, D]
    if probe is not None and probe.parts:  # head h through its columns of o_proj
        o_proj = w.attn_output.reshape(-1, cfg.n_heads, d)  # [H, n_heads, D]
        probe.heads.append(np.einsum("nrd,hnd->nrh", out[:, probe.rows], o_proj))
    out = out.transpose(1, 0, 2).reshape(s, cfg.n_heads * d)  # [S, n_heads * D]
    return linear(out, w.attn_output, w.attn_output_bias)


def softmax_with_sinks(scores: np.ndarray, sinks: np.ndarray | None) -> np.ndarray:
    """Softmax of scores [n_heads, S, T] over the keys, where each head's sink logit (gpt-oss)
    joins the denominator as one more key whose value is zero: the probabilities of the real
    keys then sum to less than one."""
    if sinks is None:
        return softmax(scores)
    sink = np.broadcast_to(sinks.astype(scores.dtype)[:, None, None], (*scores.shape[:2], 1))
    return softmax(np.concatenate([scores, sink], axis=-1))[..., :-1]


def mlp(x: np.ndarray, w: LayerWeights, activation: str = "silu") -> np.ndarray:
    """Gated MLP: down(act(gate(x)) * up(x)), x [S, H] -> [S, H]; act is SiLU (SwiGLU) or
    GELU-tanh (Gemma)."""
    act = ACTIVATIONS[activation]
    return linear(act(linear(x, w.ffn_gate)) * linear(x, w.ffn_up), w.ffn_down)


def route(x: np.ndarray, router: np.ndarray, cfg: TextConfig,
          bias: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's experts, best first, and their weights: x [S, H] -> ids [S, K], w [S, K].
    "softmax" gating ranks the softmax over all experts; "top_k_softmax" ranks the logits and
    takes the softmax of the k chosen."""
    logits = linear(x, router, bias)  # [S, E]
    scores = softmax(logits) if cfg.expert_gating == "softmax" else logits
    ids = np.argsort(-scores, axis=-1, kind="stable")[:, :cfg.experts_used]
    weights = np.take_along_axis(scores, ids, axis=-1)
    if cfg.expert_gating == "top_k_softmax":
        weights = softmax(weights)
    if cfg.expert_weights_norm:
        weights = weights / weights.sum(axis=-1, keepdims=True)
    return ids, weights


def experts_mlp(x: np.ndarray, w: LayerWeights, cfg: TextConfig,
                probe: AttentionProbe | None = None) -> np.ndarray:
    """Mixture of experts, x [S, H] -> [S, H]: each row through the gated MLPs of the
    experts ``route`` picks, weighted; ``probe`` keeps its rows' choices."""
    ids, weights = route(x, w.ffn_gate_inp, cfg, w.ffn_gate_inp_bias)
    if probe is not None:
        probe.expert_ids.append(ids[probe.rows])
        probe.expert_weights.append(weights[probe.rows])
    experts, out = w.experts, np.zeros_like(x)

    def bias(b: np.ndarray | None, e: int) -> np.ndarray | None:
        return None if b is None else b[e]

    for e in np.unique(ids):
        rows, slots = np.nonzero(ids == e)
        h = x[rows]
        gate_w, up_w = experts.gate_up(e)
        gate = linear(h, gate_w, bias(experts.gate_bias, e))
        up = linear(h, up_w, bias(experts.up_bias, e))
        h = glu(gate, up, cfg)
        down = linear(h, experts.matrix(experts.down, e), bias(experts.down_bias, e))
        out[rows] += weights[rows, slots, None] * down
    return out


def glu(gate: np.ndarray, up: np.ndarray, cfg: TextConfig) -> np.ndarray:
    """An expert's gated activation: act(gate) * up, or gpt-oss's clamped SwiGLU."""
    clamped = cfg.expert_glu
    if clamped is None:
        return ACTIVATIONS[cfg.activation](gate) * up
    gate = np.minimum(gate, clamped.limit)
    up = np.clip(up, -clamped.limit, clamped.limit)
    with np.errstate(over="ignore"):  # exp overflows to inf for gate << 0: the product is 0
        return (up + 1) * gate / (1 + np.exp(-clamped.alpha * gate))


def post_norm_gain(x: np.ndarray, weight: np.ndarray, cfg: TextConfig) -> np.ndarray:
    """rms_norm(x) = x * gain for rows x [R, H]: the norm frozen at each row's own scale, so
    that the parts x is a sum of (Gemma's heads) pass through it as a sum -> [R, H]."""
    return weight / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + float(cfg.rms_eps))


def decoder_layer(
    x: np.ndarray, w: LayerWeights, cfg: TextConfig, angles: np.ndarray,
    cache: KVCache | None = None, layer: int = 0, probe: AttentionProbe | None = None,
    groups: np.ndarray | None = None,
) -> np.ndarray:
    residual = x
    x = rms_norm(x, w.attn_norm, cfg.rms_eps)
    x = attention(x, w, cfg, angles, cache, layer, probe, groups)
    if cfg.post_norms:
        if probe is not None and probe.parts:  # the heads as the norm passes them on
            probe.heads[-1] = probe.heads[-1] * post_norm_gain(x[probe.rows],
                                                               w.post_attention_norm, cfg)
        x = rms_norm(x, w.post_attention_norm, cfg.rms_eps)
    x = x + residual
    residual = x
    x = rms_norm(x, w.ffn_norm, cfg.rms_eps)
    x = experts_mlp(x, w, cfg, probe) if cfg.mixture_of_experts else mlp(x, w, cfg.activation)
    if cfg.post_norms:
        x = rms_norm(x, w.post_ffw_norm, cfg.rms_eps)
    if probe is not None and probe.parts:  # what the MLP adds to the residual stream
        probe.mlps.append(x[probe.rows])
    return x + residual


def forward(
    model: GGUFModel,
    input_ids: ArrayLike | None = None,
    positions: ArrayLike | None = None,
    inputs_embeds: ArrayLike | None = None,
    dtype: DTypeLike = np.float32,
    *,
    weights: ReferenceWeights | None = None,
    cache: KVCache | None = None,
    attention_rows: ArrayLike | None = None,
    probe: AttentionProbe | None = None,
    on_layer: Callable[[int], None] | None = None,
    image_groups: ArrayLike | None = None,
    rope_length: int | None = None,
    deepstack: ArrayLike | None = None,
    steering: np.ndarray | None = None,
) -> ReferenceOutput:
    """Run the decoder over one sequence of S tokens.

    input_ids [S] or inputs_embeds [S, H] (exactly one). positions: [S], or [3, S] for
    M-RoPE; default: continue after ``cache`` (arange(past, past + S)). ``weights`` reuses
    de-quantized weights across calls (its dtype wins over ``dtype``); ``cache`` keeps keys
    and values so the next call can pass only the new tokens. ``attention_rows`` [R]: keep
    those rows' attention probabilities (``attentions``); ``probe`` instead: the same, with
    its other options (per-head and MLP outputs, hidden keys); ``on_layer(i)`` is called after
    each block (progress; it may raise to cancel). ``image_groups`` [S]
    (PromptTokens.image_groups): rows of one image attend to each other both ways.
    ``rope_length``: the length of the whole sequence a cached run belongs to, which picks
    LongRoPE's factor set (default: this call's last position + 1).
    ``deepstack`` [K, S, H]: Qwen3-VL's image features, added to the output of block k < K
    (zero at text rows).
    ``steering`` [n_layers, H]: row i is added to block i's output (control vectors,
    engine.gguf.control_vector).
    """
    if weights is None:
        weights = ReferenceWeights(model, dtype)
    cfg = weights.config
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("pass exactly one of input_ids and inputs_embeds")
    if inputs_embeds is None:
        x = weights.embed(np.asarray(input_ids, dtype=np.int64).reshape(-1))  # [S, H]
    else:
        x = np.asarray(inputs_embeds, dtype=weights.dtype)  # [S, H]
    if cfg.embedding_scale != 1.0:
        x = x * x.dtype.type(cfg.embedding_scale)  # Gemma: embeddings times sqrt(H)
    past = cache.length if cache is not None else 0
    positions = np.arange(past, past + len(x)) if positions is None else np.asarray(positions)
    if positions.shape[-1] != len(x):
        raise ValueError(f"positions {positions.shape} do not match {len(x)} tokens")
    tables = rope_tables(positions, cfg, rope_length)
    groups = None if image_groups is None else np.asarray(image_groups, np.int64)[-len(x):]

    if probe is None and attention_rows is not None:
        probe = AttentionProbe(np.asarray(attention_rows, dtype=np.int64).reshape(-1))
    hidden_states = [x, *blocks(x, weights, tables, cache=cache, probe=probe, groups=groups,
                                deepstack=deepstack, steering=steering, on_layer=on_layer)]
    logits = output_logits(hidden_states[-1], weights)  # [S, V]
    return ReferenceOutput(hidden_states=hidden_states, logits=logits,
                           attentions=None if probe is None else probe.probs)


def blocks(
    x: np.ndarray, weights: ReferenceWeights, tables: tuple[np.ndarray, np.ndarray], *,
    first: int = 0, cache: KVCache | None = None, probe: AttentionProbe | None = None,
    groups: np.ndarray | None = None, deepstack: ArrayLike | None = None,
    steering: np.ndarray | None = None, on_layer: Callable[[int], None] | None = None,
) -> list[np.ndarray]:
    """Blocks ``first``.. over x [S, H], the hidden state entering block ``first`` -> each
    block's output; ``tables``: rope_tables' angles of the S rows, the rest as forward's.
    Causal tracing resumes a run here from a state it restored."""
    cfg, out = weights.config, []
    angles, local_angles = tables
    for i in range(first, cfg.n_layers):
        layer_angles = local_angles if cfg.slides(i) else angles
        x = decoder_layer(x, weights.layer(i), cfg, layer_angles, cache, i, probe, groups)
        if deepstack is not None and i < len(deepstack):
            x = x + np.asarray(deepstack[i], dtype=x.dtype)
        if steering is not None:  # joins the MLP's output, as in the graph (and its part)
            x = x + steering[i].astype(x.dtype)
            if probe is not None and probe.parts:
                probe.mlps[-1] = probe.mlps[-1] + steering[i].astype(x.dtype)
        out.append(x)
        if on_layer is not None:
            on_layer(i)
    return out


def rope_tables(positions: np.ndarray, cfg: TextConfig,
                length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Angles [S, R/2] of the global layers and of the sliding ones (the same array unless
    the sliding layers have a rotary base of their own, as Gemma 3's do); ``length`` as in
    text_rope_angles."""
    angles = text_rope_angles(positions, cfg, length=length)
    return angles, text_rope_angles(positions, cfg, local=True) if cfg.local_rope else angles


def output_logits(x: np.ndarray, weights: ReferenceWeights) -> np.ndarray:
    """lm_head(final_norm(x)) for hidden states x [..., H] -> [..., V], soft-capped where
    the model caps its logits (cap * tanh(logits / cap))."""
    cfg = weights.config
    logits = linear(rms_norm(x, weights.output_norm(), cfg.rms_eps), weights.lm_head())
    if cfg.final_logit_softcap:
        logits = cfg.final_logit_softcap * np.tanh(logits / cfg.final_logit_softcap)
    return logits


def greedy(
    model: GGUFModel, input_ids: ArrayLike, n_tokens: int,
    weights: ReferenceWeights | None = None, stop_ids: Collection[int] = (),
    steering: np.ndarray | None = None,
) -> list[int]:
    """The argmax continuation of a text prompt with a KV cache: n_tokens, or fewer when a
    token of ``stop_ids`` is produced (it is included); ``steering`` as forward's. The step
    that takes the sequence past LongRoPE's original context runs it all again, as the
    runtime does."""
    if weights is None:
        weights = ReferenceWeights(model, keep=True)
    cache = KVCache()
    ids = [int(i) for i in np.asarray(input_ids).reshape(-1)]
    logits = forward(model, ids, weights=weights, cache=cache, steering=steering).logits
    tokens: list[int] = []
    while True:
        tokens.append(int(logits[-1].argmax()))
        if len(tokens) == n_tokens or tokens[-1] in stop_ids:
            return tokens
        if long_rope(weights.config, cache.length + 1) != long_rope(weights.config,
                                                                   cache.length):
            cache = KVCache()
            logits = forward(model, ids + tokens, weights=weights, cache=cache,
                             steering=steering).logits
        else:
            logits = forward(model, tokens[-1:], weights=weights, cache=cache,
                             steering=steering).logits
