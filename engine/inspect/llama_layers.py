"""Layer by layer against llama.cpp: the same GGUF and token ids through llama.cpp and
Lantern's fp32 reference, every block's output side by side, the first block that
diverges named — the method engine builders use by hand when an engine prints garbage.

llama.cpp feeds int8-quantized activations into its quantized matmuls and keeps an fp16
KV cache, so its states drift from the fp32 reference even when both are right; the
tolerance (``TOLERANCE``, relative to each position's largest value) is the spread that
drift explains, ARCHITECTURE.md §5. The comparison is ``engine.reference.against``'s (the
same rows, verdict and usual suspects as a dump read with ``lantern debug --against``);
llama.cpp's embeddings are not read (engine/inspect/llama_capture.py), so the first row
compared is block 0's output.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.gguf import GGUFModel
from engine.inspect.inspection import InspectionCancelled, Progress
from engine.inspect.llama_capture import block_states
from engine.inspect.second_opinion import SecondOpinionUnavailable, llama_build
from engine.modelmath.stats import hidden_stats
from engine.reference import ReferenceWeights, forward
from engine.reference.against import Against, LayerDelta, against
from engine.reference.dump import Dump

TOLERANCE = 0.1


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

    @property
    def first_off(self) -> int | None:
        """Index into ``rows`` of the first block beyond tolerance; ``len(rows)`` when only
        the logits are."""
        return None if self.result.first_off is None else self.result.first_off - 1

    @property
    def ok(self) -> bool:
        return self.result.ok

    def verdict(self) -> str:
        return self.result.verdict()

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
                "suspects": list(self.result.suspects)}


def llama_layers(path: Path, model: GGUFModel, ids: Sequence[int], *,
                 weights: ReferenceWeights | None = None, tolerance: float = TOLERANCE,
                 progress: Progress | None = None, cancel: threading.Event | None = None,
                 steering: np.ndarray | None = None) -> LlamaLayers:
    """llama.cpp (GGUF at ``path``) and the reference (``model``, or ``weights`` when
    given) over ``ids``, both steered by ``steering`` [n_layers, H] when given (a steered
    answer's control vectors); every block compared."""
    if (problem := llama_build().problem) is not None:
        raise SecondOpinionUnavailable(problem)
    import llama_cpp

    report = progress or (lambda stage, fraction: None)
    n = model.config.text.n_layers
    report("llama.cpp", 0.0)
    theirs = block_states(path, ids, n, cancel=cancel, steering=steering,
                          on_block=lambda i: report(f"llama.cpp: block {i + 1} of {n}",
                                                    (i + 1) / (2 * n)))

    def on_layer(i: int) -> None:
        if cancel is not None and cancel.is_set():
            raise InspectionCancelled("the comparison with llama.cpp was cancelled")
        report(f"Reference: block {i + 1} of {n}", 0.5 + (i + 1) / (2 * n))

    ours = forward(model, np.asarray(ids), weights=weights, on_layer=on_layer,
                   steering=steering)
    ours_dump = Dump("reference", np.asarray(ids), ours.hidden_states, ours.logits)
    theirs_dump = Dump("llama.cpp", np.asarray(ids), [ours.hidden_states[0], *theirs.blocks],
                       theirs.logits)
    result = against(ours_dump, theirs_dump, tolerance)
    rows = tuple(LayerSide(d, _mean_std(a), _mean_std(b)) for d, a, b in zip(
        result.rows[1:], ours.hidden_states[1:], theirs.blocks, strict=True))
    report("Done", 1.0)
    return LlamaLayers(llama_cpp.__version__, tuple(int(i) for i in ids), rows, result,
                       steering is not None)


def _mean_std(state: np.ndarray) -> tuple[float, float]:
    stats = hidden_stats(state[-1])     # (mean, std, min, max) of the last position
    return float(stats[0]), float(stats[1])
