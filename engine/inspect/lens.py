"""The logit lens: what the model would predict if it stopped after a given layer.

Each hidden state of one position (after the embeddings, after every block) goes through
the model's own final norm and output matrix, lm_head(final_norm(h)); the last row is
therefore the model's real next-token distribution.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.reference.text import output_logits
from engine.reference.weights import ReferenceWeights


@dataclass(frozen=True)
class LensToken:
    id: int
    token: str      # the token's text as shown to a person
    logit: float
    prob: float     # softmax over the whole vocabulary of this layer's lens logits


@dataclass(frozen=True)
class LensRow:
    layer: int                      # 0: after the embeddings, i: after block i - 1
    top: tuple[LensToken, ...]      # sorted by logit, best first
    entropy: float                  # nats

    def to_json(self) -> dict:
        return {"layer": self.layer, "entropy": self.entropy,
                "top": [{"id": t.id, "token": t.token, "logit": t.logit, "prob": t.prob}
                        for t in self.top]}


def lens_logits(states: np.ndarray, weights: ReferenceWeights) -> np.ndarray:
    """states [L + 1, H] of one position -> lens logits [L + 1, V]."""
    return output_logits(states, weights)


def logit_lens(logits: np.ndarray, piece: Callable[[int], str], k: int = 5) -> tuple[LensRow, ...]:
    """Top-k of each row of lens logits [L + 1, V]."""
    rows = []
    for layer, row in enumerate(logits.astype(np.float64)):
        log_probs = row - row.max()
        log_probs -= np.log(np.exp(log_probs).sum())
        probs = np.exp(log_probs)
        best = np.argsort(-row, kind="stable")[:k]
        rows.append(LensRow(
            layer=layer,
            top=tuple(LensToken(int(i), piece(int(i)), float(row[i]), float(probs[i]))
                      for i in best),
            entropy=float(-(probs * log_probs).sum()),
        ))
    return tuple(rows)
