"""Text decoder architectures Lantern runs, one small record each, and the parser that turns
``{arch}.*`` metadata into a ``TextConfig`` plus the tensor inventory it implies.

The supported families share one decoder shape (pre-norm RMSNorm, GQA, gated MLP); a record
says how each differs: q/k/v bias, q/k norm, rotary pairing, M-RoPE keys and layout,
where its vision tower lives, whether q|k|v and gate|up are stored fused (Phi-3) and where a sliding
window holds, and whether it is a Gemma block: Gemma 2 (scaled embeddings, post-norms, GELU,
every other layer sliding, soft-capped attention scores) or Gemma 3 (the same with q/k norm
in place of the score cap, and sliding layers with their own rotary base). Partial rotary
(rope.dimension_count below head_dim, Phi-4-mini) is read for any family: only the first
rope_dims of each head turn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from engine.errors import CorruptModel, Remedy, UnsupportedModel
from engine.gguf.config import ClampedSwiGLU, TextConfig, YarnScaling
from engine.gguf.keys import Keys
from engine.gguf.reader import TensorInfo


@dataclass(frozen=True)
class Architecture:
    name: str                      # general.architecture
    qkv_bias: bool
    qk_norm: bool
    rope_interleaved: bool         # llama GGUF rows are permuted for (2i, 2i+1) pairs
    # key suffixes that may hold the M-RoPE sections, the first present wins
    mrope_keys: tuple[str, ...] = ()
    mrope_interleaved: bool = False  # Qwen3-VL's t, h, w frequencies taking turns
    # "inline" (same file), "projector" (separate mmproj) or "either" (inline when the file
    # has vision keys: Gemma 3, Qwen3-VL)
    vision: str | None = None
    gemma2: bool = False           # Gemma 2's block (see gemma2_config)
    gemma3: bool = False           # Gemma 3's block (see gemma3_config)
    fused: bool = False            # attn_qkv and ffn_up = gate|up, as Phi-3 stores them
    windowed: bool = False         # attention.sliding_window (if > 0) holds for every layer
    gpt_oss: bool = False          # gpt-oss's block (see gpt_oss_config)
    # tensors of a tower the file does not describe, left unread (the model runs as text)
    unused_prefixes: tuple[str, ...] = ()
    experts: bool = False          # the MLPs are mixtures of experts (moe_config)
    # whether the chosen experts' weights are renormalised when the file does not say
    # (expert_weights_norm): what the family's llama.cpp graph does
    expert_weights_norm: bool = False
    # Ollama's own gpt-oss layout ("gptoss", engine.gguf.ollama_names): its block tensors are
    # read under llama.cpp's names, YaRN is implied by a scaling factor (no scaling type is
    # written), and each expert's gate and up rows alternate in one tensor
    ollama_gpt_oss: bool = False


ARCHITECTURES: dict[str, Architecture] = {
    arch.name: arch
    for arch in (
        Architecture("qwen2", qkv_bias=True, qk_norm=False, rope_interleaved=False),
        Architecture("qwen3", qkv_bias=False, qk_norm=True, rope_interleaved=False),
        Architecture("qwen3moe", qkv_bias=False, qk_norm=True, rope_interleaved=False,
                     experts=True, expert_weights_norm=True),
        Architecture("llama", qkv_bias=False, qk_norm=False, rope_interleaved=True),
        # Phi-3's window as HF applies it (llama.cpp ignores it for now)
        Architecture("phi3", qkv_bias=False, qk_norm=False, rope_interleaved=False, fused=True,
                     windowed=True),
        Architecture("gemma2", qkv_bias=False, qk_norm=False, rope_interleaved=False,
                     gemma2=True),
        # Ollama's gemma3 files carry the SigLIP tower and projector inline (v.*, mm.*);
        # llama.cpp's put them in an mmproj
        Architecture("gemma3", qkv_bias=False, qk_norm=True, rope_interleaved=False, gemma3=True,
                     vision="either", unused_prefixes=("v.", "mm.")),
        # mixture-of-experts MLPs, sinks, alternating sliding layers, YaRN (gpt_oss_config)
        Architecture("gpt-oss", qkv_bias=True, qk_norm=False, rope_interleaved=False,
                     gpt_oss=True),
        Architecture("gptoss", qkv_bias=True, qk_norm=False, rope_interleaved=False,
                     gpt_oss=True, ollama_gpt_oss=True),
        Architecture(
            "qwen25vl", qkv_bias=True, qk_norm=False, rope_interleaved=False,
            mrope_keys=("rope.mrope_section",), vision="inline",
        ),
        Architecture(
            "qwen2vl", qkv_bias=True, qk_norm=False, rope_interleaved=False,
            mrope_keys=("rope.dimension_sections",), vision="projector",
        ),
        # Qwen3 text with interleaved M-RoPE; llama.cpp writes rope.dimension_sections and
        # the tower as an mmproj, Ollama mrope_sections and the tower inline (v.*)
        Architecture(
            "qwen3vl", qkv_bias=False, qk_norm=True, rope_interleaved=False,
            mrope_keys=("rope.dimension_sections", "mrope_sections"), mrope_interleaved=True,
            vision="either",
        ),
        # Qwen3-VL's MoE sizes: the qwen3vl record with Qwen3-MoE's MLPs (HF renormalises the
        # chosen experts' weights always)
        Architecture(
            "qwen3vlmoe", qkv_bias=False, qk_norm=True, rope_interleaved=False,
            mrope_keys=("rope.dimension_sections", "mrope_sections"), mrope_interleaved=True,
            vision="either", experts=True, expert_weights_norm=True,
        ),
    )
}


def architecture(keys: Keys) -> Architecture:
    """The registry entry for ``general.architecture``; one it lacks -> UnsupportedModel
    saying what the file is (an embedding model when it names a pooling, as Ollama tells
    them apart) and which architectures Lantern runs."""
    name = keys.string("general.architecture")
    if name in ARCHITECTURES:
        return ARCHITECTURES[name]
    known = ", ".join(sorted(ARCHITECTURES))
    if keys.has(f"{name}.pooling_type"):
        what = f"an embedding model (GGUF, architecture {name!r})"
        why = (f"Lantern does not run this encoder; it serves embeddings from the "
               f"architectures it runs ({known})")
    else:
        what = f"a GGUF model of architecture {name!r}"
        why = f"Lantern does not run this architecture yet (it runs {known})"
    raise UnsupportedModel(f"{keys.path}: {what}: {why}", remedy=Remedy.OLLAMA)


def text_config(arch: Architecture, keys: Keys, tensors: dict[str, TensorInfo]) -> TextConfig:
    """Parse ``{arch}.*`` keys; vocab size and tied embeddings come from the tensors."""
    p = f"{arch.name}."
    n_heads = keys.integer(p + "attention.head_count")
    hidden = keys.integer(p + "embedding_length")
    if n_heads <= 0 or hidden % n_heads and not keys.has(p + "attention.key_length"):
        raise CorruptModel(f"{keys.path}: {hidden} hidden units do not split into {n_heads} heads")
    head_dim = keys.optional_integer(p + "attention.key_length") or hidden // n_heads
    value_dim = keys.optional_integer(p + "attention.value_length") or head_dim
    if value_dim != head_dim:
        raise UnsupportedModel(
            f"{keys.path}: value heads of {value_dim} differ from key heads of {head_dim}"
        )
    rope_dims = keys.optional_integer(p + "rope.dimension_count") or head_dim
    if rope_dims > head_dim or rope_dims % 2:
        raise CorruptModel(f"{keys.path}: {p}rope.dimension_count {rope_dims} is not an even "
                           f"number of dims within a head of {head_dim}")
    if rope_dims < head_dim and arch.rope_interleaved:
        raise UnsupportedModel(f"{keys.path}: partial rotary ({rope_dims} of {head_dim} dims) "
                               f"on interleaved pairs ({arch.name}) is not supported")
    scaling = keys.string(p + "rope.scaling.type", None)
    if arch.ollama_gpt_oss and scaling is None and keys.number(p + "rope.scaling.factor",
                                                                1.0) > 1:
        scaling = "yarn"
    if scaling not in (None, "none", "", "linear", "yarn"):
        raise UnsupportedModel(f"{keys.path}: rope scaling {scaling!r} is not supported")
    linear_factor = keys.number(p + "rope.scaling.factor", 1.0) if scaling == "linear" else 1.0
    if "token_embd.weight" not in tensors:
        raise CorruptModel(f"{keys.path}: tensor token_embd.weight is missing")
    config = TextConfig(
        architecture=arch.name,
        n_layers=keys.integer(p + "block_count"),
        hidden_size=hidden,
        intermediate_size=keys.integer(p + "feed_forward_length"),
        n_heads=n_heads,
        n_kv_heads=keys.integer(p + "attention.head_count_kv", n_heads),
        head_dim=head_dim,
        vocab_size=tensors["token_embd.weight"].shape[0],
        context_length=keys.integer(p + "context_length"),
        rms_eps=keys.number(p + "attention.layer_norm_rms_epsilon"),
        rope_theta=keys.number(p + "rope.freq_base", 10000.0),
        tie_embeddings="output.weight" not in tensors,
        qkv_bias=arch.qkv_bias,
        qk_norm=arch.qk_norm,
        rope_interleaved=arch.rope_interleaved,
        mrope_sections=_mrope_sections(arch, keys, rope_dims),
        mrope_interleaved=arch.mrope_interleaved,
        rope_linear_factor=linear_factor,
        fused_projections=arch.fused,
        partial_rope_dims=rope_dims if rope_dims < head_dim else None,
        attention_sinks=SINKS in tensors,
        output_bias=OUTPUT_BIAS in tensors,
    )
    if LONGROPE_FACTORS[1] in tensors:
        config = longrope_config(config, keys, tensors)
    if scaling == "yarn":
        config = yarn_config(config, keys)
    if arch.experts:
        config = moe_config(config, arch, keys)
    if arch.gemma2:
        return gemma2_config(config, keys)
    if arch.gemma3:
        return gemma3_config(config, keys)
    if arch.gpt_oss:
        return gpt_oss_config(config, keys, tensors)
    window = keys.optional_integer(p + "attention.sliding_window") if arch.windowed else None
    if window:
        config = replace(config, sliding_window=window,
                         sliding_layers=(True,) * config.n_layers)
    return config


# any family's file may carry these; gpt-oss's do
SINKS, OUTPUT_BIAS = "blk.0.attn_sinks.weight", "blk.0.attn_output.bias"
FUSED_GATE_UP = "blk.0.ffn_gate_up_exps.weight"  # Ollama's gpt-oss: gate and up rows alternate
LONGROPE_FACTORS = ("rope_factors_short.weight", "rope_factors_long.weight")
SOFTMAX_GATING = 1  # {arch}.expert_gating_func: softmax over all experts, then the top k


def moe_config(config: TextConfig, arch: Architecture, keys: Keys) -> TextConfig:
    """The experts of a mixture-of-experts family: how many, how many each token uses, their
    width, and whether the chosen ones' weights are renormalised."""
    p = f"{config.architecture}."
    experts = keys.integer(p + "expert_count")
    used = keys.integer(p + "expert_used_count")
    if not 0 < used <= experts:
        raise CorruptModel(f"{keys.path}: {used} experts used per token out of {experts}")
    gating = keys.integer(p + "expert_gating_func", SOFTMAX_GATING)
    if gating != SOFTMAX_GATING:
        raise UnsupportedModel(f"{keys.path}: expert gating function {gating} is not "
                               f"supported (only softmax, {SOFTMAX_GATING})")
    # llama.cpp's converter writes expert_weights_norm where a family's config has one;
    # Ollama's converter norm_top_k_prob
    norm = next((p + name for name in ("expert_weights_norm", "norm_top_k_prob")
                 if keys.has(p + name)), p + "expert_weights_norm")
    return replace(config, experts=experts, experts_used=used,
                   expert_intermediate_size=keys.integer(p + "expert_feed_forward_length"),
                   expert_weights_norm=keys.flag(norm, arch.expert_weights_norm))


