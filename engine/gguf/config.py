"""Typed, frozen model description parsed once from GGUF metadata.

Field names are the contract between engine/gguf and the graph builders, the numpy
reference and the vision tower. Parsing lives in ``engine.gguf.architectures`` (text),
``engine.gguf.vision_config`` (both vision layouts) and ``engine.gguf.model`` (``open_model``).
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class YarnScaling:
    """YaRN's frequency mix (rope.scaling.type "yarn"): frequencies that turn fewer than
    ``beta_slow`` times over the original context are divided by ``factor``, those that turn
    more than ``beta_fast`` times stay, a linear ramp between (engine.modelmath.rope)."""

    factor: float                # {arch}.rope.scaling.factor
    original_context: int        # {arch}.rope.scaling.original_context_length
    beta_fast: float = 32.0      # {arch}.rope.scaling.yarn_beta_fast
    beta_slow: float = 1.0       # {arch}.rope.scaling.yarn_beta_slow
    extrapolation: float = 1.0   # {arch}.rope.scaling.yarn_ext_factor: how much the ramp mixes


@dataclass(frozen=True)
class ClampedSwiGLU:
    """gpt-oss's experts' activation: the gate clamped above at ``limit``, up to
    [-limit, limit], then (up + 1) * gate * sigmoid(alpha * gate). The file does not record
    it; llama.cpp and HF's config agree on the values (gpt_oss_config)."""

    alpha: float
    limit: float


@dataclass(frozen=True)
class TextConfig:
    """The text decoder's hyper-parameters (Qwen2 / Qwen2.5 / Qwen2.5-VL text / Qwen3 /
    Qwen3-MoE / Qwen3-VL text / Llama / Phi-3 / Gemma 2 / Gemma 3 / gpt-oss)."""

    architecture: str            # general.architecture: qwen2(vl), qwen25vl, qwen3, llama, ...
    n_layers: int                # {arch}.block_count
    hidden_size: int             # {arch}.embedding_length
    intermediate_size: int       # {arch}.feed_forward_length
    n_heads: int                 # {arch}.attention.head_count
    n_kv_heads: int              # {arch}.attention.head_count_kv
    head_dim: int                # {arch}.attention.key_length, else hidden_size // n_heads
    vocab_size: int              # rows of token_embd
    context_length: int          # {arch}.context_length
    rms_eps: float               # {arch}.attention.layer_norm_rms_epsilon
    rope_theta: float            # {arch}.rope.freq_base
    tie_embeddings: bool         # no `output.weight`: lm_head is token_embd
    qkv_bias: bool               # attn_q/k/v carry a bias (Qwen2 family)
    qk_norm: bool                # per-head RMSNorm on q and k (Qwen3: attn_q_norm / attn_k_norm)
    rope_interleaved: bool       # rotary pairs (2i, 2i+1) (llama GGUF) instead of NeoX (i, i+d/2)
    mrope_sections: tuple[int, ...] | None = None  # (t, h, w) frequency split, e.g. (16, 24, 24)
    mrope_interleaved: bool = False  # Qwen3-VL: streams take turns t, h, w (modelmath.rope)
    # Gemma 2, Gemma 3 and Phi-3 (defaults: the Qwen / Llama block)
    embedding_scale: float = 1.0       # embeddings are multiplied by sqrt(hidden_size)
    post_norms: bool = False           # RMSNorm of the attention and MLP outputs before the add
    activation: str = "silu"           # gated MLP's activation: silu or gelu_tanh
    attention_scale: float | None = None  # query scaling; None: 1/sqrt(head_dim)
    sliding_window: int | None = None  # keys a sliding layer sees, itself included
    sliding_layers: tuple[bool, ...] = ()  # per layer: does it slide? (empty: none does)
    attention_sinks: bool = False      # gpt-oss: blk.N.attn_sinks.weight, one logit per head
    output_bias: bool = False          # gpt-oss: blk.N.attn_output.bias
    ffn_norm_tensor: str = "ffn_norm"  # the MLP's input norm (gpt-oss: post_attention_norm)
    rope_theta_local: float | None = None  # the sliding layers' rotary base
    rope_linear_factor: float = 1.0    # global layers' positions are divided by it
    final_logit_softcap: float | None = None  # logits = cap * tanh(logits / cap)
    attn_logit_softcap: float | None = None   # Gemma 2: scores = cap * tanh(scores / cap)
    fused_projections: bool = False    # Phi-3: attn_qkv = q|k|v and ffn_up = gate|up, as stored
    # LongRoPE (Phi-3.5, Phi-3 128k, Phi-4-mini): frequency j is divided by factor j of one set
    rope_factors_short: tuple[float, ...] | None = None  # rope_factors_short.weight [R/2]
    rope_factors_long: tuple[float, ...] | None = None   # rope_factors_long.weight [R/2]
    rope_original_context: int | None = None  # LongRoPE's rope.scaling.original_context_length
    rope_attention_factor: float = 1.0  # cos, sin times it (LongRoPE's, YaRN's)
    rope_yarn: YarnScaling | None = None  # YaRN's frequencies (its attention factor above)
    # {arch}.rope.dimension_count when below head_dim (Phi-4-mini turns 3/4 of each head)
    partial_rope_dims: int | None = None
    # mixture of experts (Qwen3-MoE): each block's MLP is `experts` gated MLPs of width
    # expert_intermediate_size, of which a router picks `experts_used` per token
    experts: int = 0                   # {arch}.expert_count; 0: a dense MLP
    experts_used: int = 0              # {arch}.expert_used_count
    expert_intermediate_size: int = 0  # {arch}.expert_feed_forward_length
    expert_weights_norm: bool = False  # the chosen experts' weights are scaled to sum to 1
    # "softmax": over all experts, then the top k (Qwen3-MoE); "top_k_softmax": the top k
    # logits, then a softmax over them (gpt-oss)
    expert_gating: str = "softmax"
    expert_biases: bool = False        # gpt-oss: the router and every expert carry a bias
    expert_glu: ClampedSwiGLU | None = None  # gpt-oss's; None: act(gate) * up, act = activation
    # Ollama's gpt-oss: ffn_gate_up_exps holds each expert's gate and up rows taking turns
    # (gate row j at 2j, up row j at 2j + 1), with its bias alike
    fused_gate_up_experts: bool = False

    def slides(self, layer: int) -> bool:
        """Does ``layer`` attend to the last ``sliding_window`` keys only?"""
        return bool(self.sliding_layers) and self.sliding_layers[layer]

    @property
    def rope_dims(self) -> int:
        """How many leading dims of each q/k head turn (R); the rest pass unrotated."""
        return self.partial_rope_dims or self.head_dim

    @property
    def mixture_of_experts(self) -> bool:
        return self.experts > 0

    @property
    def has_sliding_layers(self) -> bool:
        return any(self.sliding_layers)

    @property
    def local_rope(self) -> bool:
        """Do the sliding layers turn with a rotary base of their own (Gemma 3)?"""
        return self.has_sliding_layers and self.rope_theta_local is not None


