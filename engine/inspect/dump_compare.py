"""Your engine against Lantern: the fp32 reference's dump of a context written to a
folder, and another engine's dump compared with the reference over the dump's own ids.

A context with images is dumped whole (the embeddings' rows of an image are what the
vision tower and projector made, so a wrong image encoder shows at the embeddings), and a
dump is compared against such a context over the context itself: a dump holds token ids,
not pictures, so its ids must be the context's.

Shared by `lantern debug --dump / --against` and the app's Reference tab, with progress
and cancel for the app's worker. The format is engine/reference/dump.py's, the comparison
(rows, first layer off, usual suspects) engine/reference/against.py's. A dump is checked
against the model before the reference runs, so one written for another model is named
as such rather than failing half-way.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import Remedy
from engine.gguf import GGUFModel
from engine.inspect.attention import image_grids
from engine.inspect.inspection import InspectionCancelled, Progress, forward_context
from engine.reference.against import Against, against
from engine.reference.dump import Dump, DumpError, read_dump, write_dump

TOLERANCE = 1e-2     # relative, as `lantern debug --against` defaults to


@dataclass(frozen=True)
class DumpComparison:
    result: Against
    ours: Dump                      # the reference over the dump's ids
    model: str                      # the model the dump's manifest names
    differ_at: int | None           # first position where the dump's ids differ from
    #                                 the ids expected (None: the same, or none expected)

    def ids_note(self, expected: str) -> str | None:
        """A line saying where the dump's ids leave ``expected`` (what they were)."""
        if self.differ_at is None:
            return None
        return (f"the dump's ids differ from {expected} from position {self.differ_at} "
                f"(tokenizer or chat template?); compared on the dump's ids")


def reference_dump(model: GGUFModel, name: str, context: PromptTokens, *,
                   progress: Progress | None = None,
                   cancel: threading.Event | None = None) -> Dump:
    """The reference's hidden states and logits over ``context``, as a dump of ``name``."""
    report = progress or (lambda stage, fraction: None)
    n = model.config.text.n_layers

    def on_layer(i: int) -> None:
        if cancel is not None and cancel.is_set():
            raise InspectionCancelled("the reference run was cancelled")
        report(f"Reference: block {i + 1} of {n}", (i + 1) / (n + 1))

    report("Reference", 0.0)
    out = forward_context(model, context, on_layer=on_layer)
    return Dump(name, np.asarray(context.ids, np.int64), out.hidden_states, out.logits)


def export_dump(model: GGUFModel, name: str, context: PromptTokens, folder: Path, *,
                progress: Progress | None = None,
                cancel: threading.Event | None = None) -> Dump:
    """Run the reference over ``context`` and write its dump to ``folder``."""
    report = progress or (lambda stage, fraction: None)
    dump = reference_dump(model, name, context, progress=report, cancel=cancel)
    if cancel is not None and cancel.is_set():
        raise InspectionCancelled("the dump was cancelled before it was written")
    report("Writing the dump", len(dump.hidden_states) / (len(dump.hidden_states) + 1))
    write_dump(folder, dump)
    report("Done", 1.0)
    return dump


def compare_dump(model: GGUFModel, name: str, folder: Path, *,
                 expected: PromptTokens | None = None, tolerance: float = TOLERANCE,
                 progress: Progress | None = None,
                 cancel: threading.Event | None = None) -> DumpComparison:
    """Read the dump in ``folder``, run the reference (``model``, called ``name``) over its
    ids and compare every layer; ``expected``: the context the dump should be of, for the
    note when its ids are not (a context with images is run itself, and its ids must be
    the dump's)."""
    theirs = read_dump(folder)
    check_fits(theirs, model, name, folder)
    differ = None if expected is None else first_difference(expected.ids, theirs.ids)
    context = PromptTokens.text(theirs.ids)
    if expected is not None and image_grids(expected):
        if differ is not None:
            raise DumpError(f"{folder}: the dump's ids differ from the context's from "
                            f"position {differ}; a context with images is compared over "
                            "itself (a dump holds no pictures), so the dump must hold its ids")
        context = expected
    ours = reference_dump(model, name, context, progress=progress, cancel=cancel)
    return DumpComparison(against(ours, theirs, tolerance), ours, theirs.model, differ)


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first position where ``a`` and ``b`` differ (the shorter one's length when one
    starts the other); None when they are equal."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if np.array_equal(a, b):
        return None
    same = min(len(a), len(b))
    return next((i for i in range(same) if a[i] != b[i]), same)


def check_fits(dump: Dump, model: GGUFModel, name: str, folder: Path) -> None:
    """Refuse a dump whose shapes say it was written for another model."""
    text = model.config.text
    count, want = len(dump.hidden_states), text.n_layers + 1
    width = dump.hidden_states[0].shape[1] if count else 0
    if count != want or width != text.hidden_size:
        raise DumpError(f"{folder} holds {count} hidden states of width {width} (its "
                        f"manifest names {dump.model!r}); {name} has {want} (the embeddings "
                        f"and one per block) of width {text.hidden_size}: the dump is of "
                        f"another model", remedy=Remedy.DUMP_MODEL)
    if not len(dump.ids):
        raise DumpError(f"{folder}: ids.npy holds no token ids")
    low, high = int(dump.ids.min()), int(dump.ids.max())
    if low < 0 or high >= text.vocab_size:
        bad = low if low < 0 else high
        raise DumpError(f"{folder}: ids.npy holds token id {bad}, outside {name}'s "
                        f"vocabulary of {text.vocab_size}: the dump is of another model",
                        remedy=Remedy.DUMP_MODEL)
    if dump.logits is not None and dump.logits.shape != (len(dump.ids), text.vocab_size):
        raise DumpError(f"{folder}: the logits have shape {dump.logits.shape}; {name}'s are "
                        f"[{len(dump.ids)}, {text.vocab_size}] (one row per token, one "
                        f"column per vocabulary entry)", remedy=Remedy.DUMP_MODEL)
