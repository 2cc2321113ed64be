"""The text decoder (Qwen2 / Qwen2.5(-VL) text / Qwen3 / Llama / Phi-3 / Gemma 2 / Gemma 3)
as an in-memory ONNX graph.

    h = rms_norm(embeds);  residual = embeds
    for each block:
        residual, h = residual + attention(h),  rms_norm(...)   # one SkipSimplifiedLayerNorm
        residual, h = residual + mlp(h),        rms_norm(...)   # the next block's attn_norm
    logits = lm_head(h)                                         # h normed by output_norm

Qwen3-VL with its tower: blocks k < K add input deepstack[k] (the image rows' features
from the tower, zero elsewhere) with their MLP output.

Gemma 2 and 3 (config flags): embeds times sqrt(H) first; attention(h) and mlp(h) pass
their own RMSNorm (post_attention_norm, post_ffw_norm) before the add; the MLP gates with
GELU-tanh; sliding layers attend within a window (Gemma 3's read cos_local/sin_local); the
logits may be soft-capped, and Gemma 2's attention scores are; with images, masks from the
host let the rows of one image attend to each other (``two_way_images``,
engine.graph.attention.masked_attention). Phi-3's fused q|k|v and gate|up matrices are
split into the rows the graph fuses again (DecoderWeights); its window holds on every layer.

Inputs: inputs_embeds [1, S, H] (the host gathers token embeddings, so image embeddings
can take their rows), cos/sin [T, R/2] (rotary rows per cache slot, see attention.py),
seqlens_k, total_sequence_length, num_logits, rows_apart where the kernel choices run a
verify step's matmuls row by row, steering [n_layers, H] (what each block's output
gets added: control vectors times their strengths, zeros when none steers, so a
strength changes no graph; row i joins block i's MLP output before the residual add,
so each row stays its own and row invariance holds) and each block's KV buffers. Outputs: logits
[1, N, V] of the last N = num_logits positions (a verify step of N drafted tokens asks for
N; a prompt for 1) or [1, S, V] with all_logits, final_hidden: the same rows' hidden
state after output_norm, the one lm_head reads (what an embedding pools), the updated KV
buffers, and with layer_stats the debug output hidden_states [n_layers + 1, H]: the last token's
residual stream after the embeddings and after each block (the runtime derives
mean/std/min/max from it and the reference check compares it row by row).

With ``native`` (Lantern's custom-op library, engine.native) every matrix of a type the
op reads stays the GGUF's bytes in the memory map (engine.graph.linear.GgufWeight), which
the session reads in place; otherwise weights are packed from the memory map
(engine.gguf.repack) into numpy arrays the session reads as external initializers. No
weights file is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import onnx

from engine.errors import UnsupportedModel
from engine.gguf import GGUFModel
from engine.gguf.config import TextConfig
from engine.gguf.repack import PackedWeight, pack
from engine.gguf.requantize import Requantization, requantize
from engine.graph.attention import (
    AttentionWeights,
    CacheStep,
    LayerCache,
    attention,
    last_position,
    last_rows,
    rotary_width,
    softcap,
    with_spare_row,
)
from engine.graph.builder import GraphBuilder, ValueSpec
from engine.graph.fuse import split_rows, stack_rows
from engine.graph.kernels import Kernels, fold_zero_points
from engine.graph.linear import GgufWeight, RowsApart, linear
from engine.graph.moe import ExpertBiases, ExpertWeights, MoEWeights, Routing, moe
from engine.graph.norms import add_rms_norm, rms_norm
from engine.native import custom_ops

INPUTS_EMBEDS = "inputs_embeds"
SEQLENS_K = "seqlens_k"
TOTAL_LEN = "total_sequence_length"
NUM_LOGITS = "num_logits"
COS, SIN = "cos", "sin"
COS_LOCAL, SIN_LOCAL = "cos_local", "sin_local"  # the sliding layers' rotary rows (Gemma 3)
STEERING = "steering"
ROWS_APART = "rows_apart"  # bool [1]: a verify step (engine.graph.kernels, 3.)
# two-way image attention (Gemma 3 with images): additive masks [S, T] and each row's slot
MASK, MASK_LOCAL, QUERY_SLOTS = "attention_mask", "attention_mask_local", "query_slots"
DEEPSTACK = "deepstack"  # [K, S, H]: added after block k < K (Qwen3-VL's image features)
LOGITS = "logits"
FINAL_HIDDEN = "final_hidden"  # [1, N or S, H]: lm_head's input, after output_norm
HIDDEN_STATES = "hidden_states"

FAST_ACCURACY = 4   # MatMulNBits with int8 activations: the fast CPU path
EXACT_ACCURACY = 0  # float activations


@dataclass(frozen=True)
class DecoderOptions:
    exact: bool = False          # fp32 activations and float-exact weights (checks, debugging)
    float16: bool = False        # fp16 activations and cache (the CUDA variant)
    max_cache_len: int = 4096
    layer_stats: bool = False
    all_logits: bool = False
    requantize: Requantization | None = None  # opt-in 4-bit weights, NOT the GGUF's exact ones
    row_invariant: bool = True   # fast CPU mode: row i's logits do not depend on S (below)
    kernels: Kernels = Kernels()  # fast mode's kernel choices (engine.graph.kernels)
    two_way_images: bool = False  # the host's masks let one image's rows see each other
    native: bool = False         # GgufMatMul over the file's bytes (CPU, library loaded)

    @property
    def dtype(self) -> type:
        return np.float16 if self.float16 else np.float32

    @property
    def row_invariant_graph(self) -> bool:
        """Is every row of an S-token step built to come out as in a one-token step?

        Speculative decoding's contract: a verify step of k drafted tokens must give each
        of them the logits a plain step would, or a near tie can change the answer. Fast
        mode gets it from its kernel choices (engine.graph.kernels, 3.): int8 activations
        into every matmul and a spare row in every attention. Exact mode is float
        throughout and agrees to ~1e-5 without them; float16 is the CUDA graph.
        """
        return (self.row_invariant and not self.exact and not self.float16
                and not self.two_way_images)


@dataclass(frozen=True)
class DecoderGraph:
    model: onnx.ModelProto
    external: dict[str, np.ndarray]   # initializer name -> array, fed from memory
    in_place: dict[str, np.ndarray]   # initializer name -> the GGUF's bytes (feed_in_place)
    caches: tuple[LayerCache, ...]    # one per block
    cache_shape: tuple[int, int, int, int]  # [1, kv_heads, max_cache_len, D]
    options: DecoderOptions


@dataclass(frozen=True)
class MLPWeights:
    gate: PackedWeight | GgufWeight  # [I, H]
    up: PackedWeight | GgufWeight    # [I, H]
    down: PackedWeight | GgufWeight  # [H, I]


class DecoderWeights:
    """Packs the GGUF's text tensors on demand; the only place this graph spells GGUF names."""

    def __init__(self, model: GGUFModel, requantization: Requantization | None = None,
                 fold_zero_points: bool = False, native: bool = False):
        self.model = model
        self.requantization = requantization
        self.fold_zero_points = fold_zero_points  # engine.graph.kernels, 2.
        self.native = native and requantization is None

    def matrix(self, name: str) -> PackedWeight | GgufWeight:
        """A linear weight: with ``native``, the GGUF's bytes where the op reads the type;
        else MatMulNBits inputs (or dense). Exact mode needs no other form: with accuracy
        level 0 ONNX Runtime multiplies float activations by the exact weights (measured on
        the 0.5B demo model: faster than widening 8-bit weights to fp32 MatMul). With a
        requantization every matrix is rounded again to 4-bit instead."""
        tensor = self.model.tensors[name]
        if self.requantization is not None:
            return requantize(tensor, self.requantization)
        n, k = tensor.shape[0], math.prod(tensor.shape[1:])
        if self.native and custom_ops().reads(tensor.ggml_type, k):
            return GgufWeight(int(tensor.ggml_type), n, k, tensor.raw.reshape(n, -1))
        return fold_zero_points(pack(tensor)) if self.fold_zero_points else pack(tensor)

    def vector(self, name: str) -> np.ndarray:
        return self.model.tensors[name].dequantize()

    def optional_vector(self, name: str) -> np.ndarray | None:
        return self.vector(name) if name in self.model.tensors else None

    def attention(self, i: int) -> AttentionWeights:
        b = f"blk.{i}."
        cfg = self.model.config.text
        if cfg.fused_projections:  # Phi-3 stores q|k|v as one matrix
            q, k, v = split_rows(self.matrix(b + "attn_qkv.weight"),
                                 [cfg.n_heads * cfg.head_dim] + [cfg.n_kv_heads * cfg.head_dim] * 2)
        else:
            q, k, v = (self.matrix(f"{b}attn_{part}.weight") for part in "qkv")
        return AttentionWeights(
            q=q, k=k, v=v, output=self.matrix(b + "attn_output.weight"),
            q_bias=self.optional_vector(b + "attn_q.bias"),
            k_bias=self.optional_vector(b + "attn_k.bias"),
            v_bias=self.optional_vector(b + "attn_v.bias"),
            q_norm=self.optional_vector(b + "attn_q_norm.weight"),
            k_norm=self.optional_vector(b + "attn_k_norm.weight"),
            sinks=self.optional_vector(b + "attn_sinks.weight"),
            output_bias=self.optional_vector(b + "attn_output.bias"),
        )

    def mlp(self, i: int) -> MLPWeights:
        b = f"blk.{i}."
        if self.model.config.text.fused_projections:  # Phi-3: ffn_up holds gate|up
            width = self.model.config.text.intermediate_size
            gate, up = split_rows(self.matrix(b + "ffn_up.weight"), [width, width])
        else:
            gate, up = self.matrix(b + "ffn_gate.weight"), self.matrix(b + "ffn_up.weight")
        return MLPWeights(gate=gate, up=up, down=self.matrix(b + "ffn_down.weight"))

    def experts(self, i: int) -> MoEWeights:
        """Block i's router and expert tensors; the experts stay the file's bytes, which
        only Lantern's op reads (a copy per expert would cost the file's size again)."""
        b = f"blk.{i}."
        cfg = self.model.config.text
        biases = None
        if cfg.expert_biases:  # gpt-oss
            router, down = (self.vector(f"{b}ffn_{part}.bias") for part in ("gate_inp",
                                                                           "down_exps"))
            if cfg.fused_gate_up_experts:  # the rows of gate and up take turns
                both = self.vector(b + "ffn_gate_up_exps.bias")
                gate, up = both[:, 0::2], both[:, 1::2]
            else:
                gate, up = (self.vector(f"{b}ffn_{part}_exps.bias") for part in ("gate", "up"))
            biases = ExpertBiases(router, gate, up, down)
        router = self.matrix(b + "ffn_gate_inp.weight")
        if cfg.fused_gate_up_experts:
            gate_up = self.expert_tensor(b + "ffn_gate_up_exps.weight")
            return MoEWeights(router, None, None, self.expert_tensor(b + "ffn_down_exps.weight"),
                              biases, gate_up=gate_up)
        gate, up, down = (self.expert_tensor(f"{b}ffn_{part}_exps.weight")
                          for part in ("gate", "up", "down"))
        return MoEWeights(router, gate, up, down, biases)

    def expert_tensor(self, name: str) -> ExpertWeights:
        tensor = self.model.tensors[name]
        count, n, k = tensor.shape
        ops = custom_ops()
        if not self.native or not ops.reads(tensor.ggml_type, k):
            why = (f"GGML type {tensor.ggml_type.name} is not one it reads" if self.native
                   else "it is not in use: " + (ops.why or "requantized weights or a GPU"))
            raise UnsupportedModel(f"mixture-of-experts tensor {name} runs only on Lantern's "
                                   f"GGUF matmul library on the CPU, and {why}")
        raw = tensor.raw.reshape(count * n, -1)
        return ExpertWeights(GgufWeight(int(tensor.ggml_type), n, k, raw), count)

    def attn_norm(self, i: int) -> np.ndarray:
        return self.vector(f"blk.{i}.attn_norm.weight")

    def ffn_norm(self, i: int) -> np.ndarray:
        return self.vector(f"blk.{i}.{self.model.config.text.ffn_norm_tensor}.weight")

    def post_attention_norm(self, i: int) -> np.ndarray:
        return self.vector(f"blk.{i}.post_attention_norm.weight")

    def post_ffw_norm(self, i: int) -> np.ndarray:
        return self.vector(f"blk.{i}.post_ffw_norm.weight")

    def output_norm(self) -> np.ndarray:
        return self.vector("output_norm.weight")

    def lm_head(self, cfg: TextConfig) -> PackedWeight | GgufWeight:
        return self.matrix("token_embd.weight" if cfg.tie_embeddings else "output.weight")