def longrope_config(config: TextConfig, keys: Keys, tensors: dict[str, TensorInfo]) -> TextConfig:
    """LongRoPE as llama.cpp's converter writes it (Phi-3.5, Phi-3 128k, Phi-4-mini): both sets as
    tensors, the original context and the attention factor as keys. No key names the
    scaling type; a missing attention factor is derived from the two contexts as HF does."""
    p = f"{config.architecture}."
    missing = [name for name in LONGROPE_FACTORS if name not in tensors]
    if missing:
        raise CorruptModel(f"{keys.path}: LongRoPE tensor {missing[0]} is missing")
    original = keys.integer(p + "rope.scaling.original_context_length")
    if original <= 1:
        raise CorruptModel(f"{keys.path}: rope.scaling.original_context_length is {original}")
    ratio = config.context_length / original
    derived = math.sqrt(1 + math.log(ratio) / math.log(original)) if ratio > 1 else 1.0
    short, long = (tuple(float(f) for f in tensors[name].dequantize().reshape(-1))
                   for name in LONGROPE_FACTORS)
    return replace(config, rope_factors_short=short, rope_factors_long=long,
                   rope_original_context=original,
                   rope_attention_factor=keys.number(p + "rope.scaling.attn_factor", derived))


def yarn_config(config: TextConfig, keys: Keys) -> TextConfig:
    """YaRN as llama.cpp's converter writes it: the factor and the original context, the
    betas and the mixing factor where the HF config set them (else YaRN's 32, 1 and 1). The
    attention factor is 0.1 ln(factor) + 1 unless the file gives one (HF's attention_factor,
    written as yarn_attn_factor)."""
    p = f"{config.architecture}.rope.scaling."
    factor = keys.number(p + "factor")
    original = keys.integer(p + "original_context_length", config.context_length)
    if factor <= 0 or original <= 1:
        raise CorruptModel(f"{keys.path}: YaRN scaling by {factor} of an original context of "
                           f"{original} tokens")
    yarn = YarnScaling(factor=factor, original_context=original,
                       beta_fast=keys.number(p + "yarn_beta_fast", 32.0),
                       beta_slow=keys.number(p + "yarn_beta_slow", 1.0),
                       extrapolation=keys.number(p + "yarn_ext_factor", 1.0))
    derived = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    return replace(config, rope_yarn=yarn,
                   rope_attention_factor=keys.number(p + "yarn_attn_factor", derived))


