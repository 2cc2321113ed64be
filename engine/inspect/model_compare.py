"""Two models, one text: both teacher-forced through the fp32 reference, each token's
log-probability under either model side by side, the largest disagreements marked.

The models must share a vocabulary (the same ids for the same text): a second model of the
store, or the same weights quantized another way. ``compare_candidates`` says which of the
store's models do, and why the others cannot be compared.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import LanternError
from engine.gguf import GGUFModel
from engine.gguf.model import open_model
from engine.gguf.vocabulary import vocabulary_signature
from engine.inspect.inspection import InspectionCancelled, Progress, next_logprobs
from engine.reference import forward
from engine.store import Store


class ComparisonError(LanternError):
    """Two models that cannot be compared on one text."""


@dataclass(frozen=True)
class ModelComparison:
    names: tuple[str, str]
    ids: tuple[int, ...]            # the text [S]
    tokens: tuple[str, ...]         # display text [S]
    logprobs: np.ndarray            # float64 [2, S - 1]: row r's log-prob of ids[r + 1]
    marked: tuple[int, ...]         # token indices (1..S-1) of the largest |Δ|, largest first
    marked_from: int = 1            # the first token index ``marked`` was chosen from

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


@dataclass(frozen=True)
class Candidate:
    """A store model offered for comparison; ``reason`` says why it cannot be ("": it can)."""

    name: str
    path: Path
    reason: str = ""


def compare_candidates(store: Store, current: Path, current_name: str) -> list[Candidate]:
    """The store's other models (another file than ``current``), each marked with whether
    it shares ``current``'s vocabulary."""
    signature = vocabulary_signature(current)
    here = Path(current).resolve()
    return [Candidate(m.name.display, m.model_path, _mismatch(m.model_path, signature,
                                                                current_name))
            for m in store.list() if m.model_path.resolve() != here]


def _mismatch(path: Path, signature: tuple, current_name: str) -> str:
    try:
        same = vocabulary_signature(path) == signature
    except (LanternError, OSError) as error:
        return f"its GGUF could not be read ({error})"
    return "" if same else (f"its vocabulary differs from {current_name}'s (token list or "
                            "special ids), so the same text is other token ids")


def teacher_forced(model: GGUFModel, ids: Sequence[int],
                   on_layer: Callable[[int], None] | None = None) -> np.ndarray:
    """Every token's log-probability given the ones before it [S - 1] (fp32 reference)."""
    ids = np.asarray(ids, dtype=np.int64)
    return next_logprobs(forward(model, ids, on_layer=on_layer).logits, ids)


def compare_models(
    a: GGUFModel, b: GGUFModel, ids: Sequence[int], tokens: Sequence[str],
    names: tuple[str, str], marked: int = 5, *, marked_from: int = 1,
    progress: Progress | None = None, cancel: threading.Event | None = None,
) -> ModelComparison:
    """Both models over ``ids``; the largest disagreements are marked among the tokens from
    index ``marked_from`` on (an answer's, where a chat template's markup comes before it
    and neither model predicts that). ``progress(stage, fraction)`` after every block, and
    InspectionCancelled once ``cancel`` is set."""
    for model, name in ((a, names[0]), (b, names[1])):
        if max(ids) >= model.config.text.vocab_size:
            raise ComparisonError(f"token id {max(ids)} is outside {name}'s vocabulary of "
                             f"{model.config.text.vocab_size}")
    report = progress or (lambda stage, fraction: None)
    rows = []
    for k, (model, name) in enumerate(((a, names[0]), (b, names[1]))):
        n = model.config.text.n_layers

        def on_layer(i: int, k: int = k, n: int = n, name: str = name) -> None:
            if cancel is not None and cancel.is_set():
                raise InspectionCancelled("the comparison was cancelled")
            report(f"{name}: block {i + 1} of {n}", (k + (i + 1) / n) / 2)

        rows.append(teacher_forced(model, ids, on_layer))
    logprobs = np.stack(rows)
    skipped = max(marked_from, 1) - 1
    delta = np.abs(logprobs[1] - logprobs[0])[skipped:]
    order = np.argsort(-delta, kind="stable")[:marked] + skipped
    return ModelComparison(names, tuple(int(i) for i in ids), tuple(tokens), logprobs,
                           tuple(int(r) + 1 for r in order), skipped + 1)


def compare_with(a: GGUFModel, name_a: str, other: Candidate, ids: Sequence[int],
                 piece: Callable[[int], str], *, marked_from: int = 1,
                 progress: Progress | None = None,
                 cancel: threading.Event | None = None) -> ModelComparison:
    """``a`` against a store model over ``ids`` (the other model is opened here)."""
    if other.reason:
        raise ComparisonError(f"{other.name} cannot be compared with {name_a}: {other.reason}")
    return compare_models(a, open_model(other.path), ids, [piece(i) for i in ids],
                          (name_a, other.name), marked_from=marked_from, progress=progress,
                          cancel=cancel)
