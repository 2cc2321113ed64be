"""Two models, one text: both teacher-forced through the fp32 reference, each token's
log-probability under either model side by side, the largest disagreements marked.

The models must share a vocabulary (the same ids for the same text): a second model of the
store, or the same weights quantized another way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import LanternError
from engine.gguf import GGUFModel
from engine.inspect.inspection import next_logprobs
from engine.reference import forward


class ComparisonError(LanternError):
    """Two models that cannot be compared on one text."""


@dataclass(frozen=True)
class ModelComparison:
    names: tuple[str, str]
    ids: tuple[int, ...]            # the text [S]
    tokens: tuple[str, ...]         # display text [S]
    logprobs: np.ndarray            # float64 [2, S - 1]: row r's log-prob of ids[r + 1]
    marked: tuple[int, ...]         # token indices (1..S-1) of the largest |Δ|, largest first

    @property
    def delta(self) -> np.ndarray:
        """log p_b - log p_a of every predicted token [S - 1]."""
        return self.logprobs[1] - self.logprobs[0]

    def to_json(self) -> dict:
        delta = self.delta
        return {"models": list(self.names), "ids": list(self.ids),
                "tokens": [{"position": r + 1, "id": self.ids[r + 1],
                            "token": self.tokens[r + 1], "logprob_a": float(a),
                            "logprob_b": float(b), "delta": float(d),
                            "marked": r + 1 in self.marked}
                           for r, (a, b, d) in enumerate(zip(*self.logprobs, delta,
                                                             strict=True))],
                "largest": list(self.marked),
                "mean_abs_delta": float(np.abs(delta).mean()) if len(delta) else 0.0}


def teacher_forced(model: GGUFModel, ids: Sequence[int]) -> np.ndarray:
    """Every token's log-probability given the ones before it [S - 1] (fp32 reference)."""
    ids = np.asarray(ids, dtype=np.int64)
    return next_logprobs(forward(model, ids).logits, ids)


def compare_models(
    a: GGUFModel, b: GGUFModel, ids: Sequence[int], tokens: Sequence[str],
    names: tuple[str, str], marked: int = 5,
) -> ModelComparison:
    for model, name in ((a, names[0]), (b, names[1])):
        if max(ids) >= model.config.text.vocab_size:
            raise ComparisonError(f"token id {max(ids)} is outside {name}'s vocabulary of "
                             f"{model.config.text.vocab_size}")
    logprobs = np.stack([teacher_forced(a, ids), teacher_forced(b, ids)])
    order = np.argsort(-np.abs(logprobs[1] - logprobs[0]), kind="stable")[:marked]
    return ModelComparison(names, tuple(int(i) for i in ids), tuple(tokens), logprobs,
                           tuple(int(r) + 1 for r in order))