GPT_OSS_SLIDING_PERIOD = 2  # llama.cpp's default and HF's layer_types: even layers slide
GPT_OSS_GLU = ClampedSwiGLU(alpha=1.702, limit=7.0)  # llama.cpp's constants, HF's defaults


def gpt_oss_config(config: TextConfig, keys: Keys, tensors: dict[str, TensorInfo]) -> TextConfig:
    """gpt-oss's differences from the plain block: every MLP is a mixture of experts (with
    biases, the top k logits' softmax, the clamped SwiGLU), the MLP's input norm is stored
    as post_attention_norm, and sliding layers take turns with full ones (sinks, the output
    bias and YaRN are read for any family)."""
    p = f"{config.architecture}."
    window = keys.optional_integer(p + "attention.sliding_window")
    experts = keys.integer(p + "expert_count")
    used = keys.integer(p + "expert_used_count")
    if not 0 < used <= experts:
        raise CorruptModel(f"{keys.path}: {used} of {experts} experts used per token")
    return replace(
        config,
        experts=experts,
        experts_used=used,
        expert_intermediate_size=keys.integer(p + "expert_feed_forward_length",
                                              config.intermediate_size),
        expert_gating="top_k_softmax",
        expert_biases=True,
        expert_glu=GPT_OSS_GLU,
        fused_gate_up_experts=FUSED_GATE_UP in tensors,
        ffn_norm_tensor="post_attention_norm",
        sliding_window=window or None,
        sliding_layers=(_sliding_layers(keys, p, config.n_layers, GPT_OSS_SLIDING_PERIOD)
                        if window else ()),
    )


