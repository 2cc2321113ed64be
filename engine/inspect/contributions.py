"""Direct contributions: one token's logit split into the embedding, every attention head
and every MLP of one position.

The residual stream of a pre-norm decoder is a plain sum, h_L = embedding +
sum over layers of (attention + MLP), and each layer's attention is a sum over heads
(head h's output through its own columns of o_proj). Only the final RMSNorm is not linear;
frozen at this position's own scale s = sqrt(mean(h_L^2) + eps) it is, so each part p
contributes (lm_head[token] * norm_weight) . p / s and the parts add up to the logit. What
they leave ("bias") is float rounding only: Qwen2's lm_head and o_proj have no bias. The
margin over the runner-up is split the same way, along lm_head[token] - lm_head[runner_up].
Gemma 2 and 3 norm each layer's attention output before the add; frozen at the row's own
scale the same way, that norm passes the heads on as a sum (the reference's probe records
them so). A model that soft-caps its logits (Gemma 2) is split before the cap, which is not
linear: the totals are the logit and the margin lm_head gives, which the cap bends into the
ones sampled (it keeps their order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.reference.text import AttentionProbe
from engine.reference.weights import ReferenceWeights


@dataclass(frozen=True)
class Split:
    """One scalar (a logit, or a margin between two logits) split into parts."""

    embedding: float
    attention: np.ndarray   # float64 [n_layers, n_heads]
    mlp: np.ndarray         # float64 [n_layers]
    bias: float             # total - sum of the parts: the linearisation's residual
    total: float

    def to_json(self) -> dict:
        return {"embedding": self.embedding,
                "layers": [{"attention": heads.tolist(), "mlp": float(mlp)}
                           for heads, mlp in zip(self.attention, self.mlp, strict=True)],
                "bias": self.bias, "total": self.total}


@dataclass(frozen=True)
class Contributions:
    position: int
    token: int          # the token explained: the one that came next, else the top-1
    runner_up: int      # the best other token
    pieces: tuple[str, str]  # their display text
    logit: Split
    margin: Split       # logit[token] - logit[runner_up]
    softcap: float | None = None  # the cap the split comes before (Gemma 2); None: no cap

    def to_json(self) -> dict:
        return ({"token": self.token, "piece": self.pieces[0]} | self.logit.to_json()
                | {"runner_up": self.runner_up, "runner_up_piece": self.pieces[1],
                   "margin": self.margin.to_json()})


def contributions(
    probe: AttentionProbe, hidden_states: list[np.ndarray], logits: np.ndarray,
    weights: ReferenceWeights, piece: Callable[[int], str], token: int | None = None,
) -> Contributions:
    """Split row ``probe.rows[0]`` of a reference forward run with ``probe.parts``.

    hidden_states: the forward's n_layers + 1 of [S, H]; logits [S, V]; piece: a token's
    text; token: the token to explain (default: the row's top-1)."""
    row = int(probe.rows[0])
    final = hidden_states[-1][row].astype(np.float64)  # [H]
    scale = np.sqrt(np.mean(final * final) + float(weights.config.rms_eps))
    row_logits = logits[row].astype(np.float64)
    token = int(row_logits.argmax()) if token is None else int(token)
    others = row_logits.copy()
    others[token] = -np.inf
    runner_up = int(others.argmax())
    head = weights.lm_head()
    gain = weights.output_norm().astype(np.float64) / scale  # [H]
    embedding = hidden_states[0][row].astype(np.float64)
    heads = np.stack([h[:, 0] for h in probe.heads]).astype(np.float64)  # [L, n_heads, H]
    mlps = np.stack([m[0] for m in probe.mlps]).astype(np.float64)       # [L, H]

    def logit(t: int) -> float:
        """Token t's logit as lm_head gives it (before a soft cap, which is not linear)."""
        if not weights.config.final_logit_softcap:
            return float(row_logits[t])
        return float((head[t].astype(np.float64) * gain) @ final)

    def split(direction: np.ndarray, total: float) -> Split:
        d = direction.astype(np.float64) * gain
        parts = (float(embedding @ d), heads @ d, mlps @ d)
        return Split(parts[0], parts[1], parts[2],
                     total - parts[0] - float(parts[1].sum()) - float(parts[2].sum()), total)

    return Contributions(
        position=row, token=token, runner_up=runner_up, pieces=(piece(token), piece(runner_up)),
        logit=split(head[token], logit(token)),
        margin=split(head[token].astype(np.float64) - head[runner_up],
                     logit(token) - logit(runner_up)),
        softcap=weights.config.final_logit_softcap,
    )
