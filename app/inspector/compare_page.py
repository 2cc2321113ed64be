"""The panel's "Compare" tab: this conversation's text under two models.

The latest prompt and answer, as the chat template rendered them, teacher-forced through
the loaded model (A) and a second model of the store with the same vocabulary (B): each
token's log-probability under both and the difference, the largest disagreements tinted
and listed (click one to find it), and the mean |Δ|. An image is one row in the Prompt
tab's image tint, without numbers: its rows predict placeholders, not text.
app/inspector/model_comparer.py runs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTableView,
    QWidget,
)

from app.inspector.charts import LineChart, Series
from app.inspector.progress_strip import ProgressStrip
from app.inspector.rows import visible_piece
from app.inspector.table_model import Column, RecordTableModel
from app.inspector.widgets import (
    IMAGE_COLOUR,
    hint,
    scrolling_body,
    section,
)
from engine.inspect.model_compare import Candidate, ModelComparison

DISAGREE = QColor(230, 80, 70, 80)
DELTA_COLOUR = QColor(200, 80, 60)
SAME_FAMILY = ("pick a model of the same family (another size or quantization of it), or "
               "get one with + Get a model")
IDLE = "Pick the other model, then press Compare."
RUNNING = "Running both models over this conversation…"
LISTING = "Reading the store's models to find those with this model's vocabulary…"
MARKED = 5             # rows of the largest disagreements (compare_models marks 5)


@dataclass(frozen=True)
class TokenRow:
    position: int
    token: str
    a: float            # log p under the loaded model
    b: float            # log p under the other one
    marked: bool
    image: str = ""     # an image's rows, as one: its label (no numbers)

    @property
    def delta(self) -> float:
        return self.b - self.a


def token_rows(result: ModelComparison) -> list[TokenRow]:
    """One row per predicted token (position 1 on), as `lantern compare` prints them; an
    image's rows as one row at its first position."""
    starts = {grid.start: (k, grid) for k, grid in enumerate(result.images)}
    rows = []
    for r, (a, b, text) in enumerate(zip(*result.logprobs, result.text, strict=True)):
        if r + 1 in starts:
            k, grid = starts[r + 1]
            rows.append(TokenRow(r + 1, "", math.nan, math.nan, False,
                                 f"image {k + 1}: {grid.height} × {grid.width} patches, "
                                 f"#{grid.start}–#{grid.stop - 1}"))
        if text:
            rows.append(TokenRow(r + 1, result.tokens[r + 1], float(a), float(b),
                                 r + 1 in result.marked))
    return rows


def _number(value: float, sign: str = "") -> str:
    return "" if math.isnan(value) else f"{value:{sign}.3f}"


def _columns() -> list[Column]:
    return [Column("#", lambda r: str(r.position), numeric=True),
            Column("token", lambda r: r.image or visible_piece(r.token),
                   tip=lambda r: "the image's embeddings: these rows predict placeholders, "
                   "not text, so they are not compared" if r.image else ""),
            Column("log p A", lambda r: _number(r.a), numeric=True),
            Column("log p B", lambda r: _number(r.b), numeric=True),
            Column("Δ (B − A)", lambda r: _number(r.delta, "+"), numeric=True)]


def _tint(row: TokenRow) -> QColor | None:
    return IMAGE_COLOUR if row.image else DISAGREE if row.marked else None


