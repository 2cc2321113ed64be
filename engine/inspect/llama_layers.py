"""Layer by layer against llama.cpp: the same GGUF and token ids through llama.cpp and
Lantern's fp32 reference, every block's output side by side, the first block that
diverges named — the method engine builders use by hand when an engine prints garbage.

llama.cpp feeds int8-quantized activations into its quantized matmuls and keeps an fp16
KV cache, so its states drift from the fp32 reference even when both are right. The rule
that names a block (ARCHITECTURE.md §5):

- each position's error is max |Δ| over the largest |value| that position's residual
  stream has carried up to that block (the reference's). A rounding error is a fraction of
  the values rounded, and the stream keeps it when a later block cancels those values:
  Qwen's last blocks remove the huge activations they carried (blk.26 of the 1.5B demo
  model turns -4408 into 379 at the first token), and the few percent of the cancelled
  value llama.cpp's 8-bit MLP input loses is then far more than the state left;
- attention sinks are not judged: a position whose stream carries values over ``SINK``
  times the median position's (Qwen's first token). Its MLP input holds a few huge values
  that set the 8-bit scale and round the rest away (blk.26 of the 1.5B: 11% of the MLP's
  output at that token), and only its own logits read its last states. The verdict says
  how far such positions drifted;
- a block is off when a judged position's error is over the tolerance (``TOLERANCE``, the
  spread that drift explains); the logits likewise, their error relative to the row's
  largest logit put back in the stream's units (times the last state's largest value over
  the largest the stream carried: the final norm scaled the state's error with it).

The rows' max |Δ| and cosine are over every position; their relative is the judged one.
Over an image context both engines read the pictures with their own towers (llama.cpp's
through libmtmd, engine/inspect/llama_pictures.py) and the picture's rows are judged
with the text's: an image encoder off shows at block 0.
The rows, verdict and usual suspects are ``engine.reference.against``'s (as a dump read
with ``lantern debug --against``); llama.cpp's embeddings are not read
(engine/inspect/llama_capture.py), so the first row compared is block 0's output.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.gguf import GGUFModel
from engine.inspect.attention import image_grids
from engine.inspect.inspection import InspectionCancelled, Progress, forward_context
from engine.inspect.llama_capture import block_states
from engine.inspect.llama_pictures import LlamaPictures
from engine.inspect.second_opinion import SecondOpinionUnavailable, llama_build
from engine.modelmath.stats import hidden_stats
from engine.reference import ReferenceWeights, forward
from engine.reference.against import Against, LayerDelta, against, row_relative, suspects
from engine.reference.dump import Dump

TOLERANCE = 0.1
SINK = 10.0     # a stream this many times above the median position's: an attention sink


@dataclass(frozen=True)
class LayerSide:
    """One block's output in both engines: mean and std of the last position's vector,
    max |Δ| and cosine over every position."""

    delta: LayerDelta
    ours: tuple[float, float]       # (mean, std), reference
    theirs: tuple[float, float]     # (mean, std), llama.cpp


@dataclass(frozen=True)
class LlamaLayers:
    version: str                    # llama-cpp-python's
    ids: tuple[int, ...]
    rows: tuple[LayerSide, ...]     # one per block, blk.0 first
    result: Against                 # its rows start with the (shared) embeddings
    steered: bool = False           # both ran with the answer's control vectors
    sinks: tuple[int, ...] = ()     # positions not judged (attention sinks)
    sink_drift: tuple[float, int] = (0.0, 0)   # their largest relative error, and its block
    pictures: tuple[tuple[int, int], ...] = ()   # (start, stop) rows of each image

    @property
    def first_off(self) -> int | None:
        """Index into ``rows`` of the first block beyond tolerance; ``len(rows)`` when only
        the logits are."""
        return None if self.result.first_off is None else self.result.first_off - 1

    @property
    def ok(self) -> bool:
        return self.result.ok

    def verdict(self) -> str:
        """The comparison's verdict, and how far the unjudged sinks drifted."""
        drift, block = self.sink_drift
        verdict = self.result.verdict()
        if self.sinks and drift > self.result.tolerance:
            where = ", ".join(str(p) for p in self.sinks[:3]) + ("…" if len(self.sinks) > 3
                                                                else "")
            verdict += (f"; not judged: position {where} (an attention sink, its huge "
                        f"activations rounded to 8 bits), relative {drift:.3g} at "
                        f"{self.rows[block].delta.label}")
        if self.pictures:
            rows = ", ".join(f"{a}-{b - 1}" for a, b in self.pictures)
            verdict += (f". Rows {rows} are the picture's (each engine read it with its own "
                        "vision tower), judged as the text's")
        return verdict

    def to_json(self) -> dict:
        def row(side: LayerSide) -> dict:
            d = side.delta
            return {"label": d.label, "ours": {"mean": side.ours[0], "std": side.ours[1]},
                    "theirs": {"mean": side.theirs[0], "std": side.theirs[1]},
                    "max_abs_delta": d.max_abs, "relative": d.relative, "cosine": d.cosine}
        logits = self.result.logits
        return {"engine": f"llama-cpp-python {self.version}", "tokens": len(self.ids),
                "steered": self.steered,
                "tolerance": self.result.tolerance, "layers": [row(r) for r in self.rows],
                "logits": None if logits is None else {
                    "max_abs_delta": logits.max_abs, "relative": logits.relative,
                    "cosine": logits.cosine},
                "first_off": self.first_off, "verdict": self.verdict(),
                "sinks": list(self.sinks),
                "pictures": [list(p) for p in self.pictures],
                "suspects": list(self.result.suspects)}