@dataclass(frozen=True)
class VisionConfig:
    """A vision tower, from either GGUF layout: Qwen2.5-VL's windowed tower, Qwen3-VL's
    (learned positions, DeepStack), or Gemma 3's SigLIP tower with its average-pool
    projector (``tower == "siglip"``: no windows, no rotary, no temporal patch; the window
    and rotary fields then hold neutral values)."""

    layout: str                  # "inline" (Ollama, one file) or "projector" (llama.cpp mmproj)
    n_layers: int
    hidden_size: int
    intermediate_size: int       # read from the shape of the first block's ffn_up
    n_heads: int
    num_channels: int
    patch_size: int
    spatial_merge_size: int
    temporal_patch_size: int
    window_size: int
    eps: float
    rope_theta: float
    fullatt_block_indexes: tuple[int, ...]
    out_hidden_size: int         # the text decoder's hidden size (merger output)
    tower: str = "qwen25vl"      # "qwen25vl", "qwen3vl" or "siglip" (Gemma 3)
    image_size: int = 0          # SigLIP: every image is resized to this square
    tokens_per_image: int = 0    # SigLIP: pooled tokens per image (mm_tokens_per_image)
    # Qwen3-VL: learned positions, LayerNorm blocks with a GELU MLP, no windows, DeepStack
    position_side: int = 0       # the learned position table holds side x side cells
    deepstack_layers: tuple[int, ...] = ()  # blocks whose merged output the k-th decoder
    #                                         layer adds at the image rows (k = 0, 1, ...)

    @property
    def siglip(self) -> bool:
        return self.tower == "siglip"


@dataclass(frozen=True)
class SpecialTokens:
    """Special token ids from the GGUF (never typed as numbers in code)."""

    bos: int | None = None
    eos: int | None = None
    eos_ids: tuple[int, ...] = ()        # tokenizer.ggml.eos_token_ids, when present
    pad: int | None = None
    add_bos: bool = False
    image_pad: int | None = None         # <|image_pad|> (Gemma 3: <image_soft_token>)
    vision_start: int | None = None      # <|vision_start|> (Gemma 3: <start_of_image>)
    vision_end: int | None = None        # <|vision_end|> (Gemma 3: <end_of_image>)
    video_pad: int | None = None         # <|video_pad|>, for a tower that reads video


@dataclass(frozen=True)
class ModelConfig:
    """Everything parsed from one model (and its projector), checked against its tensors."""

    architecture: str
    text: TextConfig
    vision: VisionConfig | None
    special: SpecialTokens
    chat_template: str | None
    name: str | None                      # general.name
    parameter_count: int                  # from the tensors (text + vision)
    parameter_size: str                   # as `ollama show` prints it, e.g. "494.03M"
    quantization: str                     # e.g. "Q4_K_M" (general.file_type) or derived
    assumed: tuple[str, ...] = field(default=())  # metadata keys absent and defaulted
