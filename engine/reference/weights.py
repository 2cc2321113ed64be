"""De-quantized decoder weights for the numpy reference, read by canonical GGUF name.

Every value comes from ``gguf.quants.dequantize`` (through ``TensorInfo``), so the reference
sees exactly the numbers stored in the file, cast to the precision the caller asks for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from gguf.quants import dequantize
from numpy.typing import DTypeLike

if TYPE_CHECKING:
    from engine.gguf import GGUFModel
    from engine.gguf.config import TextConfig
    from engine.gguf.reader import TensorInfo


@dataclass(frozen=True)
class Experts:
    """A mixture-of-experts block's 3-D tensors [E, n, k]; ``matrix`` de-quantizes one
    expert's matrix when a token chooses it (the whole stack would be the file's size again).
    The biases (gpt-oss) are small: read whole."""

    gate: TensorInfo  # [E, I, H]; with ``fused``, [E, 2I, H], gate and up rows alternating
    up: TensorInfo    # [E, I, H]; with ``fused``, the same tensor as gate
    down: TensorInfo  # [E, H, I]
    dtype: np.dtype
    gate_bias: np.ndarray | None = None  # [E, I]  when config.expert_biases
    up_bias: np.ndarray | None = None    # [E, I]
    down_bias: np.ndarray | None = None  # [E, H]
    fused: bool = False                  # config.fused_gate_up_experts (Ollama's gpt-oss)

    def matrix(self, tensor: TensorInfo, expert: int) -> np.ndarray:
        rows = dequantize(tensor.raw[expert], tensor.ggml_type).reshape(tensor.shape[1:])
        return rows.astype(self.dtype, copy=False)

    def gate_up(self, expert: int) -> tuple[np.ndarray, np.ndarray]:
        """One expert's gate and up matrices [I, H]."""
        if self.fused:
            rows = self.matrix(self.gate, expert)
            return rows[0::2], rows[1::2]
        return self.matrix(self.gate, expert), self.matrix(self.up, expert)


@dataclass(frozen=True)
class LayerWeights:
    """One decoder block; numpy order (out-first), H hidden, D head_dim, I ffn width."""

    attn_norm: np.ndarray                   # [H]
    attn_q: np.ndarray                      # [n_heads * D, H]
    attn_k: np.ndarray                      # [n_kv_heads * D, H]
    attn_v: np.ndarray                      # [n_kv_heads * D, H]
    attn_output: np.ndarray                 # [H, n_heads * D]
    ffn_norm: np.ndarray                    # [H]
    ffn_gate: np.ndarray | None = None      # [I, H]            unless config.experts
    ffn_up: np.ndarray | None = None        # [I, H]
    ffn_down: np.ndarray | None = None      # [H, I]
    ffn_gate_inp: np.ndarray | None = None  # [E, H]            the router, with experts
    ffn_gate_inp_bias: np.ndarray | None = None  # [E]          with config.expert_biases
    experts: Experts | None = None
    attn_q_bias: np.ndarray | None = None   # [n_heads * D]     when config.qkv_bias
    attn_k_bias: np.ndarray | None = None   # [n_kv_heads * D]
    attn_v_bias: np.ndarray | None = None   # [n_kv_heads * D]
    attn_q_norm: np.ndarray | None = None   # [D]               when config.qk_norm
    attn_k_norm: np.ndarray | None = None   # [D]
    post_attention_norm: np.ndarray | None = None  # [H]        when config.post_norms
    post_ffw_norm: np.ndarray | None = None        # [H]
    attn_sinks: np.ndarray | None = None    # [n_heads]         when config.attention_sinks
    attn_output_bias: np.ndarray | None = None  # [H]           when config.output_bias


# LayerWeights field -> tensor name under "blk.{i}."; the only place GGUF names are spelled.
LAYER_TENSORS: dict[str, str] = {
    "attn_norm": "attn_norm.weight",
    "attn_q": "attn_q.weight",
    "attn_k": "attn_k.weight",
    "attn_v": "attn_v.weight",
    "attn_output": "attn_output.weight",
    "ffn_norm": "ffn_norm.weight",
    "ffn_gate": "ffn_gate.weight",
    "ffn_up": "ffn_up.weight",
    "ffn_down": "ffn_down.weight",
    "attn_q_bias": "attn_q.bias",
    "attn_k_bias": "attn_k.bias",
    "attn_v_bias": "attn_v.bias",
    "attn_q_norm": "attn_q_norm.weight",
    "attn_k_norm": "attn_k_norm.weight",
    "post_attention_norm": "post_attention_norm.weight",
    "post_ffw_norm": "post_ffw_norm.weight",
    "attn_sinks": "attn_sinks.weight",
    "attn_output_bias": "attn_output.bias",
}
TOKEN_EMBD = "token_embd.weight"
OUTPUT_NORM = "output_norm.weight"
OUTPUT = "output.weight"
QKV_BIAS = ("attn_q_bias", "attn_k_bias", "attn_v_bias")  # present when config.qkv_bias
QK_NORM = ("attn_q_norm", "attn_k_norm")                 # present when config.qk_norm
POST_NORMS = ("post_attention_norm", "post_ffw_norm")    # present when config.post_norms
SINKS = ("attn_sinks",)                                  # present when config.attention_sinks
OUTPUT_BIAS = ("attn_output_bias",)                      # present when config.output_bias
FUSED = ("attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up")  # stored fused (Phi-3)
DENSE_MLP = ("ffn_gate", "ffn_up", "ffn_down")  # absent with experts