def build_decoder(model: GGUFModel, options: DecoderOptions = DecoderOptions()) -> DecoderGraph:
    cfg = model.config.text
    dtype = options.dtype
    g = GraphBuilder("decoder")
    w = DecoderWeights(model, options.requantize,
                       fold_zero_points=options.kernels.fold_zero_points and not options.exact,
                       native=options.native)
    accuracy = EXACT_ACCURACY if options.exact else FAST_ACCURACY
    # GgufMatMul computes every row alike whatever their number: no matmul runs row by row
    apart = options.kernels.rows_apart_bits if options.row_invariant_graph else ()
    if w.native:
        apart = ()
    project = partial(linear, g, accuracy_level=accuracy, float_dtype=dtype,
                      rows_apart=RowsApart(ROWS_APART, apart) if apart else None)
    step = cache_step(g, options.row_invariant_graph)
    if options.two_way_images:
        step = replace(step, mask=MASK, query_slots=QUERY_SLOTS)
    local_step = local_cache_step(g, step) if cfg.local_rope else step
    if options.two_way_images:
        local_step = replace(local_step, mask=MASK_LOCAL)
    caches = layer_caches(cfg)
    eps = cfg.rms_eps
    deepstack = deepstack_count(model)

    x = INPUTS_EMBEDS  # [1, S, H]
    if cfg.embedding_scale != 1.0:
        x = gemma_scaled_embeddings(g, x, cfg.embedding_scale, dtype)
    residual, hidden_states = x, [x]
    h = rms_norm(g, x, w.attn_norm(0), eps, "blk.0.attn_norm", dtype)
    for i in range(cfg.n_layers):
        last_only = i == cfg.n_layers - 1 and not options.all_logits
        rows = NUM_LOGITS if last_only else None
        slides = cfg.slides(i)
        a = attention(g, h, w.attention(i), cfg, local_step if slides else step, caches[i],
                      project, f"blk.{i}.attn", dtype, rows=rows,
                      window=cfg.sliding_window if slides else None)
        if cfg.post_norms:
            a = rms_norm(g, a, w.post_attention_norm(i), eps, f"blk.{i}.post_attention_norm",
                         dtype)
        if last_only:  # the last block's tail only matters at the rows that get logits
            residual = last_rows(g, residual, NUM_LOGITS, f"blk.{i}.last_residual")
        h, residual = add_rms_norm(g, a, residual, w.ffn_norm(i), eps, f"blk.{i}.ffn_norm", dtype)
        m = feed_forward(g, h, w, i, cfg, project, fast=not options.exact)
        if cfg.post_norms:
            m = rms_norm(g, m, w.post_ffw_norm(i), eps, f"blk.{i}.post_ffw_norm", dtype)
        if i < deepstack:
            m = deepstack_features(g, m, i)
        m = steered(g, m, i)
        if i + 1 < cfg.n_layers:
            next_norm, next_name = w.attn_norm(i + 1), f"blk.{i + 1}.attn_norm"
        else:
            next_norm, next_name = w.output_norm(), "output_norm"
        h, residual = add_rms_norm(g, m, residual, next_norm, eps, next_name, dtype)
        hidden_states.append(residual)
    final = h if dtype == np.float32 else g.add_node(
        "Cast", [h], [FINAL_HIDDEN + "/float32"], to=onnx.TensorProto.FLOAT)[0]
    g.add_node("Identity", [final], [FINAL_HIDDEN])  # [1, S or N, H]
    logits = project(h, w.lm_head(cfg), "lm_head")  # [1, S or N, V]
    if cfg.final_logit_softcap:
        logits = softcap(g, logits, cfg.final_logit_softcap, "lm_head/softcap", dtype)
    if options.float16:
        [logits] = g.add_node("Cast", [logits], [LOGITS + "/float32"], to=onnx.TensorProto.FLOAT)
    [logits] = g.add_node("Identity", [logits], [LOGITS])

    cache_shape = (1, cfg.n_kv_heads, options.max_cache_len, cfg.head_dim)
    buffer = [1, cfg.n_kv_heads, "max_cache_len", cfg.head_dim]  # any length: one graph per model
    inputs = step_inputs(cfg, options, bool(apart), deepstack)
    out_rows = "S" if options.all_logits else "N"
    outputs = [(LOGITS, np.float32, [1, out_rows, cfg.vocab_size]),
               (FINAL_HIDDEN, np.float32, [1, out_rows, cfg.hidden_size])]
    for c in caches:
        inputs += [(c.past_key, dtype, buffer), (c.past_value, dtype, buffer)]
        outputs += [(c.present_key, dtype, buffer), (c.present_value, dtype, buffer)]
    if options.layer_stats:
        states = last_token_states(g, hidden_states, dtype)
        outputs.append((states, np.float32, [cfg.n_layers + 1, cfg.hidden_size]))
    return DecoderGraph(g.make_model(inputs, outputs), g.external, g.in_place, caches,
                        cache_shape, options)


