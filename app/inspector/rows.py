"""The debug panel's rows: small frozen records built from the engine's results (token
events, prompts, layer statistics, reference checks), one table row each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from PySide6.QtGui import QFont, QFontDatabase, QFontMetrics, QGuiApplication

from engine.chat.prompt_tokens import PromptTokens
from engine.chat.reasons import FILTERS
from engine.reference import layer_label
from engine.runtime.check import CheckReport, TopCandidate

TOP_ROWS = 5


def visible_piece(piece: str) -> str:
    """Show whitespace so ' the' and 'the' and '\\n' are told apart, and a character no
    installed font can draw (or a control character) as its code point: an empty box tells
    nothing."""
    marked = piece.replace(" ", "·").replace("\n", "⏎").replace("\t", "⇥")
    return "".join(c if c.isprintable() and (c.isascii() or drawable(c))
                   else f"<U+{ord(c):04X}>" for c in marked) or "∅"


@lru_cache(maxsize=4096)
def drawable(character: str) -> bool:
    """Some installed font has a glyph for ``character`` (without an application, which
    the font database needs, every character counts as drawable)."""
    if QGuiApplication.instance() is None:
        return True
    code = ord(character)
    return any(QFontMetrics(QFont(family)).inFontUcs4(code) for family in _families())


@lru_cache(maxsize=1)
def _families() -> tuple[str, ...]:
    return tuple(QFontDatabase.families())


@dataclass(frozen=True)
class TopRow:
    id: int
    piece: str
    logit: float | None           # None from a server (log-probabilities only)
    probability: float
    logit_fraction: float          # position between the lowest and highest shown logit
    chosen: bool


@dataclass(frozen=True)
class PromptRow:
    position: int
    id: int
    piece: str
    image: bool                    # a row the image's embeddings replace
    rope: str                      # "t · h · w" under M-RoPE, else ""


@dataclass(frozen=True)
class LayerRow:
    label: str
    stats: tuple[float, float, float, float]   # mean, std, min, max


@dataclass(frozen=True)
class TopPair:
    """One rank of the engine's and the reference's top-5, side by side."""

    rank: int
    engine: TopCandidate
    reference: TopCandidate

    @property
    def same(self) -> bool:
        return self.engine.id == self.reference.id


def top_pairs(report: CheckReport) -> list[TopPair]:
    return [TopPair(rank, engine, reference) for rank, (engine, reference)
            in enumerate(zip(report.engine_top, report.reference_top, strict=True), 1)]


def prompt_rows(prompt: PromptTokens, piece: Callable[[int], str]) -> list[PromptRow]:
    """One row per prompt token (`piece`: id -> display text)."""
    images = set() if prompt.image_rows is None else {int(r) for r in prompt.image_rows}
    positions = np.asarray(prompt.positions)      # [S] or [3, S] (M-RoPE)
    return [
        PromptRow(p, int(i), piece(int(i)), p in images,
                  " · ".join(str(int(v)) for v in positions[:, p]) if positions.ndim == 2
                  else "")
        for p, i in enumerate(prompt.ids)
    ]


def top_rows(event) -> list[TopRow]:
    """The first five candidates of a TokenEvent, ready for the table."""
    tops = event.top[:TOP_ROWS]
    if not tops:
        return []
    if tops[0].logit is None:       # a server: log-probabilities only, no logit bars
        return [TopRow(t.id, t.piece, None, t.probability, 0.0, t.piece == event.piece)
                for t in tops]
    low, high = min(t.logit for t in tops), max(t.logit for t in tops)
    return [TopRow(t.id, t.piece, t.logit, t.probability,
                   (t.logit - low) / (high - low) if high > low else 1.0, t.id == event.id)
            for t in tops]


def layer_rows(stats) -> list[LayerRow]:
    """stats: float [n_layers + 1, 4]; row 0 is the embeddings (labels as the check's)."""
    return [LayerRow(layer_label(r), tuple(float(v) for v in row))
            for r, row in enumerate(stats)]


def cut_by_text(candidate) -> str:
    """The sampler filters that dropped a candidate (engine.chat.reasons.Candidate), short
    enough for a narrow column: "" when every filter kept it."""
    return ", ".join(_filters(candidate, kept=False)) if candidate.kept else "greedy"


def cut_by_tip(candidate) -> str:
    """What the sampler's filters did with a candidate, in a sentence."""
    if not candidate.kept:
        return "greedy decoding: no filters, the most likely token is taken"
    cut, kept = _filters(candidate, kept=False), _filters(candidate, kept=True)
    if not cut:
        return "kept by every filter (" + ", ".join(FILTERS) + ")"
    return "cut by " + ", ".join(cut) + (f"; kept by {', '.join(kept)}" if kept else "")


def _filters(candidate, *, kept: bool) -> list[str]:
    return [name for name, verdict in zip(FILTERS, candidate.kept, strict=True)
            if verdict == kept]