class ComparePage(QWidget):
    requested = Signal(object)          # the Candidate picked
    cancelRequested = Signal()

    def __init__(self, table_factory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.candidates: list[Candidate] = []
        layout = scrolling_body(self)
        layout.addWidget(hint("Teacher-forces this conversation's latest prompt and answer, "
                              "as the template rendered them, through this chat's model (A) "
                              "and another model of the store with the same vocabulary (B), "
                              "in the fp32 reference."))
        layout.addLayout(self._model_row())
        self.button = QPushButton("Compare")
        self.button.setObjectName("compareButton")
        self.button.setSizePolicy(QSizePolicy.Fixed, QSizePolicy.Fixed)
        self.button.clicked.connect(self._request)
        self.strip = ProgressStrip(self.button, self.cancelRequested)
        self.progress, self.cancel_button = self.strip.progress, self.strip.cancel_button
        layout.addWidget(self.strip)
        self.status = hint(IDLE)
        self.status.setObjectName("compareStatus")
        layout.addWidget(self.status)
        self.chart = LineChart("Δ log p (B − A) per token (click a point)", height=120)
        self.chart.pointClicked.connect(self.select_row)
        layout.addWidget(self.chart)
        self.largest_title = section("Largest disagreements")
        layout.addWidget(self.largest_title)
        self.largest = RecordTableModel(_columns())
        self.largest_table = table_factory(self.largest, stretch_column=1)
        self.largest_table.clicked.connect(
            lambda index: self.scroll_to(self.largest.records[index.row()].position))
        self.largest_table.setFixedHeight(26 * MARKED + self.largest_table.horizontalHeader()
                                          .sizeHint().height() + 4)
        layout.addWidget(self.largest_table)
        layout.addWidget(section("Every token"))
        self.rows = RecordTableModel(_columns(), emphasis=_tint)
        self.table: QTableView = table_factory(self.rows, stretch_column=1)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setMinimumHeight(26 * 10)
        layout.addWidget(self.table, 1)

    def _model_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addWidget(QLabel("Other model (B):"))
        self.models = QComboBox()
        self.models.setObjectName("compareModels")
        self.models.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.models.setMinimumContentsLength(16)
        row.addWidget(self.models, 1)
        return row

    def set_candidates(self, candidates: list[Candidate]) -> None:
        """The store's other models; those of another vocabulary are listed, disabled,
        with the reason in their tooltip. The model picked before stays picked."""
        picked = self.models.currentText()
        self.candidates = list(candidates)
        self.models.clear()
        for candidate in candidates:
            label = candidate.name + (" — cannot be compared" if candidate.reason else "")
            self.models.addItem(label)
            item = self.models.model().item(self.models.count() - 1)
            item.setEnabled(not candidate.reason)
            item.setToolTip(f"{candidate.reason}: {SAME_FAMILY}" if candidate.reason else "")
        usable = [i for i, c in enumerate(candidates) if not c.reason]
        again = self.models.findText(picked)
        if usable:
            self.models.setCurrentIndex(again if again in usable else usable[0])
        if self.progress.isHidden():
            self.button.setEnabled(bool(usable))
            if not self.rows.records:          # a result's summary stays in view
                self.status.setText(_availability(candidates))

    def show_listing(self) -> None:
        """The store's models are being read: say so, not that there are none."""
        if self.progress.isHidden() and not self.rows.records:
            self.status.setText(LISTING)

    def _request(self) -> None:
        index = self.models.currentIndex()
        if 0 <= index < len(self.candidates):
            self.requested.emit(self.candidates[index])

    def show_running(self, other: str) -> None:
        self.strip.start()
        self.status.setText(f"{RUNNING} (B: {other})")

    def show_progress(self, stage: str, fraction: float) -> None:
        self.strip.advance(stage, fraction)

    def show_failed(self, text: str) -> None:
        self._idle()
        self.status.setText(text)

    def _idle(self) -> None:
        self.strip.still()
        self.button.setEnabled(any(not c.reason for c in self.candidates))

    def clear(self) -> None:
        """Another conversation, answer or model: the rows were over other text."""
        self._idle()
        self.status.setText(_availability(self.candidates))
        self.rows.set_records([])
        self.largest.set_records([])
        self.chart.set_series([])

    def show_comparison(self, result: ModelComparison) -> None:
        self._idle()
        rows = token_rows(result)
        self.rows.set_records(rows)
        self.largest_title.setText("Largest disagreements" + (
            " in the answer" if result.marked_from > 1 else ""))
        self.largest.set_records([r for p in result.marked for r in rows
                                  if r.position == p and not r.image])
        self.chart.set_series([Series("Δ log p", [r.delta for r in rows], DELTA_COLOUR)],
                              [r.image or visible_piece(r.token) for r in rows])
        self.status.setText(_summary(result))
        if result.marked_from > 1:      # the answer in view, the prompt above it
            first = self._row_of(result.marked_from)
            if first is not None:
                self.table.scrollTo(self.rows.index(first, 0), QAbstractItemView.PositionAtTop)

    def _row_of(self, position: int) -> int | None:
        return next((i for i, r in enumerate(self.rows.records)
                     if r.position == position and not r.image), None)

    def scroll_to(self, position: int) -> None:
        """Bring the row of token ``position`` into view, selected."""
        row = self._row_of(position)
        if row is not None:
            self.select_row(row)

    def select_row(self, row: int) -> None:
        """Row ``row`` of the table (a point of the chart) in view, selected."""
        if 0 <= row < len(self.rows.records):
            self.table.scrollTo(self.rows.index(row, 0), QAbstractItemView.PositionAtCenter)
            self.table.selectRow(row)
            self.chart.set_selected(row)


def _availability(candidates: list[Candidate]) -> str:
    if any(not c.reason for c in candidates):
        return IDLE
    if candidates:
        return ("No other model of the store shares this model's vocabulary (hover one for "
                f"why): {SAME_FAMILY}.")
    return f"The store holds no other model to compare with: {SAME_FAMILY}."


def _summary(result: ModelComparison) -> str:
    delta, compared = result.delta, result.text
    mean = float(np.abs(delta[compared]).mean()) if compared.any() else 0.0
    text = (f"A: {result.names[0]} · B: {result.names[1]} · {len(result.ids)} tokens · "
            f"mean |Δ| {mean:.3f} nats")
    answer = compared[result.marked_from - 1:]
    if result.marked_from > 1 and answer.any():
        text += (f" ({float(np.abs(delta[result.marked_from - 1:][answer]).mean()):.3f} over "
                 f"the answer, from #{result.marked_from})")
    if result.images:
        text += f" · {len(result.images)} image(s), whose rows are not compared"
    if result.marked:
        worst = result.marked[0]
        text += (f" · largest {delta[worst - 1]:+.3f} at #{worst} "
                 f"({visible_piece(result.tokens[worst])})")
    return text

