"""Which drafter a loaded model decodes with: ``off``, ``ngram``, ``auto`` or a draft model.

``auto`` uses a draft model from the store only when the cost model predicts it pays:
decode is memory-bound (BENCHMARKS.md: every MatMulNBits near the machine's bandwidth), so
a draft model's cost per token, in target forwards, is about the ratio of the two model
files' sizes. With a typical per-token acceptance of 0.7 and the measured verify costs
(engine.runtime.drafters.verify_cost), the best draft length must beat plain decoding by
``AUTO_MIN_GAIN``: a 0.5B draft for the 1.5B target (size ratio 0.44) is predicted to
slow it down, so ``auto`` keeps prompt lookup there; a draft a tenth of a 7B target's size
is predicted to pay (docs/benchmarks-journal.md, 'Figures behind design choices').
Otherwise ``auto`` is prompt lookup, which drafts nothing (costs only its search) where
the context offers nothing to copy.

Every choice keeps the answer only where a verify step of k rows computes each row as a
one-token step does (``DecoderSession.row_invariant``): to the bit in fast CPU mode (the
graph is built for it, engine.graph.kernels, 3.), to ~1e-5 in exact mode.
On CUDA ONNX Runtime's one-row and many-row kernels round differently, and later layers
amplify that to ~0.2 in the logits, which flips near-tie tokens (CoreML is unmeasured);
``auto`` stays off there, and an explicit ``ngram`` or draft model runs with
ROW_VARIANT_NOTE said to the user.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.errors import GenerationError, LanternError, Remedy
from engine.gguf.vocabulary import vocabulary_signature
from engine.runtime.drafters import Drafter, DraftLength, DraftModel, PromptLookup
from engine.runtime.loaded_model import LoadedModel
from engine.runtime.loader import load_model
from engine.store import Store

CHOICES = ("auto", "off", "ngram")  # or the name of a draft model in the store
ROW_VARIANT_NOTE = ("speculative decoding on this provider: a verify step rounds differently "
                    "from one-token steps, so a near-tie token may differ from an answer "
                    "without speculation; the CPU provider keeps the answer identical")
AUTO_OFF_NOTE = ("speculation off: auto drafts only where it cannot change the answer, and on "
                 "this provider a verify step rounds differently (the CPU provider drafts)")
TYPICAL_ACCEPTANCE = 0.7
AUTO_MIN_GAIN = 1.1


def predicted_gain(draft_cost: float, acceptance: float = TYPICAL_ACCEPTANCE) -> float:
    """Tokens per unit of time over plain decoding at the best draft length."""
    return DraftLength(max_len=16, draft_cost=draft_cost, prior=acceptance).best(16)[1]


def make_drafter(choice: str, target_path: Path, *, row_invariant: bool = True,
                 load_draft: Callable[[str], tuple[object, Path]] | None = None,
                 candidates: Callable[[], list[tuple[str, Path]]] | None = None) -> Drafter | None:
    """The drafter for ``choice`` (None: plain decoding). ``row_invariant``: the target's verify
    rows equal its one-token steps (``auto`` drafts only then). ``load_draft(name)`` loads
    a store model and returns its decoder and GGUF path; ``candidates()`` lists (name, GGUF
    path) of store models that ``auto`` may consider."""
    if choice == "off" or (choice == "auto" and not row_invariant):
        return None
    if choice == "ngram":
        return PromptLookup()
    if choice == "auto":
        best = _paying_draft_model(target_path, candidates() if candidates else [])
        if best is None or load_draft is None:
            return PromptLookup()
        choice = best
    if load_draft is None:
        raise GenerationError(f"speculate={choice}: draft models need a model store",
                              remedy=Remedy.SPECULATE)
    decoder, path = load_draft(choice)
    if vocabulary_signature(path) != vocabulary_signature(target_path):
        raise GenerationError(
            f"{choice} cannot draft for this model: their vocabularies differ (token list or "
            "special ids); pick a model of the same family, or prompt lookup (ngram)",
            remedy=Remedy.SPECULATE)
    return DraftModel(decoder, draft_cost=draft_cost(path, target_path))


def drafter_for(choice: str, model: LoadedModel, store: Store | None, *,
                requantize: str | None = None) -> Drafter | None:
    """``choice`` for a loaded target model; draft models come from ``store`` (None: a bare
    GGUF target, which can use off, ngram and auto only)."""

    def load_draft(name: str):
        if store is None:
            raise GenerationError(f"speculate={name}: a draft model needs a model from the "
                                  "store as target, not a bare .gguf file",
                                  remedy=Remedy.SPECULATE)
        draft = load_model(store.get(name), num_ctx=model.num_ctx,
                           requantize=requantize)
        return draft.decoder, draft.gguf.path

    def candidates() -> list[tuple[str, Path]]:
        try:
            models = store.list() if store is not None else []
        except LanternError:  # no readable store: no draft models to consider
            return []
        return [(m.name.display, m.model_path) for m in models]

    return make_drafter(choice, model.gguf.path, row_invariant=model.row_invariant,
                        load_draft=load_draft, candidates=candidates)


def speculation_note(choice: str, row_invariant: bool) -> str | None:
    """What the user should know about ``choice`` for a model, if anything."""
    if row_invariant or choice == "off":
        return None
    return AUTO_OFF_NOTE if choice == "auto" else ROW_VARIANT_NOTE


def draft_cost(draft: Path, target: Path) -> float:
    """A draft token's cost in target forwards: decode reads every weight once a token."""
    return Path(draft).stat().st_size / Path(target).stat().st_size


def _paying_draft_model(target: Path, candidates: list[tuple[str, Path]]) -> str | None:
    """The store model with the best predicted gain above AUTO_MIN_GAIN, if any."""
    best, best_gain = None, AUTO_MIN_GAIN
    signature = None
    for name, path in candidates:
        if Path(path).resolve() == Path(target).resolve():
            continue
        gain = predicted_gain(draft_cost(path, target))
        if gain <= best_gain:
            continue
        signature = signature or vocabulary_signature(target)
        try:
            same = vocabulary_signature(path) == signature
        except (LanternError, OSError):  # an unreadable candidate is simply not a candidate
            same = False
        if same:
            best, best_gain = name, gain
    return best