def llama_layers(path: Path, model: GGUFModel, ids: Sequence[int], *,
                 weights: ReferenceWeights | None = None, tolerance: float = TOLERANCE,
                 progress: Progress | None = None, cancel: threading.Event | None = None,
                 steering: np.ndarray | None = None,
                 pictures: LlamaPictures | None = None) -> LlamaLayers:
    """llama.cpp (GGUF at ``path``) and the reference (``model``, or ``weights`` when
    given) over ``ids``, both steered by ``steering`` [n_layers, H] when given (a steered
    answer's control vectors); every block compared. ``pictures``: the images of the
    context whose ids ``ids`` are (``llama_pictures``), when it holds any."""
    if (problem := llama_build().problem) is not None:
        raise SecondOpinionUnavailable(problem)
    import llama_cpp

    report = progress or (lambda stage, fraction: None)
    n = model.config.text.n_layers
    report("llama.cpp", 0.0)
    theirs = block_states(path, ids, n, cancel=cancel, steering=steering, pictures=pictures,
                          on_block=lambda i: report(f"llama.cpp: block {i + 1} of {n}",
                                                    (i + 1) / (2 * n)))

    def on_layer(i: int) -> None:
        if cancel is not None and cancel.is_set():
            raise InspectionCancelled("the comparison with llama.cpp was cancelled")
        report(f"Reference: block {i + 1} of {n}", 0.5 + (i + 1) / (2 * n))

    if pictures is None:
        ours = forward(model, np.asarray(ids), weights=weights, on_layer=on_layer,
                       steering=steering)
    else:
        ours = forward_context(model, pictures.context, weights=weights, on_layer=on_layer,
                               steering=steering)
    ours_dump = Dump("reference", np.asarray(ids), ours.hidden_states, ours.logits)
    theirs_dump = Dump("llama.cpp", np.asarray(ids), [ours.hidden_states[0], *theirs.blocks],
                       theirs.logits)
    result, sinks, drift = judged(ours_dump, theirs_dump, tolerance)
    rows = tuple(LayerSide(d, _mean_std(a), _mean_std(b)) for d, a, b in zip(
        result.rows[1:], ours.hidden_states[1:], theirs.blocks, strict=True))
    report("Done", 1.0)
    grids = image_grids(pictures.context) if pictures is not None else ()
    return LlamaLayers(llama_cpp.__version__, tuple(int(i) for i in ids), rows, result,
                       steering is not None, sinks, drift,
                       tuple((g.start, g.stop) for g in grids))


def sink_positions(states: Sequence[np.ndarray]) -> np.ndarray:
    """Positions whose stream carries values over SINK times the median position's [S]."""
    peak = np.max([np.abs(h).max(axis=-1) for h in states], axis=0)    # [S]
    return np.flatnonzero(peak > SINK * np.median(peak))


def stream_relative(ours: Sequence[np.ndarray], theirs: Sequence[np.ndarray]) -> np.ndarray:
    """[n_states, S]: max |Δ| of each state and position over the largest |value| that
    position's reference stream has carried up to that state."""
    carried = np.maximum.accumulate(np.stack([np.abs(h).max(axis=-1) for h in ours]))
    delta = np.stack([np.abs(np.asarray(b, np.float64) - a).max(axis=-1)
                      for a, b in zip(ours, theirs, strict=True)])
    return delta / np.where(carried > 0, carried, 1e-30)


def judged(ours: Dump, theirs: Dump,
           tolerance: float) -> tuple[Against, tuple[int, ...], tuple[float, int]]:
    """``against``'s comparison under the rule of this module: the verdict, the sinks and
    their largest relative error (and at which block)."""
    base = against(ours, theirs, tolerance)
    sinks = sink_positions(ours.hidden_states)
    keep = np.setdiff1d(np.arange(len(ours.ids)), sinks)
    relative = stream_relative(ours.hidden_states, theirs.hidden_states)   # [L + 1, S]
    rows = tuple(dataclasses.replace(row, relative=float(r[keep].max()))
                 for row, r in zip(base.rows, relative, strict=True))
    logits = base.logits
    if logits is not None:     # in the stream's units: the norm scaled the error with the state
        last = np.abs(ours.hidden_states[-1]).max(axis=-1)
        shrink = last / np.maximum(np.max([np.abs(h).max(axis=-1) for h in ours.hidden_states],
                                          axis=0), 1e-30)
        logits = dataclasses.replace(logits, relative=float(
            (row_relative(ours.logits, theirs.logits) * shrink)[keep].max()))
    first = next((i for i, r in enumerate(rows) if not r.relative <= tolerance), None)
    if first is None and logits is not None and not logits.relative <= tolerance:
        first = len(rows)
    drift = relative[1:, sinks].max(axis=1) if len(sinks) else np.zeros(1)   # per block
    return (Against(rows, logits, first, suspects(ours, theirs, first, tolerance), tolerance),
            tuple(int(p) for p in sinks), (float(drift.max()), int(drift.argmax())))


def _mean_std(state: np.ndarray) -> tuple[float, float]:
    stats = hidden_stats(state[-1])     # (mean, std, min, max) of the last position
    return float(stats[0]), float(stats[1])
