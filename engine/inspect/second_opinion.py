"""A second engine's opinion: llama.cpp (llama-cpp-python, an optional extra) on the same
GGUF and the same token ids, teacher-forced, against Lantern's fp32 reference.

Per position: both engines' log-probability of the token that actually came next, and
|Δ logprob| between them; at the inspected position both top-5 lists side by side. This
is the check to run when an engine prints garbage: where the two part, and by how much.
An inspection of a steered answer runs llama.cpp with the same control vectors
(engine/inspect/llama_capture.py): unsteered, it would part from the steered reference
for that reason alone. Over an image context llama.cpp reads the pictures with its own
tower (engine/inspect/llama_pictures.py); a row whose next token is a picture's has no
token to score, so it is left out (NaN, ``picture_rows``).
"""

from __future__ import annotations

import functools
import importlib.util
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import LanternError
from engine.inspect.inspection import Inspection
from engine.inspect.lens import LensToken, logit_lens
from engine.inspect.llama_capture import llama_logits
from engine.inspect.llama_pictures import LlamaPictures

INSTALL_HINT = ("llama.cpp's second opinion needs llama-cpp-python: "
                "pip install 'lantern[llama]' (or pip install 'llama-cpp-python>=0.3.36')")


class SecondOpinionUnavailable(LanternError):
    """llama-cpp-python is missing, or the context is one it cannot take."""


@dataclass(frozen=True)
class SecondOpinion:
    version: str                           # llama-cpp-python's
    position: int
    ours: tuple[LensToken, ...]            # Lantern's reference top-5 at ``position``
    theirs: tuple[LensToken, ...]          # llama.cpp's
    ours_logprob: np.ndarray               # float64 [position]: row r's log-prob of ids[r+1]
    theirs_logprob: np.ndarray             # float64 [position]
    steered: bool = False                  # both ran with the answer's control vectors
    picture_rows: tuple[int, ...] = ()     # rows whose next token is a picture's: not scored

    @property
    def delta(self) -> np.ndarray:
        """|Δ logprob| per position [position], NaN at the picture rows."""
        delta = np.abs(self.ours_logprob - self.theirs_logprob)
        delta[list(self.picture_rows)] = np.nan
        return delta

    @property
    def text_rows(self) -> np.ndarray:
        """The rows scored: those whose next token is text, int64 [n]."""
        return np.setdiff1d(np.arange(len(self.ours_logprob)), self.picture_rows)

    def largest(self) -> tuple[float, int, float] | None:
        """Over the scored rows: the largest |Δ logprob|, its row, and the mean; None when
        no row is scored."""
        rows = self.text_rows
        if not len(rows):
            return None
        delta = self.delta[rows]
        return float(delta.max()), int(rows[delta.argmax()]), float(delta.mean())

    @property
    def same_top1(self) -> bool:
        return self.ours[0].id == self.theirs[0].id

    def to_json(self) -> dict:
        def tokens(top: tuple[LensToken, ...]) -> list[dict]:
            return [{"id": t.id, "token": t.token, "logit": t.logit, "prob": t.prob}
                    for t in top]
        delta, largest = self.delta, self.largest()
        return {"engine": f"llama-cpp-python {self.version}", "position": self.position,
                "steered": self.steered,
                "ours": tokens(self.ours), "theirs": tokens(self.theirs),
                "delta_logprob": [None if np.isnan(d) else float(d) for d in delta],
                "picture_rows": list(self.picture_rows),
                "max_delta_logprob": largest[0] if largest else 0.0}


def missing() -> str | None:
    """Why the second opinion cannot run here (how to get it), or None when it can."""
    return None if importlib.util.find_spec("llama_cpp") is not None else INSTALL_HINT


@dataclass(frozen=True)
class LlamaBuild:
    """What the installed llama-cpp-python was built for (ggml's system info line, e.g.
    "CPU : SSE3 = 1 | AVX2 = 1 | ..."), or why it cannot run on this processor."""

    features: str | None
    problem: str | None


def llama_build() -> LlamaBuild:
    """Import llama-cpp-python in a child process first (once): a build for another
    processor dies of SIGILL on import, which would take this process with it."""
    if (hint := missing()) is not None:
        return LlamaBuild(None, hint)
    return _probe_import()


@functools.cache
def _probe_import() -> LlamaBuild:
    script = ("import sys, llama_cpp; "
              "sys.stdout.write(llama_cpp.llama_print_system_info().decode())")
    try:
        child = subprocess.run([sys.executable, "-c", script], capture_output=True,
                               text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return LlamaBuild(None, "llama-cpp-python did not import within 120 s")
    if child.returncode == -signal.SIGILL:
        return LlamaBuild(None, "llama-cpp-python was built for another processor: importing "
                                "it stops with 'Illegal instruction'; rebuild it on this one")
    if child.returncode != 0:
        last = (child.stderr.strip().splitlines() or ["no message"])[-1]
        return LlamaBuild(None, f"llama-cpp-python does not import ({last})")
    return LlamaBuild(" ".join(child.stdout.split()), None)


def second_opinion(path: Path, inspection: Inspection, piece: Callable[[int], str],
                   top: int = 5, pictures: LlamaPictures | None = None) -> SecondOpinion:
    """Run llama.cpp over ``inspection``'s context (GGUF at ``path``), steered as the
    inspection was, and compare; ``pictures``: the context's images, when it holds any
    (``llama_pictures``)."""
    if (problem := llama_build().problem) is not None:
        raise SecondOpinionUnavailable(problem)
    if inspection.images and pictures is None:
        raise SecondOpinionUnavailable("this context holds an image, but no picture came "
                                       "with it for llama.cpp")
    import llama_cpp

    ids = list(inspection.ids)
    if pictures is not None and pictures.context.ids[:len(ids)].tolist() != ids:
        raise SecondOpinionUnavailable("the pictures came with another context than the "
                                       "one inspected")
    scores = llama_logits(path, ids, inspection.steering,
                          pictures).astype(np.float64)  # [S, V]
    peak = scores.max(axis=1, keepdims=True)
    log_probs = scores - (peak + np.log(np.exp(scores - peak).sum(axis=1, keepdims=True)))
    rows = np.arange(len(ids) - 1)
    return SecondOpinion(
        version=llama_cpp.__version__,
        position=inspection.position,
        ours=inspection.lens[-1].top[:top],
        theirs=logit_lens(scores[-1:], piece, top)[0].top,
        ours_logprob=inspection.logprobs,
        theirs_logprob=log_probs[rows, np.asarray(ids[1:], dtype=np.int64)],
        steered=inspection.steering is not None,
        picture_rows=() if pictures is None else tuple(
            int(r) for r in rows[np.isin(rows + 1, pictures.context.image_rows)]),
    )
