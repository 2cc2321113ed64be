"""Text decoder architectures Lantern runs, one small record each, and the parser that turns
``{arch}.*`` metadata into a ``TextConfig`` plus the tensor inventory it implies.

The supported families share one decoder shape (pre-norm RMSNorm, GQA, gated MLP); a record
says how each differs: q/k/v bias, q/k norm, rotary pairing, M-RoPE keys and layout,
where its vision tower lives, whether q|k|v and gate|up are stored fused (Phi-3) and where a sliding
window holds, and whether it is a Gemma 3 block (scaled embeddings, post-norms, GELU,
sliding-window layers with their own rotary base). Partial rotary (rope.dimension_count below
head_dim, Phi-4-mini) is read for any family: only the first rope_dims of each head turn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from engine.errors import CorruptModel, UnsupportedModel
from engine.gguf.config import TextConfig
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
    gemma3: bool = False           # Gemma 3's block (see gemma3_config)
    fused: bool = False            # attn_qkv and ffn_up = gate|up, as Phi-3 stores them
    windowed: bool = False         # attention.sliding_window (if > 0) holds for every layer
    # tensors of a tower the file does not describe, left unread (the model runs as text)
    unused_prefixes: tuple[str, ...] = ()
    experts: bool = False          # the MLPs are mixtures of experts (moe_config)
    # whether the chosen experts' weights are renormalised when the file does not say
    # (expert_weights_norm): what the family's llama.cpp graph does
    expert_weights_norm: bool = False


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
        # Ollama's gemma3 files carry the SigLIP tower and projector inline (v.*, mm.*);
        # llama.cpp's put them in an mmproj
        Architecture("gemma3", qkv_bias=False, qk_norm=True, rope_interleaved=False, gemma3=True,
                     vision="either", unused_prefixes=("v.", "mm.")),
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
    )
}


def architecture(name: str | None, path: object) -> Architecture:
    """The registry entry for ``general.architecture``; unknown -> UnsupportedModel."""
    if name not in ARCHITECTURES:
        known = ", ".join(sorted(ARCHITECTURES))
        raise UnsupportedModel(
            f"{path}: architecture {name!r} is not supported by Lantern (supported: {known})"
        )
    return ARCHITECTURES[name]


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
    if scaling not in (None, "none", "", "linear"):
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
    )
    if LONGROPE_FACTORS[1] in tensors:
        config = longrope_config(config, keys, tensors)
    if arch.experts:
        config = moe_config(config, arch, keys)
    if arch.gemma3:
        return gemma3_config(config, keys)
    window = keys.optional_integer(p + "attention.sliding_window") if arch.windowed else None
    if window:
        config = replace(config, sliding_window=window,
                         sliding_layers=(True,) * config.n_layers)
    return config


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


# Gemma 3's layout where the GGUF does not record it (llama.cpp's defaults): five sliding
# layers, then one global; the sliding layers turn with base 10000 and no position scaling.
GEMMA3_SLIDING_PERIOD = 6
GEMMA3_LOCAL_ROPE_THETA = 10000.0
GEMMA3_GLOBAL_ROPE_THETA = 1_000_000.0
GEMMA3_27B_LAYERS = 62


def gemma3_config(config: TextConfig, keys: Keys) -> TextConfig:
    """Gemma 3's differences from the plain block. The query is scaled by
    1/sqrt(query_pre_attn_scalar), which the GGUF does not store either: it is head_dim for
    every size but the 27B (62 layers), where it is hidden_size / n_heads, as llama.cpp has it."""
    p = f"{config.architecture}."
    scalar = config.head_dim
    if config.n_layers == GEMMA3_27B_LAYERS:
        scalar = config.hidden_size // config.n_heads
    softcap = keys.number(p + "final_logit_softcapping", 0.0)
    window = keys.optional_integer(p + "attention.sliding_window")
    return replace(
        config,
        embedding_scale=math.sqrt(config.hidden_size),
        post_norms=True,
        activation="gelu_tanh",
        attention_scale=1.0 / math.sqrt(scalar),
        sliding_window=window or None,
        sliding_layers=_sliding_layers(keys, p, config.n_layers) if window else (),
        # llama.cpp's converter writes rope.freq_base(_swa); Ollama's rope.global/local.freq_base
        rope_theta=_first_number(keys, (p + "rope.freq_base", p + "rope.global.freq_base"),
                                 GEMMA3_GLOBAL_ROPE_THETA),
        rope_theta_local=_first_number(
            keys, (p + "rope.freq_base_swa", p + "rope.local.freq_base"), GEMMA3_LOCAL_ROPE_THETA),
        final_logit_softcap=softcap or None,
    )


def _sliding_layers(keys: Keys, p: str, n_layers: int) -> tuple[bool, ...]:
    """attention.sliding_window_pattern: one flag per layer, or the period (every period-th
    layer is global); absent: llama.cpp's period of six."""
    pattern = keys.metadata.get(p + "attention.sliding_window_pattern", GEMMA3_SLIDING_PERIOD)
    if isinstance(pattern, list | tuple):
        if len(pattern) != n_layers:
            raise CorruptModel(f"{keys.path}: {p}attention.sliding_window_pattern has "
                               f"{len(pattern)} flags for {n_layers} layers")
        return tuple(bool(flag) for flag in pattern)
    period = keys.integer(p + "attention.sliding_window_pattern", GEMMA3_SLIDING_PERIOD)
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
            b + "ffn_norm.weight": (h,),
        }
        if not text.mixture_of_experts:
            shapes[b + "ffn_down.weight"] = (h, f)
        if text.fused_projections:
            shapes |= {b + "attn_qkv.weight": (q + 2 * kv, h), b + "ffn_up.weight": (2 * f, h)}
        else:
            shapes |= {b + "attn_q.weight": (q, h), b + "attn_k.weight": (kv, h),
                       b + "attn_v.weight": (kv, h)}
        if text.mixture_of_experts:
            e, fe = text.experts, text.expert_intermediate_size
            shapes |= {
                b + "ffn_gate_inp.weight": (e, h),
                b + "ffn_gate_exps.weight": (e, fe, h),
                b + "ffn_up_exps.weight": (e, fe, h),
                b + "ffn_down_exps.weight": (e, h, fe),
            }
        elif not text.fused_projections:
            shapes |= {b + "ffn_gate.weight": (f, h), b + "ffn_up.weight": (f, h)}
        if text.qkv_bias:
            shapes |= {b + "attn_q.bias": (q,), b + "attn_k.bias": (kv,), b + "attn_v.bias": (kv,)}
        if text.qk_norm:
            shapes |= {b + "attn_q_norm.weight": (hd,), b + "attn_k_norm.weight": (hd,)}
        if text.post_norms:
            shapes |= {b + "post_attention_norm.weight": (h,), b + "post_ffw_norm.weight": (h,)}
    return shapes