def step_inputs(cfg: TextConfig, options: DecoderOptions, apart: bool,
                deepstack: int) -> list[ValueSpec]:
    """The graph inputs besides the KV buffers: embeddings, cache bookkeeping, steering,
    rotary rows, and those a build adds (rows apart, two-way image masks, DeepStack
    features)."""
    dtype, half = options.dtype, rotary_width(cfg)
    inputs = [
        (INPUTS_EMBEDS, dtype, [1, "S", cfg.hidden_size]),
        (SEQLENS_K, np.int32, [1]),
        (TOTAL_LEN, np.int32, []),
        (NUM_LOGITS, np.int64, [1]),
        (STEERING, dtype, [cfg.n_layers, cfg.hidden_size]),
        (COS, dtype, ["T", half]),
        (SIN, dtype, ["T", half]),
    ]
    if apart:
        inputs.append((ROWS_APART, np.bool_, [1]))
    if cfg.local_rope:
        inputs += [(COS_LOCAL, dtype, ["T", half]), (SIN_LOCAL, dtype, ["T", half])]
    if options.two_way_images:
        inputs += [(QUERY_SLOTS, np.int64, [1, "S"]), (MASK, dtype, ["S", "T"])]
        if cfg.has_sliding_layers:
            inputs.append((MASK_LOCAL, dtype, ["S", "T"]))
    if deepstack:
        inputs.append((DEEPSTACK, dtype, [deepstack, "S", cfg.hidden_size]))
    return inputs


