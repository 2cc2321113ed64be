"""The live debug panel: what the model weighed at each step.

Tabs: the top-5 candidates of the latest token (or the one under the mouse) with logit
and probability bars and the chosen row highlighted; the prompt's tokens; per-layer
statistics of the last token; and the engine-vs-reference check with its verdict.
Each table is a RecordTableModel over small records; the panel only fills them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QModelIndex, QRect, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPainterPath
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDockWidget,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.table_model import BAR_ROLE, Column, RecordTableModel

TOP_ROWS = 5
CHOSEN_COLOUR = QColor(255, 200, 70, 70)
FAILED_COLOUR = QColor(230, 80, 70, 70)
BAR_COLOUR = QColor(70, 130, 240, 70)


def visible_piece(piece: str) -> str:
    """Show whitespace so ' the' and 'the' and '\\n' are told apart."""
    return piece.replace(" ", "·").replace("\n", "⏎").replace("\t", "⇥") or "∅"


@dataclass(frozen=True)
class TopRow:
    id: int
    piece: str
    logit: float
    probability: float
    logit_fraction: float          # position between the lowest and highest shown logit
    chosen: bool


@dataclass(frozen=True)
class PromptRow:
    position: int
    id: int
    piece: str


@dataclass(frozen=True)
class LayerRow:
    label: str
    stats: tuple[float, float, float, float]   # mean, std, min, max


def top_rows(event) -> list[TopRow]:
    """The first five candidates of a TokenEvent, ready for the table."""
    tops = event.top[:TOP_ROWS]
    if not tops:
        return []
    low, high = min(t.logit for t in tops), max(t.logit for t in tops)
    return [TopRow(t.id, t.piece, t.logit, t.probability,
                   (t.logit - low) / (high - low) if high > low else 1.0, t.id == event.id)
            for t in tops]


def layer_rows(stats) -> list[LayerRow]:
    """stats: float [n_layers + 1, 4]; row 0 is the embeddings."""
    return [LayerRow("embeddings" if r == 0 else f"layer {r - 1}",
                     tuple(float(v) for v in row)) for r, row in enumerate(stats)]


def _number(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value)


class BarDelegate(QStyledItemDelegate):
    """Paints a rounded bar proportional to BAR_ROLE under the cell text."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        fraction = index.data(BAR_ROLE)
        if fraction is not None:
            rect: QRect = option.rect.adjusted(3, 4, -3, -4)
            width = int(rect.width() * max(0.0, min(1.0, float(fraction))))
            if width > 0:
                painter.save()
                painter.setRenderHint(QPainter.Antialiasing)
                path = QPainterPath()
                path.addRoundedRect(rect.x(), rect.y(), width, rect.height(), 3, 3)
                painter.fillPath(path, BAR_COLOUR)
                painter.restore()
        super().paint(painter, option, index)


def _table(model: RecordTableModel, stretch_column: int | None = None) -> QTableView:
    view = QTableView()
    view.setModel(model)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(26)
    view.setEditTriggers(QAbstractItemView.NoEditTriggers)
    view.setSelectionMode(QAbstractItemView.NoSelection)
    view.setFocusPolicy(Qt.NoFocus)
    view.setShowGrid(False)
    view.setAlternatingRowColors(True)
    view.setFrameShape(QFrame.NoFrame)
    header = view.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeToContents)
    header.setDefaultAlignment(Qt.AlignLeft | Qt.AlignVCenter)
    if stretch_column is None:
        header.setStretchLastSection(True)
    else:
        header.setSectionResizeMode(stretch_column, QHeaderView.Stretch)
    return view