class ReferenceWeights:
    """The weights a forward pass reads, de-quantized on demand.

    With ``keep=False`` nothing is held between calls, so peak memory stays near one block
    plus the output matrix (a 1.5B model is ~6 GB in fp32); ``keep=True`` pays that memory
    once so that repeated forwards (greedy decoding, many prompts) skip de-quantization.
    Shapes and the tensor inventory were checked by ``open_model``.
    """

    def __init__(self, model: GGUFModel, dtype: DTypeLike = np.float32, keep: bool = False):
        self.config: TextConfig = model.config.text
        self.dtype = np.dtype(dtype)
        self._model = model
        self._keep = keep
        self._held: dict[str, np.ndarray] = {}

    def tensor(self, name: str) -> np.ndarray:
        """De-quantized tensor ``name`` in ``self.dtype``."""
        if name in self._held:
            return self._held[name]
        value = self._model.tensors[name].dequantize().astype(self.dtype, copy=False)
        if self._keep:
            self._held[name] = value
        return value

    def embed(self, ids: np.ndarray) -> np.ndarray:
        """Embedding rows of ``ids`` [S] -> [S, H]; only those rows are de-quantized."""
        cfg = self.config
        if ids.size and (ids.min() < 0 or ids.max() >= cfg.vocab_size):
            raise ValueError(f"token ids must lie in [0, {cfg.vocab_size}), got {ids.tolist()}")
        if self._keep:
            return self.tensor(TOKEN_EMBD)[ids]
        info = self._model.tensors[TOKEN_EMBD]
        rows = dequantize(info.raw[ids], info.ggml_type)  # raw: [V, row_bytes] -> [S, H]
        return rows.reshape(len(ids), cfg.hidden_size).astype(self.dtype, copy=False)

    def layer(self, i: int) -> LayerWeights:
        cfg = self.config
        skip = ((() if cfg.qkv_bias else QKV_BIAS) + (() if cfg.qk_norm else QK_NORM)
                + (() if cfg.post_norms else POST_NORMS)
                + (() if cfg.attention_sinks else SINKS)
                + (() if cfg.output_bias else OUTPUT_BIAS)
                + (FUSED if cfg.fused_projections else ())
                + (DENSE_MLP if cfg.mixture_of_experts else ()))
        names = LAYER_TENSORS | {"ffn_norm": f"{cfg.ffn_norm_tensor}.weight"}
        weights = {
            field: self.tensor(f"blk.{i}.{name}")
            for field, name in names.items()
            if field not in skip
        }
        if cfg.fused_projections:  # Phi-3: q|k|v in attn_qkv, gate|up in ffn_up, as stored
            q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
            weights["attn_q"], weights["attn_k"], weights["attn_v"] = np.split(
                self.tensor(f"blk.{i}.attn_qkv.weight"), [q, q + kv])
            weights["ffn_gate"], weights["ffn_up"] = np.split(
                self.tensor(f"blk.{i}.ffn_up.weight"), 2)
        if cfg.mixture_of_experts:
            tensors = self._model.tensors
            weights["ffn_gate_inp"] = self.tensor(f"blk.{i}.ffn_gate_inp.weight")
            parts = ("gate_up",) * 2 if cfg.fused_gate_up_experts else ("gate", "up")
            biases = {}
            if cfg.expert_biases:
                weights["ffn_gate_inp_bias"] = self.tensor(f"blk.{i}.ffn_gate_inp.bias")
                biases = {f"{part}_bias": self.tensor(f"blk.{i}.ffn_{name}_exps.bias")
                          for part, name in zip(("gate", "up", "down"), (*parts, "down"),
                                                strict=True)}
                if cfg.fused_gate_up_experts:  # the rows of gate and up take turns
                    biases["gate_bias"] = biases["gate_bias"][:, 0::2]
                    biases["up_bias"] = biases["up_bias"][:, 1::2]
            weights["experts"] = Experts(*(tensors[f"blk.{i}.ffn_{name}_exps.weight"]
                                           for name in (*parts, "down")), self.dtype,
                                         **biases, fused=cfg.fused_gate_up_experts)
        return LayerWeights(**weights)

    def output_norm(self) -> np.ndarray:
        return self.tensor(OUTPUT_NORM)  # [H]

    def lm_head(self) -> np.ndarray:
        return self.tensor(TOKEN_EMBD if self.config.tie_embeddings else OUTPUT)  # [V, H]