# Gemma's layouts where the GGUF does not record them (llama.cpp's defaults). Gemma 2: every
# other layer slides, over 4096 keys, and the scores and logits are capped at 50 and 30.
# Gemma 3: five sliding layers, then one global; the sliding layers turn with base 10000 and
# no position scaling.
GEMMA2_SLIDING_PERIOD = 2
GEMMA2_WINDOW = 4096
GEMMA2_ATTENTION_SOFTCAP = 50.0
GEMMA2_FINAL_SOFTCAP = 30.0
GEMMA2_27B_LAYERS = 46
GEMMA3_SLIDING_PERIOD = 6
GEMMA3_LOCAL_ROPE_THETA = 10000.0
GEMMA3_GLOBAL_ROPE_THETA = 1_000_000.0
GEMMA3_27B_LAYERS = 62


def gemma_block(config: TextConfig, large_layers: int) -> TextConfig:
    """What Gemma 2 and 3 share: embeddings times sqrt(H), a norm on each sublayer's output,
    GELU-tanh. The query is scaled by 1/sqrt(query_pre_attn_scalar), which the GGUF does not
    store: it is head_dim for every size but the 27B (told apart by its layer count), where
    it is hidden_size / n_heads, as llama.cpp has it."""
    scalar = config.head_dim
    if config.n_layers == large_layers:
        scalar = config.hidden_size // config.n_heads
    return replace(config, embedding_scale=math.sqrt(config.hidden_size), post_norms=True,
                   activation="gelu_tanh", attention_scale=1.0 / math.sqrt(scalar))


