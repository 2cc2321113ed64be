"""A mixture-of-experts MLP as ONNX nodes (Qwen3-MoE, gpt-oss; ARCHITECTURE.md §3, Experts).

    probs      = softmax(x @ router.T)                 # [.., E]
    w, ids     = top_k(probs)                          # [.., K]; w / sum(w) when renormalised
    y          = sum_s w[s] * down_ids[s](silu(gate_ids[s](x)) * up_ids[s](x))

gpt-oss ranks the logits (router bias added) and takes the softmax of the k chosen; each
expert's gate, up and down add that expert's bias (gathered by ids), and the activation is
the clamped SwiGLU (engine.gguf.config.ClampedSwiGLU):

    g = min(gate, limit);  u = clip(up, -limit, limit);  act = (u + 1) * g * sigmoid(alpha g)

The experts' matmuls are lantern.GgufMoE over the file's 3-D tensors: each token's rows go
to the experts it chose, grouped inside the op so that a step reads only those experts'
bytes and the tensors stay where the memory map holds them. The router's choice (``ids``,
``w``) is returned with the output, so a graph can expose it (the inspect panel's experts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine import native
from engine.gguf.config import ClampedSwiGLU
from engine.gguf.repack import PackedWeight
from engine.graph.builder import GraphBuilder
from engine.graph.linear import EXACT_MODE, FAST_MODE, GgufWeight


@dataclass(frozen=True)
class ExpertWeights:
    """One of a layer's 3-D expert tensors: ``matrix`` is one expert's [n, k] shape over the
    bytes of all ``count`` of them (raw [count * n, row_bytes], expert e's rows at e * n)."""

    matrix: GgufWeight
    count: int


@dataclass(frozen=True)
class ExpertBiases:
    """Each expert's biases (gpt-oss), one row per expert."""

    router: np.ndarray  # [E]
    gate: np.ndarray    # [E, I]
    up: np.ndarray      # [E, I]
    down: np.ndarray    # [E, H]


@dataclass(frozen=True)
class MoEWeights:
    """gate and up, or (Ollama's gpt-oss) gate_up whose rows alternate: gate row j at 2j,
    up row j at 2j + 1."""

    router: PackedWeight | GgufWeight  # [E, H]
    gate: ExpertWeights | None    # [E, I, H]
    up: ExpertWeights | None      # [E, I, H]
    down: ExpertWeights           # [E, H, I]
    biases: ExpertBiases | None = None
    gate_up: ExpertWeights | None = None  # [E, 2I, H]


@dataclass(frozen=True)
class Routing:
    """How a token picks its experts: softmax over all, the top ``used``, their weights
    renormalised to sum to one when ``normalize``; with ``top_k_first`` the top ``used``
    logits, then a softmax over them. ``glu``: gpt-oss's clamped SwiGLU instead of SiLU."""

    used: int
    normalize: bool
    top_k_first: bool = False
    glu: ClampedSwiGLU | None = None


@dataclass(frozen=True)
class MoEOutput:
    y: str        # [1, S, H]
    ids: str      # int64 [1, S, K]: the experts each token chose, best first
    weights: str  # [1, S, K]: what each chosen expert's output is multiplied by


def moe(g: GraphBuilder, x: str, w: MoEWeights, routing: Routing, project: Callable,
        name: str, *, fast: bool) -> MoEOutput:
    """The layer over x [1, S, H]; ``project`` multiplies by the router (a plain linear)."""
    b = w.biases
    logits = project(x, w.router, f"{name}.router", bias=None if b is None else b.router)
    k = g.add_initializer(f"{name}.top_k", np.array([routing.used], np.int64))
    if routing.top_k_first:  # [1, S, E] -> the top K logits -> their softmax
        top, ids = g.add_node("TopK", [logits, k], [f"{name}/top_logits", f"{name}/expert_ids"],
                              axis=-1, largest=1, sorted=1)
        [weights] = g.add_node("Softmax", [top], [f"{name}/expert_weights"], axis=-1)
    else:
        [probs] = g.add_node("Softmax", [logits], [f"{name}/router_probs"], axis=-1)
        weights, ids = g.add_node("TopK", [probs, k],
                                  [f"{name}/expert_weights", f"{name}/expert_ids"],
                                  axis=-1, largest=1, sorted=1)
    if routing.normalize:
        last = g.add_initializer(f"{name}.last_axis", np.array([-1], np.int64))
        [total] = g.add_node("ReduceSum", [weights, last], [f"{name}/weights_sum"], keepdims=1)
        [weights] = g.add_node("Div", [weights, total], [f"{name}/expert_weights_normed"])
    if w.gate_up is None:
        gate = expert_matmul(g, x, w.gate, ids, f"{name}.gate", fast=fast)  # [1, S, K, I]
        up = expert_matmul(g, x, w.up, ids, f"{name}.up", fast=fast)
    else:
        both = expert_matmul(g, x, w.gate_up, ids, f"{name}.gate_up", fast=fast)  # [.., K, 2I]
        gate, up = (every_other_column(g, both, first, f"{name}.{part}")
                    for first, part in ((0, "gate"), (1, "up")))
    if b is not None:
        gate = add_expert_bias(g, gate, b.gate, ids, f"{name}.gate")
        up = add_expert_bias(g, up, b.up, ids, f"{name}.up")
    act = (swiglu(g, gate, up, name) if routing.glu is None
           else clamped_swiglu(g, gate, up, routing.glu, name))
    down = expert_matmul(g, act, w.down, ids, f"{name}.down", fast=fast)  # [1, S, K, H]
    if b is not None:
        down = add_expert_bias(g, down, b.down, ids, f"{name}.down")
    axis = g.add_initializer(f"{name}.slot_axis", np.array([-1], np.int64))
    [scale] = g.add_node("Unsqueeze", [weights, axis], [f"{name}/weights_column"])
    [down] = g.add_node("Mul", [down, scale], [f"{name}/weighted"])
    slots = g.add_initializer(f"{name}.slots_axis", np.array([-2], np.int64))
    [y] = g.add_node("ReduceSum", [down, slots], [f"{name}/sum"], keepdims=0)  # [1, S, H]
    return MoEOutput(y, ids, weights)


def expert_matmul(g: GraphBuilder, x: str, w: ExpertWeights, ids: str, name: str, *,
                  fast: bool) -> str:
    """lantern.GgufMoE: x [.., k] (or [.., K, k]) by expert ids [.., K] -> [.., K, n]."""
    m = w.matrix
    fast = fast and native.custom_ops().reads(m.ggml_type, m.k, fast=True)
    raw = g.add_file_bytes(f"{name}.gguf", m.raw)
    [y] = g.add_node(native.MOE_OP, [x, raw, ids], [f"{name}/GgufMoE"], domain=native.DOMAIN,
                     type=int(m.ggml_type), k=m.k, n=m.n,
                     mode=FAST_MODE if fast else EXACT_MODE, experts=w.count)
    return y


def every_other_column(g: GraphBuilder, y: str, first: int, name: str) -> str:
    """Columns first, first + 2, .. of y's last axis."""
    start, end, axis, step = (g.add_initializer(f"{name}.every_other_{label}",
                                                np.array([v], np.int64))
                              for label, v in (("start", first), ("end", 2**62), ("axis", -1),
                                               ("step", 2)))
    [y] = g.add_node("Slice", [y, start, end, axis, step], [f"{name}/columns"])
    return y


def add_expert_bias(g: GraphBuilder, y: str, bias: np.ndarray, ids: str, name: str) -> str:
    """y [.., K, n] plus the bias row [n] of the expert in each slot (bias [E, n])."""
    table = g.add_initializer(f"{name}.expert_bias", bias.astype(np.float32))
    [rows] = g.add_node("Gather", [table, ids], [f"{name}/expert_bias"], axis=0)  # [.., K, n]
    [y] = g.add_node("Add", [y, rows], [f"{name}/biased"])
    return y


def swiglu(g: GraphBuilder, gate: str, up: str, name: str) -> str:
    """silu(gate) * up."""
    [sig] = g.add_node("Sigmoid", [gate], [f"{name}/sigmoid"])
    [act] = g.add_node("Mul", [gate, sig], [f"{name}/silu"])
    [act] = g.add_node("Mul", [act, up], [f"{name}/silu_up"])
    return act


def clamped_swiglu(g: GraphBuilder, gate: str, up: str, glu: ClampedSwiGLU, name: str) -> str:
    """(clip(up, -limit, limit) + 1) * g * sigmoid(alpha g), g = min(gate, limit)."""
    def scalar(label: str, value: float) -> str:
        return g.add_initializer(f"{name}.{label}", np.array(value, np.float32))

    limit, low, alpha = scalar("glu_limit", glu.limit), scalar("glu_low", -glu.limit), \
        scalar("glu_alpha", glu.alpha)
    [gate] = g.add_node("Min", [gate, limit], [f"{name}/gate_clamped"])
    [up] = g.add_node("Clip", [up, low, limit], [f"{name}/up_clamped"])
    [scaled] = g.add_node("Mul", [gate, alpha], [f"{name}/alpha_gate"])
    [sig] = g.add_node("Sigmoid", [scaled], [f"{name}/sigmoid"])
    [act] = g.add_node("Mul", [gate, sig], [f"{name}/glu"])
    [up] = g.add_node("Add", [up, scalar("one", 1.0)], [f"{name}/up_plus_one"])
    [act] = g.add_node("Mul", [act, up], [f"{name}/glu_up"])
    return act