def deepstack_count(model: GGUFModel) -> int:
    """How many first blocks add image features to their output (Qwen3-VL's DeepStack)."""
    vision = model.config.vision
    return len(vision.deepstack_layers) if vision is not None else 0


def deepstack_features(g: GraphBuilder, m: str, i: int) -> str:
    """Block i's MLP output plus DEEPSTACK[i] (zero outside the image rows), so the residual
    stream takes the features with the MLP's add."""
    index = g.add_initializer(f"blk.{i}.deepstack_index", np.array(i, np.int64))
    [features] = g.add_node("Gather", [DEEPSTACK, index], [f"blk.{i}/deepstack"], axis=0)
    [m] = g.add_node("Add", [m, features], [f"blk.{i}/ffn_deepstack"])  # [1, S, H]
    return m


def layer_caches(cfg: TextConfig) -> tuple[LayerCache, ...]:
    """The KV buffer names of every block (graph inputs and outputs)."""
    return tuple(
        LayerCache(f"past_key.{i}", f"past_value.{i}", f"present_key.{i}", f"present_value.{i}")
        for i in range(cfg.n_layers)
    )


def cache_step(g: GraphBuilder, row_invariant: bool) -> CacheStep:
    """The attention inputs; row-invariant: lengths one longer for the spare row and one
    more rotary row (a copy of the last: the spare row's keys are never read)."""
    if not row_invariant:
        return CacheStep(seqlens_k=SEQLENS_K, total_len=TOTAL_LEN, cos=COS, sin=SIN)
    one = g.add_initializer("spare.one", np.array(1, np.int32))
    [seqlens] = g.add_node("Add", [SEQLENS_K, one], ["spare/seqlens_k"])
    [total] = g.add_node("Add", [TOTAL_LEN, one], ["spare/total_len"])
    cos, sin = (with_spare_row(g, t, f"spare/{t}", axis=0) for t in (COS, SIN))
    return CacheStep(seqlens_k=seqlens, total_len=total, cos=cos, sin=sin, row_invariant=True)


