"""The panel's "Compare" tab: this conversation's text under two models.

The latest prompt and answer, as the chat template rendered them, teacher-forced through
the loaded model (A) and a second model of the store with the same vocabulary (B): each
token's log-probability under both and the difference, the largest disagreements tinted
and listed (click one to find it), and the mean |Δ|. app/inspector/model_comparer.py runs it.
"""

from __future__ import annotations

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
from app.inspector.rows import visible_piece
from app.inspector.table_model import Column, RecordTableModel
from app.inspector.widgets import hint, progress_row, scrolling_body, section
from engine.inspect.model_compare import Candidate, ModelComparison

DISAGREE = QColor(230, 80, 70, 80)
DELTA_COLOUR = QColor(200, 80, 60)
SAME_FAMILY = ("pick a model of the same family (another size or quantization of it), or "
               "get one with + Get a model")
IDLE = "Pick the other model, then press Compare."
RUNNING = "Running both models over this conversation…"
MARKED = 5             # rows of the largest disagreements (compare_models marks 5)


@dataclass(frozen=True)
class TokenRow:
    position: int
    token: str
    a: float            # log p under the loaded model
    b: float            # log p under the other one
    marked: bool

    @property
    def delta(self) -> float:
        return self.b - self.a


def token_rows(result: ModelComparison) -> list[TokenRow]:
    """One row per predicted token (position 1 on), as `lantern compare` prints them."""
    return [TokenRow(r + 1, result.tokens[r + 1], float(a), float(b), r + 1 in result.marked)
            for r, (a, b) in enumerate(zip(*result.logprobs, strict=True))]


def _columns() -> list[Column]:
    return [Column("#", lambda r: str(r.position), numeric=True),
            Column("token", lambda r: visible_piece(r.token)),
            Column("log p A", lambda r: f"{r.a:.3f}", numeric=True),
            Column("log p B", lambda r: f"{r.b:.3f}", numeric=True),
            Column("Δ (B − A)", lambda r: f"{r.delta:+.3f}", numeric=True)]


class ComparePage(QWidget):
    requested = Signal(object)          # the Candidate picked
    cancelRequested = Signal()
    shown = Signal()                    # the tab came into view

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
        row, self.progress, self.cancel_button = progress_row(self.button, self.cancelRequested)
        row.addStretch(0)
        layout.addLayout(row)
        self.status = hint(IDLE)
        self.status.setObjectName("compareStatus")
        layout.addWidget(self.status)
        self.chart = LineChart("Δ log p (B − A) per token (click a point)", height=120)
        self.chart.pointClicked.connect(lambda index: self.scroll_to(index + 1))
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
        self.rows = RecordTableModel(_columns(), emphasis=lambda r: DISAGREE if r.marked
                                     else None)
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

    def showEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        self.shown.emit()

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

    def _request(self) -> None:
        index = self.models.currentIndex()
        if 0 <= index < len(self.candidates):
            self.requested.emit(self.candidates[index])

    def show_running(self, other: str) -> None:
        self.button.setEnabled(False)
        self.progress.setValue(0)
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self.status.setText(f"{RUNNING} (B: {other})")

    def show_progress(self, stage: str, fraction: float) -> None:
        self.progress.setValue(int(100 * fraction))
        self.progress.setFormat(stage)

    def show_failed(self, text: str) -> None:
        self._idle()
        self.status.setText(text)

    def _idle(self) -> None:
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)
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
        self.largest.set_records([rows[p - 1] for p in result.marked])
        self.largest_title.setText("Largest disagreements" + (
            " in the answer" if result.marked_from > 1 else ""))
        self.chart.set_series([Series("Δ log p", result.delta.tolist(), DELTA_COLOUR)],
                              [visible_piece(r.token) for r in rows])
        self.status.setText(_summary(result))
        if result.marked_from > 1:      # the answer in view, the prompt above it
            self.table.scrollTo(self.rows.index(result.marked_from - 1, 0),
                                QAbstractItemView.PositionAtTop)

    def scroll_to(self, position: int) -> None:
        """Bring the row of token ``position`` into view, selected."""
        if 1 <= position <= len(self.rows.records):
            index = self.rows.index(position - 1, 0)
            self.table.scrollTo(index, QAbstractItemView.PositionAtCenter)
            self.table.selectRow(position - 1)
            self.chart.set_selected(position - 1)


def _availability(candidates: list[Candidate]) -> str:
    if any(not c.reason for c in candidates):
        return IDLE
    if candidates:
        return ("No other model of the store shares this model's vocabulary (hover one for "
                f"why): {SAME_FAMILY}.")
    return f"The store holds no other model to compare with: {SAME_FAMILY}."


def _summary(result: ModelComparison) -> str:
    delta = result.delta
    mean = float(np.abs(delta).mean()) if len(delta) else 0.0
    text = (f"A: {result.names[0]} · B: {result.names[1]} · {len(result.ids)} tokens · "
            f"mean |Δ| {mean:.3f} nats")
    if result.marked_from > 1:
        text += (f" ({float(np.abs(delta[result.marked_from - 1:]).mean()):.3f} over the "
                 f"answer, from #{result.marked_from})")
    if result.marked:
        worst = result.marked[0]
        text += (f" · largest {delta[worst - 1]:+.3f} at #{worst} "
                 f"({visible_piece(result.tokens[worst])})")
    return text

