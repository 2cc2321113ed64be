"""The panel's "llama.cpp" tab: a second engine's opinion on the inspected context.

Top-5 of Lantern's fp32 reference and of llama.cpp side by side at the inspected
position, and |Δ logprob| of the token that came next at every earlier position
(teacher-forced) as a chart; below, every block's output compared
(app/inspector/llama_layers_section.py). A steered answer's comparison says that llama.cpp
ran with the same control vectors. Over an image context the picture's positions hold no
token to score: the chart leaves them out and the verdict names them. Without
llama-cpp-python it says how to get it.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHeaderView, QPushButton, QWidget

from app.inspector.charts import LineChart, Series
from app.inspector.llama_layers_section import LlamaLayersSection, steered_note
from app.inspector.progress_strip import ProgressStrip
from app.inspector.rows import TOP_ROWS, visible_piece
from app.inspector.table_model import Column, RecordTableModel
from app.inspector.widgets import (
    hint,
    scrolling_body,
    section,
)
from app.verdict import set_verdict, verdict_label
from engine.inspect.lens import LensToken
from engine.inspect.second_opinion import SecondOpinion
from engine.remote.crosscheck import TOLERANCE

DIFFERENT = QColor(255, 200, 70, 70)
DELTA_COLOUR = QColor(200, 80, 200)


@dataclass(frozen=True)
class OpinionPair:
    rank: int
    ours: LensToken
    theirs: LensToken


RUNNING = "Running llama.cpp over the context…"
IDLE = ("Compare Lantern with llama.cpp on this conversation's latest context: press the "
        "button.")


def opinion_verdict(opinion: SecondOpinion, tokens: tuple[str, ...],
                    steering: str = "") -> tuple[str, bool]:
    """Agree or disagree, what was measured, and for a disagreement which token and how far
    past the tolerance the cross-check uses; whether both ran with the control vectors
    (``steering``, in words) that steered the answer. Returns (text, agree)."""
    text, agree = _verdict(opinion, tokens)
    return text + pictures_note(opinion) + steered_note(opinion.steered, steering), agree


def _verdict(opinion: SecondOpinion, tokens: tuple[str, ...]) -> tuple[str, bool]:
    versus = f"llama-cpp-python {opinion.version} against Lantern's fp32 reference"
    ours, theirs = opinion.ours, opinion.theirs
    if not opinion.same_top1:
        margin = ours[0].logit - ours[1].logit if len(ours) > 1 else float("inf")
        why = (f"a near tie in Lantern's logits (its top two {margin:.3g} apart), which "
               "llama.cpp's int8 activations can tip: numeric, not a different model"
               if margin < TOLERANCE else
               f"not a near tie (Lantern's top two are {margin:.3g} apart): compare the "
               "layers below to see where the engines part")
        return (f"DISAGREE on the next token at position {opinion.position} ({versus}): "
                f"Lantern picks {_shown(ours[0].token)} (logit {ours[0].logit:.3f}), "
                f"llama.cpp {_shown(theirs[0].token)} (logit {theirs[0].logit:.3f}); {why}.",
                False)
    measured = ("Measured: the log-probability each engine gives the token that came next, "
                "at every earlier position (teacher-forced), and the next token")
    if (largest := opinion.largest()) is None:
        return (f"AGREE ({versus}): both pick {_shown(ours[0].token)} next at position "
                f"{opinion.position}.", True)
    worst, row, mean = largest
    token = visible_piece(tokens[row + 1]) if row + 1 < len(tokens) else ""
    where = f"position {row + 1}" + (f" ({_shown(token)})" if token else "")
    if worst > TOLERANCE:
        return (f"DISAGREE ({versus}): |Δ logprob| {worst:.3g} at {where} is "
                f"{worst / TOLERANCE:.1f}x the tolerance {TOLERANCE} (mean {mean:.3g} over "
                f"{len(opinion.text_rows)} positions). Numeric: both still pick "
                f"{_shown(ours[0].token)} next, so the sampler is not involved; the layers "
                f"below show where the values part. {measured}.", False)
    return (f"AGREE ({versus}): every |Δ logprob| within the tolerance {TOLERANCE} (largest "
            f"{worst:.3g} at {where}, mean {mean:.3g}); both pick {_shown(ours[0].token)} "
            f"next. {measured}.", True)


def _shown(token: str) -> str:
    return f"“{visible_piece(token)}”"


def pictures_note(opinion: SecondOpinion) -> str:
    """What the verdict adds when positions were left out: a picture's rows hold no token
    to score ("" when none)."""
    rows = opinion.picture_rows
    if not rows:
        return ""
    return (f" Positions {rows[0] + 1}-{rows[-1] + 1}, the picture's, are not scored: no "
            "token came there (each engine read the picture with its own vision tower); the "
            "chart leaves them out.")


class OpinionPage(QWidget):
    requested = Signal()
    cancelRequested = Signal()

    def __init__(self, table_factory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = scrolling_body(self)
        layout.addWidget(hint("Runs llama.cpp on the same GGUF over the inspected context "
                              "(the Inside tab's position, else the latest token) and "
                              "compares it with Lantern's fp32 reference."))
        self.button = QPushButton("Compare with llama.cpp")
        self.button.setObjectName("opinionButton")
        self.button.clicked.connect(self.requested)
        self.strip = ProgressStrip(self.button, self.cancelRequested)
        layout.addWidget(self.strip)
        self.status = verdict_label()
        layout.addWidget(self.status)
        layout.addWidget(section("Next token: top 5"))
        self.pairs = RecordTableModel(
            [
                Column("#", lambda r: str(r.rank), numeric=True),
                Column("lantern", lambda r: visible_piece(r.ours.token),
                       tip=lambda r: f"id {r.ours.id}"),
                Column("logit", lambda r: f"{r.ours.logit:.3f}", numeric=True),
                Column("llama.cpp", lambda r: visible_piece(r.theirs.token),
                       tip=lambda r: f"id {r.theirs.id}"),
                Column("logit", lambda r: f"{r.theirs.logit:.3f}", numeric=True),
            ],
            emphasis=lambda r: None if r.ours.id == r.theirs.id else DIFFERENT,
        )
        self.table = table_factory(self.pairs)
        header = self.table.horizontalHeader()
        for column in (1, 3):
            header.setSectionResizeMode(column, QHeaderView.Stretch)
        header.setStretchLastSection(False)
        self.table.setFixedHeight(26 * TOP_ROWS + self.table.horizontalHeader()
                                  .sizeHint().height() + 4)
        layout.addWidget(self.table)
        layout.addWidget(section("Teacher-forced |Δ logprob| per position"))
        self.chart = LineChart("|Δ logprob| of the token that came next", height=150)
        layout.addWidget(self.chart)
        self.layers = LlamaLayersSection(table_factory)
        layout.addWidget(self.layers, 1)

    def show_missing(self, text: str) -> None:
        set_verdict(self.status, text)
        self.strip.still()
        self.button.setEnabled(False)
        self.layers.show_missing(text)

    def show_running(self) -> None:
        self.strip.start(RUNNING)
        set_verdict(self.status, "")

    def show_progress(self, stage: str, fraction: float) -> None:
        self.strip.advance(stage, fraction)

    def show_failed(self, text: str) -> None:
        self.strip.still()
        set_verdict(self.status, text, False)

    def clear(self) -> None:
        """Another conversation: the comparison shown was over the previous one's context."""
        if self.button.isEnabled() or self.strip.busy:
            self.strip.still()
            set_verdict(self.status, IDLE)
        self.pairs.set_records([])
        self.chart.set_series([])
        self.layers.clear()

    def show_opinion(self, opinion: SecondOpinion, tokens: tuple[str, ...],
                     steering: str = "") -> None:
        self.strip.still()
        set_verdict(self.status, *opinion_verdict(opinion, tokens, steering))
        self.pairs.set_records([OpinionPair(i + 1, a, b) for i, (a, b)
                                in enumerate(zip(opinion.ours, opinion.theirs, strict=True))])
        self.chart.set_series([Series("|Δ logprob|", opinion.delta.tolist(), DELTA_COLOUR)],
                              [visible_piece(t) for t in tokens[1:]])