def gemma2_config(config: TextConfig, keys: Keys) -> TextConfig:
    """Gemma 2: one rotary base for every layer (the converter writes none: 10000), the even
    layers sliding, the attention scores and the logits soft-capped."""
    p = f"{config.architecture}."
    return replace(
        gemma_block(config, GEMMA2_27B_LAYERS),
        sliding_window=keys.integer(p + "attention.sliding_window", GEMMA2_WINDOW),
        sliding_layers=_sliding_layers(keys, p, config.n_layers, GEMMA2_SLIDING_PERIOD),
        attn_logit_softcap=keys.number(p + "attn_logit_softcapping", GEMMA2_ATTENTION_SOFTCAP)
        or None,
        final_logit_softcap=keys.number(p + "final_logit_softcapping", GEMMA2_FINAL_SOFTCAP)
        or None,
    )


def gemma3_config(config: TextConfig, keys: Keys) -> TextConfig:
    """Gemma 3: q/k norm (the record's), sliding layers with a rotary base of their own, five
    of every six by default; a window only where the file gives one."""
    p = f"{config.architecture}."
    softcap = keys.number(p + "final_logit_softcapping", 0.0)
    window = keys.optional_integer(p + "attention.sliding_window")
    return replace(
        gemma_block(config, GEMMA3_27B_LAYERS),
        sliding_window=window or None,
        sliding_layers=(_sliding_layers(keys, p, config.n_layers, GEMMA3_SLIDING_PERIOD)
                        if window else ()),
        # llama.cpp's converter writes rope.freq_base(_swa); Ollama's rope.global/local.freq_base
        rope_theta=_first_number(keys, (p + "rope.freq_base", p + "rope.global.freq_base"),
                                 GEMMA3_GLOBAL_ROPE_THETA),
        rope_theta_local=_first_number(
            keys, (p + "rope.freq_base_swa", p + "rope.local.freq_base"), GEMMA3_LOCAL_ROPE_THETA),
        final_logit_softcap=softcap or None,
    )


def _sliding_layers(keys: Keys, p: str, n_layers: int, period: int) -> tuple[bool, ...]:
    """attention.sliding_window_pattern: one flag per layer, or the period (every period-th
    layer is global); absent: the family's period."""
    pattern = keys.metadata.get(p + "attention.sliding_window_pattern", period)
    if isinstance(pattern, list | tuple):
        if len(pattern) != n_layers:
            raise CorruptModel(f"{keys.path}: {p}attention.sliding_window_pattern has "
                               f"{len(pattern)} flags for {n_layers} layers")
        return tuple(bool(flag) for flag in pattern)
    period = keys.integer(p + "attention.sliding_window_pattern", period)
    return tuple(period > 0 and (i + 1) % period != 0 for i in range(n_layers))