def local_cache_step(g: GraphBuilder, step: CacheStep) -> CacheStep:
    """The sliding layers' inputs (Gemma 3): the same lengths, their own rotary rows."""
    cos, sin = COS_LOCAL, SIN_LOCAL
    if step.row_invariant:
        cos, sin = (with_spare_row(g, t, f"spare/{t}", axis=0) for t in (cos, sin))
    return replace(step, cos=cos, sin=sin)


def feed_forward(g: GraphBuilder, h: str, w: DecoderWeights, i: int, cfg: TextConfig, project,
                 *, fast: bool) -> str:
    """Block i's MLP: the gated MLP, or a mixture of experts (engine.graph.moe)."""
    name = f"blk.{i}.ffn"
    if not cfg.mixture_of_experts:
        return mlp(g, h, w.mlp(i), project, name, cfg.activation)
    routing = Routing(cfg.experts_used, cfg.expert_weights_norm,
                      top_k_first=cfg.expert_gating == "top_k_softmax", glu=cfg.expert_glu)
    return moe(g, h, w.experts(i), routing, project, name, fast=fast).y


def mlp(g: GraphBuilder, x: str, w: MLPWeights, project, name: str,
        activation: str = "silu") -> str:
    """Gated MLP: down(act(gate(x)) * up(x)), act SiLU (SwiGLU) or GELU-tanh (Gemma); gate
    and up in one matmul when they fuse."""
    fused = stack_rows([w.gate, w.up])
    if fused is None:
        gate, up = project(x, w.gate, f"{name}.gate"), project(x, w.up, f"{name}.up")
    else:
        gate_up = project(x, fused, f"{name}.gate_up")  # [1, S, 2I]
        gate, up = g.add_node("Split", [gate_up], [f"{name}/gate", f"{name}/up"], axis=-1,
                              num_outputs=2)
    if activation == "gelu_tanh":
        [act] = g.add_node("Gelu", [gate], [f"{name}/gelu"], approximate="tanh")
    else:
        [sig] = g.add_node("Sigmoid", [gate], [f"{name}/sigmoid"])
        [act] = g.add_node("Mul", [gate, sig], [f"{name}/silu"])
    [act] = g.add_node("Mul", [act, up], [f"{name}/{activation}_up"])  # [1, S, I]
    return project(act, w.down, f"{name}.down")


