"""Two models, one text: both teacher-forced through the fp32 reference, each token's
log-probability under either model side by side, the largest disagreements marked.

The models must share a vocabulary (the same ids for the same text): a second model of the
store, or the same weights quantized another way. ``compare_candidates`` says which of the
store's models do, and why the others cannot be compared. A context with images is read by
each model through its own vision tower (engine/inspect/compare_images.py); the image rows
predict placeholders nobody reads, so they are left out of the marks and the mean.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import LanternError
from engine.gguf import GGUFModel
from engine.gguf.model import open_model
from engine.gguf.vocabulary import vocabulary_signature
from engine.inspect.attention import ImageGrid, image_grids
from engine.inspect.compare_images import ComparisonError, check_aligned, own_images
from engine.inspect.inspection import (
    InspectionCancelled,
    Progress,
    forward_context,
    next_logprobs,
)
from engine.store import LocalModel, Store
from engine.vision.preprocess import ImageInput


@dataclass(frozen=True)
class ModelComparison:
    names: tuple[str, str]
    ids: tuple[int, ...]            # the text [S]
    tokens: tuple[str, ...]         # display text [S]
    logprobs: np.ndarray            # float64 [2, S - 1]: row r's log-prob of ids[r + 1]
    marked: tuple[int, ...]         # token indices (1..S-1) of the largest |Δ|, largest first
    marked_from: int = 1            # the first token index ``marked`` was chosen from
    images: tuple[ImageGrid, ...] = ()  # the context's images, in order

    @property
    def delta(self) -> np.ndarray:
        """log p_b - log p_a of every predicted token [S - 1]."""
        return self.logprobs[1] - self.logprobs[0]

    @property
    def text(self) -> np.ndarray:
        """bool [S - 1]: row r predicts a text token (not one of an image's rows)."""
        return text_rows(len(self.ids), self.images)

    def to_json(self) -> dict:
        delta, text = self.delta, self.text
        return {"models": list(self.names), "ids": list(self.ids),
                "tokens": [{"position": r + 1, "id": self.ids[r + 1],
                            "token": self.tokens[r + 1], "logprob_a": float(a),
                            "logprob_b": float(b), "delta": float(d),
                            "marked": r + 1 in self.marked, "image": not bool(text[r])}
                           for r, (a, b, d) in enumerate(zip(*self.logprobs, delta,
                                                             strict=True))],
                "largest": list(self.marked),
                "images": [grid.to_json() for grid in self.images],
                "mean_abs_delta": float(np.abs(delta[text]).mean()) if text.any() else 0.0}


def text_rows(n: int, images: Sequence[ImageGrid]) -> np.ndarray:
    """bool [n - 1]: which rows of an n-token context predict a text token."""
    text = np.ones(max(n - 1, 0), dtype=bool)
    for grid in images:
        text[grid.start - 1:grid.stop - 1] = False
    return text


@dataclass(frozen=True)
class Candidate:
    """A store model offered for comparison; ``reason`` says why it cannot be ("": it can)."""

    name: str
    path: Path
    reason: str = ""
    projector: Path | None = None   # llama.cpp layout: the vision tower's file


def compare_candidates(store: Store, current: Path, current_name: str,
                       images: bool = False) -> list[Candidate]:
    """The store's other models (another file than ``current``), each marked with whether
    it shares ``current``'s vocabulary and, for a context with ``images``, has a vision
    tower."""
    signature = vocabulary_signature(current)
    here = Path(current).resolve()
    return [Candidate(m.name.display, m.model_path, _mismatch(m, signature, current_name,
                                                                images), m.projector_path)
            for m in store.list() if m.model_path.resolve() != here]


def _mismatch(model: LocalModel, signature: tuple, current_name: str, images: bool) -> str:
    try:
        same = vocabulary_signature(model.model_path) == signature
        sees = not images or open_model(model.model_path,
                                        model.projector_path).config.vision is not None
    except (LanternError, OSError) as error:
        return f"its GGUF could not be read ({error})"
    if not same:
        return (f"its vocabulary differs from {current_name}'s (token list or special ids), "
                "so the same text is other token ids")
    return "" if sees else "it has no vision tower, so it cannot read this context's image"


def teacher_forced(model: GGUFModel, context: PromptTokens,
                   on_layer: Callable[[int], None] | None = None) -> np.ndarray:
    """Every token's log-probability given the ones before it [S - 1] (fp32 reference),
    image rows filled in from ``context``."""
    return next_logprobs(forward_context(model, context, on_layer=on_layer).logits, context.ids)


def compare_models(
    a: GGUFModel, b: GGUFModel, ids: Sequence[int], tokens: Sequence[str],
    names: tuple[str, str], marked: int = 5, *, marked_from: int = 1,
    progress: Progress | None = None, cancel: threading.Event | None = None,
) -> ModelComparison:
    """Both models over ``ids``; the largest disagreements are marked among the tokens from
    index ``marked_from`` on (an answer's, where a chat template's markup comes before it
    and neither model predicts that). ``progress(stage, fraction)`` after every block, and
    InspectionCancelled once ``cancel`` is set."""
    text = PromptTokens.text(ids)
    return compare_contexts(a, b, (text, text), tokens, names, marked,
                            marked_from=marked_from, progress=progress, cancel=cancel)


def compare_contexts(
    a: GGUFModel, b: GGUFModel, contexts: tuple[PromptTokens, PromptTokens],
    tokens: Sequence[str], names: tuple[str, str], marked: int = 5, *,
    marked_from: int = 1, progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> ModelComparison:
    """``compare_models`` over each model's own context (one id sequence; the image rows,
    if any, from each model's vision tower, see ``own_images``)."""
    check_aligned(contexts, names)
    ids = contexts[0].ids
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

        rows.append(teacher_forced(model, contexts[k], on_layer))
    logprobs = np.stack(rows)
    images = image_grids(contexts[0])
    skipped = max(marked_from, 1) - 1
    eligible = np.flatnonzero(text_rows(len(ids), images)[skipped:]) + skipped
    delta = np.abs(logprobs[1] - logprobs[0])[eligible]
    order = eligible[np.argsort(-delta, kind="stable")[:marked]]
    return ModelComparison(names, tuple(int(i) for i in ids), tuple(tokens), logprobs,
                           tuple(int(r) + 1 for r in order), skipped + 1, images)


def compare_with(a: GGUFModel, name_a: str, other: Candidate, context: PromptTokens,
                 piece: Callable[[int], str], pictures: Sequence[ImageInput] = (), *,
                 marked_from: int = 1, progress: Progress | None = None,
                 cancel: threading.Event | None = None) -> ModelComparison:
    """``a`` against a store model over ``context`` (the other model is opened here); the
    context's ``pictures`` are read by each model's own tower."""
    if other.reason:
        raise ComparisonError(f"{other.name} cannot be compared with {name_a}: {other.reason}")
    b = open_model(other.path, other.projector)
    report = progress or (lambda stage, fraction: None)
    contexts = []
    for model, name in ((a, name_a), (b, other.name)):
        if cancel is not None and cancel.is_set():
            raise InspectionCancelled("the comparison was cancelled")
        if context.image_rows is not None:
            report(f"{name}: reading the image(s)", 0.0)
        contexts.append(own_images(model, name, context, pictures))
    return compare_contexts(a, b, tuple(contexts), [piece(int(i)) for i in context.ids],
                            (name_a, other.name), marked_from=marked_from, progress=progress,
                            cancel=cancel)