def _hint(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("panelHint")
    label.setWordWrap(True)
    return label


class DebugPanel(QDockWidget):
    colorTokensToggled = Signal(bool)
    layerStatsToggled = Signal(bool)
    checkRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Inside the model", parent)
        self.setObjectName("debugPanel")
        self.setAllowedAreas(Qt.RightDockWidgetArea | Qt.LeftDockWidgetArea)
        self.setMinimumWidth(320)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self._token_tab(), "Token")
        self.tabs.addTab(self._prompt_tab(), "Prompt")
        self.tabs.addTab(self._layers_tab(), "Layers")
        self.tabs.addTab(self._reference_tab(), "Reference")
        self.setWidget(self.tabs)

    # -- token tab ------------------------------------------------------------------------

    def _token_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(12, 12, 12, 12)
        self.token_title = QLabel("Send a message to see each token's candidates.")
        self.token_title.setObjectName("tokenTitle")
        self.token_title.setWordWrap(True)
        layout.addWidget(self.token_title)
        self.top_model = RecordTableModel(
            [
                Column("token", lambda r: visible_piece(r.piece)),
                Column("id", lambda r: str(r.id), numeric=True),
                Column("logit", lambda r: f"{r.logit:.3f}", numeric=True,
                       bar=lambda r: r.logit_fraction),
                Column("probability", lambda r: f"{r.probability:.2%}", numeric=True,
                       bar=lambda r: r.probability),
            ],
            emphasis=lambda r: CHOSEN_COLOUR if r.chosen else None,
        )
        self.top_table = _table(self.top_model, stretch_column=0)
        header = self.top_table.horizontalHeader()
        for column, width in ((2, 96), (3, 120)):
            header.setSectionResizeMode(column, QHeaderView.Fixed)
            header.resizeSection(column, width)
        self.top_table.setItemDelegateForColumn(2, BarDelegate(self.top_table))
        self.top_table.setItemDelegateForColumn(3, BarDelegate(self.top_table))
        self.top_table.setFixedHeight(26 * TOP_ROWS + self.top_table.horizontalHeader()
                                      .sizeHint().height() + 4)
        layout.addWidget(self.top_table)
        self.entropy_label = _hint("")
        layout.addWidget(self.entropy_label)
        self.color_toggle = QCheckBox("Colour the reply by token probability (hover a token)")
        self.color_toggle.toggled.connect(self.colorTokensToggled)
        layout.addWidget(self.color_toggle)
        timing_title = QLabel("Timing")
        timing_title.setObjectName("panelSection")
        layout.addWidget(timing_title)
        self.timing_label = QLabel("–")
        self.timing_label.setObjectName("timing")
        self.timing_label.setWordWrap(True)
        layout.addWidget(self.timing_label)
        layout.addStretch(1)
        return page

    def show_token(self, event, *, latest: bool) -> None:
        """Fill the top-5 table from a TokenEvent; the chosen token's row is highlighted."""
        where = "Latest token" if latest else "Token under the mouse"
        self.token_title.setText(
            f"<b>{where}</b> #{event.index + 1}: <code>{_escape(visible_piece(event.piece))}"
            f"</code> (id {event.id})"
        )
        self.top_model.set_records(top_rows(event))
        self.entropy_label.setText(
            f"chosen: p {math.exp(event.logprob):.2%} · logprob {event.logprob:.3f} · "
            f"entropy {event.entropy:.3f} nats"
        )
        if event.layer_stats is not None:
            self.show_layer_stats(event.layer_stats)

    def show_timing(self, step_ms: float, tokens_per_s: float, prompt_tokens: int | None = None,
                    prompt_s: float | None = None) -> None:
        lines = [f"step {step_ms:.1f} ms · {tokens_per_s:.1f} tok/s"]
        if prompt_tokens is not None and prompt_s is not None:
            rate = prompt_tokens / prompt_s if prompt_s > 0 else 0.0
            lines.append(f"prompt: {prompt_tokens} tokens in {prompt_s:.2f} s ({rate:.0f} tok/s)")
        self.timing_label.setText("\n".join(lines))

    def clear(self) -> None:
        self.token_title.setText("Send a message to see each token's candidates.")
        self.top_model.set_records([])
        self.entropy_label.setText("")
        self.timing_label.setText("–")

    # -- prompt tab -----------------------------------------------------------------------

    def _prompt_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(12, 12, 12, 12)
        self.prompt_label = _hint("The prompt the model saw, token by token, appears here "
                                  "after the next message.")
        layout.addWidget(self.prompt_label)
        self.prompt_model = RecordTableModel([
            Column("#", lambda r: str(r.position), numeric=True),
            Column("id", lambda r: str(r.id), numeric=True),
            Column("piece", lambda r: visible_piece(r.piece)),
        ])
        layout.addWidget(_table(self.prompt_model))
        return page

    def show_prompt(self, ids: Sequence[int], pieces: Sequence[str]) -> None:
        self.prompt_label.setText(f"{len(ids)} prompt tokens (template markup included)")
        self.prompt_model.set_records(
            [PromptRow(p, int(i), piece) for p, (i, piece) in enumerate(zip(ids, pieces,
                                                                            strict=True))])

    # -- layers tab -----------------------------------------------------------------------

    def _layers_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(12, 12, 12, 12)
        self.stats_toggle = QCheckBox("Record per-layer statistics (reloads the model)")
        self.stats_toggle.toggled.connect(self.layerStatsToggled)
        layout.addWidget(self.stats_toggle)
        layout.addWidget(_hint("Mean, spread and range of the latest token's hidden state "
                               "after each layer."))
        self.stats_model = RecordTableModel([
            Column("layer", lambda r: r.label),
            *(Column(name, lambda r, i=i: _number(r.stats[i]), numeric=True)
              for i, name in enumerate(("mean", "std", "min", "max"))),
        ])
        layout.addWidget(_table(self.stats_model, stretch_column=0))
        return page

    def show_layer_stats(self, stats) -> None:
        self.stats_model.set_records(layer_rows(stats))

    # -- reference tab --------------------------------------------------------------------

    def _reference_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(12, 12, 12, 12)
        layout.addWidget(_hint("Runs the current context through a plain numpy forward pass "
                               "and compares every layer with the engine."))
        row = QHBoxLayout()
        self.check_button = QPushButton("Check against reference")
        self.check_button.setObjectName("checkButton")
        self.check_button.clicked.connect(self.checkRequested)
        row.addWidget(self.check_button)
        row.addStretch(1)
        layout.addLayout(row)
        self.verdict = QLabel("")
        self.verdict.setObjectName("verdict")
        self.verdict.setWordWrap(True)
        layout.addWidget(self.verdict)
        self.check_model = RecordTableModel(
            [
                Column("layer", lambda r: r.label),
                *(Column(name, lambda r, i=i: _number(r.stats[i]), numeric=True)
                  for i, name in enumerate(("mean", "std", "min", "max"))),
                Column("max |Δ|", lambda r: f"{r.max_abs_diff:.3g}", numeric=True),
            ],
            emphasis=lambda r: None if r.ok else FAILED_COLOUR,
        )
        layout.addWidget(_table(self.check_model, stretch_column=0))
        return page

    def show_check_running(self) -> None:
        self.check_button.setEnabled(False)
        self._set_verdict("Running the numpy reference on the current context…", None)

    def show_check(self, report) -> None:
        """report: engine.runtime.check.CheckReport (rows, verdict, ok)."""
        self.check_button.setEnabled(True)
        self._set_verdict(report.verdict, bool(report.ok))
        self.check_model.set_records(list(report.rows))

    def show_check_failed(self, message: str) -> None:
        self.check_button.setEnabled(True)
        self._set_verdict(f"The check could not run: {message}", False)

    def _set_verdict(self, text: str, ok: bool | None) -> None:
        self.verdict.setText(text)
        self.verdict.setProperty("ok", "" if ok is None else ("yes" if ok else "no"))
        self.verdict.style().unpolish(self.verdict)
        self.verdict.style().polish(self.verdict)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