def _first_number(keys: Keys, names: tuple[str, ...], default: float) -> float:
    return next((keys.number(name) for name in names if keys.has(name)), default)


def _mrope_sections(arch: Architecture, keys: Keys, rope_dims: int) -> tuple[int, ...] | None:
    if not arch.mrope_keys:
        return None
    names = [f"{arch.name}.{suffix}" for suffix in arch.mrope_keys]
    key = next((name for name in names if keys.has(name)), names[0])  # absent: its error
    sections = list(keys.integers(key))
    while sections and sections[-1] == 0:  # llama.cpp pads to four sections
        sections.pop()
    if len(sections) != 3 or sum(sections) != rope_dims // 2:
        raise CorruptModel(
            f"{keys.path}: {key} = {keys.metadata[key]} does not split the rotary half "
            f"{rope_dims // 2} into (t, h, w) sections"
        )
    return tuple(sections)


def text_tensor_shapes(text: TextConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the decoder reads, with its numpy-order shape (out-first)."""
    h, hd, v, f = text.hidden_size, text.head_dim, text.vocab_size, text.intermediate_size
    q, kv = text.n_heads * hd, text.n_kv_heads * hd
    shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (v, h), "output_norm.weight": (h,)}
    if text.rope_factors_long is not None:
        shapes |= {name: (text.rope_dims // 2,) for name in LONGROPE_FACTORS}
    if not text.tie_embeddings:
        shapes["output.weight"] = (v, h)
    for i in range(text.n_layers):
        b = f"blk.{i}."
        shapes |= {
            b + "attn_norm.weight": (h,),
            b + "attn_output.weight": (h, q),
            b + text.ffn_norm_tensor + ".weight": (h,),
        }
        if not text.mixture_of_experts:
            shapes[b + "ffn_down.weight"] = (h, f)
        if text.fused_projections:
            shapes |= {b + "attn_qkv.weight": (q + 2 * kv, h), b + "ffn_up.weight": (2 * f, h),
                       b + "ffn_down.weight": (h, f)}
        else:
            shapes |= {b + "attn_q.weight": (q, h), b + "attn_k.weight": (kv, h),
                       b + "attn_v.weight": (kv, h)}
            if not text.mixture_of_experts:
                shapes |= {b + "ffn_gate.weight": (f, h), b + "ffn_up.weight": (f, h)}
        if text.mixture_of_experts:
            shapes |= _expert_shapes(text, b)
        if text.qkv_bias:
            shapes |= {b + "attn_q.bias": (q,), b + "attn_k.bias": (kv,), b + "attn_v.bias": (kv,)}
        if text.qk_norm:
            shapes |= {b + "attn_q_norm.weight": (hd,), b + "attn_k_norm.weight": (hd,)}
        if text.post_norms:
            shapes |= {b + "post_attention_norm.weight": (h,), b + "post_ffw_norm.weight": (h,)}
        if text.attention_sinks:
            shapes[b + "attn_sinks.weight"] = (text.n_heads,)
        if text.output_bias:
            shapes[b + "attn_output.bias"] = (h,)
    return shapes


def _expert_shapes(text: TextConfig, b: str) -> dict[str, tuple[int, ...]]:
    """One block's router and experts' stacked matrices (and biases, gpt-oss), as llama.cpp's
    converter writes them."""
    h, e, x = text.hidden_size, text.experts, text.expert_intermediate_size
    shapes = {b + "ffn_gate_inp.weight": (e, h), b + "ffn_down_exps.weight": (e, h, x)}
    parts = ({"gate_up": 2 * x} if text.fused_gate_up_experts else {"gate": x, "up": x})
    shapes |= {f"{b}ffn_{part}_exps.weight": (e, n, h) for part, n in parts.items()}
    if text.expert_biases:
        shapes |= {b + "ffn_gate_inp.bias": (e,), b + "ffn_down_exps.bias": (e, h)}
        shapes |= {f"{b}ffn_{part}_exps.bias": (e, n) for part, n in parts.items()}
    return shapes