def steered(g: GraphBuilder, m: str, i: int) -> str:
    """Block i's MLP output plus row i of the steering input (ARCHITECTURE.md §4)."""
    index = g.add_initializer(f"steering.{i}.row", np.array(i, np.int64))
    [row] = g.add_node("Gather", [STEERING, index], [f"steering/{i}"], axis=0)  # [H]
    [y] = g.add_node("Add", [m, row], [f"blk.{i}.ffn/steered"])
    return y


def gemma_scaled_embeddings(g: GraphBuilder, x: str, scale: float, dtype: type) -> str:
    """Gemma multiplies the embeddings by sqrt(H) (its embedding layer does, so image rows
    taking their place would not be scaled)."""
    factor = g.add_initializer("embeddings.scale", np.array(scale, dtype))
    [y] = g.add_node("Mul", [x, factor], ["embeddings/scaled"])
    return y


def last_token_states(g: GraphBuilder, hidden_states: list[str], dtype: type) -> str:
    """The last token of each [1, S, H] hidden state, stacked -> [len, H] float32."""
    rows = []
    for i, h in enumerate(hidden_states):
        x = last_position(g, h, f"debug.{i}/last")  # [1, 1, H]
        if dtype != np.float32:
            [x] = g.add_node("Cast", [x], [f"debug.{i}/float32"], to=onnx.TensorProto.FLOAT)
        rows.append(x)
    [table] = g.add_node("Concat", rows, ["debug/rows"], axis=1)  # [1, L + 1, H]
    [table] = g.add_node("Squeeze", [table, g.add_initializer("debug.axis", np.array([0]))],
                         [HIDDEN_STATES])  # [L + 1, H]
    return table
