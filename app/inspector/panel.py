"""The live debug panel: what the model weighed at each step.

Tabs: the top-5 candidates of the latest token (or the one under the mouse) with logit
and probability bars and the chosen row highlighted; the prompt's tokens; per-layer
statistics of the last token; the engine-vs-reference check with its verdict, under it the
layer dumps of your own engine against the reference (app/inspector/dump_section.py); and a
second model's log-probabilities of the same conversation (Compare).
Each table is a RecordTableModel over small records; the panel only fills them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QModelIndex, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPainterPath
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDockWidget,
    QFrame,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.inspector.charts import LineChart, Series
from app.inspector.compare_page import ComparePage
from app.inspector.dump_section import DumpSection
from app.inspector.inside_page import InsidePage
from app.inspector.opinion_page import OpinionPage
from app.inspector.page_buttons import PageButtons
from app.inspector.progress_strip import ProgressStrip
from app.inspector.rows import (
    TOP_ROWS,
    cut_by_text,
    cut_by_tip,
    layer_rows,
    prompt_rows,
    top_pairs,
    top_rows,
    visible_piece,
)
from app.inspector.table_model import BAR_ROLE, Column, RecordTableModel
from app.inspector.tracing_page import TracingPage
from app.inspector.widgets import (
    IMAGE_COLOUR,
    hint,
    section,
)
from app.verdict import set_verdict, verdict_label
from engine.chat.backend import Capability, unavailable_reason

CHOSEN_COLOUR = QColor(255, 200, 70, 70)
FAILED_COLOUR = QColor(230, 80, 70, 70)
BAR_COLOUR = QColor(70, 130, 240, 70)
PROBABILITY_COLOUR = QColor(60, 150, 90)
ENTROPY_COLOUR = QColor(70, 130, 240)
MIN_WIDTH = 430                   # the Token page whole (its top-5 table, the reasons)
MEAN_COLOUR = QColor(200, 120, 40)
DIFF_COLOUR = QColor(220, 70, 60)
TOLERANCE_COLOUR = QColor(130, 130, 130)
CELL_PADDING = 18   # a table cell's margins around its text
STATS_OFF = "Tick “Record per-layer statistics”, then send a message or regenerate."
STATS_NEXT = "Recorded from the next answer: send a message or regenerate."
FRAME_MS = 33    # a streamed answer's Token tab and chart follow it once a frame


PROMPT_EMPTY = ("The prompt the model saw, token by token, appears here after the next "
                "message.")


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


def table_view(model: RecordTableModel, stretch_column: int | None = None) -> QTableView:
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


def scrolling(page: QWidget) -> QScrollArea:
    """A tab whose content scrolls when the panel is shorter than it (a 720-pixel screen):
    its fixed-height tables would otherwise make the window taller than the screen."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
    area.setWidget(page)
    return area


def fix_columns(view: QTableView, samples: dict[int, str]) -> None:
    """Size columns once for their widest text (a sample, or the header) rather than
    measuring every row again on each update: the Token tab's tables change with every
    streamed token, and measuring them cost the window most of a frame."""
    font = QFont(view.font())
    font.setBold(True)                     # the chosen row is bold, the widest
    header, metrics = view.horizontalHeader(), QFontMetrics(font)
    for column, sample in samples.items():
        title = str(view.model().headerData(column, Qt.Horizontal))
        width = max(metrics.horizontalAdvance(text) for text in (sample, title))
        header.setSectionResizeMode(column, QHeaderView.Fixed)
        header.resizeSection(column, width + CELL_PADDING)


def _check_tip(row) -> str:
    """A LayerCheck in full: both sides' statistics and the tolerance (the bar under
    max |Δ| shows how much of it is used)."""
    names = ("mean", "std", "min", "max")
    lines = [f"{who}: " + "  ".join(f"{n} {_number(v)}"
                                    for n, v in zip(names, stats, strict=True))
             for who, stats in (("engine", row.stats), ("reference", row.reference_stats))]
    return "\n".join([row.label, *lines, f"max |Δ| {row.max_abs_diff:.3g} of tolerance "
                       f"{row.tolerance:.3g}"])


class DebugPanel(QDockWidget):
    colorTokensToggled = Signal(bool)
    layerStatsToggled = Signal(bool)
    checkRequested = Signal()
    checkCancelRequested = Signal()
    replyPointClicked = Signal(int)          # index of a token in the reply
    promptRowClicked = Signal(int)           # a prompt position
    pageShown = Signal(QWidget)              # a page came into view: chosen, or panel opened

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Inside the model", parent)
        self.setObjectName("debugPanel")
        self.setAllowedAreas(Qt.RightDockWidgetArea | Qt.LeftDockWidgetArea)
        self.setMinimumWidth(MIN_WIDTH)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(scrolling(self._token_tab()), "Token")
        self.tabs.addTab(self._prompt_tab(), "Prompt")
        self.inside = InsidePage()
        self.tabs.addTab(self.inside, "Inside")
        self.tracing = TracingPage()
        self.tabs.addTab(self.tracing, "Tracing")
        self.tabs.addTab(self._layers_tab(), "Layers")
        self.tabs.addTab(scrolling(self._reference_tab()), "Reference")
        self.opinion = OpinionPage(table_view)
        self.tabs.addTab(self.opinion, "llama.cpp")
        self.compare = ComparePage(table_view)
        self.tabs.addTab(self.compare, "Compare")
        self.page_buttons = PageButtons(self.tabs)
        self.tabs.currentChanged.connect(lambda index: self.pageShown.emit(self.tabs.widget(index)))
        self.visibilityChanged.connect(
            lambda visible: visible and self.pageShown.emit(self.tabs.currentWidget()))
        self.reply: list = []                # TokenEvents of the latest answer
        self._latest = None                  # the streamed token the Token tab shows next
        self._frame = QTimer(self, singleShot=True, interval=FRAME_MS)
        self._frame.timeout.connect(self.flush)
        # what each tab needs from the backend; a tab it cannot fill is disabled, and why
        self.tab_needs = {1: Capability.PROMPT_TOKENS, 2: Capability.LENS,
                          3: Capability.REFERENCE, 4: Capability.LAYERS,
                          5: Capability.REFERENCE, 6: Capability.LOGITS, 7: Capability.LENS}
        self.unavailable = hint("")
        self.unavailable.setObjectName("panelUnavailable")
        self.unavailable.hide()
        body = QWidget()
        body_layout = QVBoxLayout(body)
        body_layout.setContentsMargins(0, 0, 0, 0)
        body_layout.addWidget(self.unavailable)
        body_layout.addWidget(self.page_buttons)
        body_layout.addWidget(self.tabs, 1)
        self.setWidget(body)

    def showing(self, page: QWidget) -> bool:
        """``page`` is in view: the panel open on its tab. Pages that read the store or
        the tokenizer for what they show do so only then, and again on ``pageShown``."""
        return not self.isHidden() and self.tabs.currentWidget() is page

    def set_capabilities(self, capabilities: frozenset[Capability], model_name: str,
                         where: str) -> None:
        """Enable the tabs the backend can fill; the others say plainly why they cannot."""
        missing = []
        for tab, need in self.tab_needs.items():
            able = need in capabilities
            self.tabs.setTabEnabled(tab, able)
            self.tabs.setTabToolTip(tab, "" if able else unavailable_reason(need, model_name,
                                                                            where))
            if not able:
                missing.append(self.tabs.tabText(tab))
        if missing and self.tabs.currentIndex() in self.tab_needs and \
                not self.tabs.isTabEnabled(self.tabs.currentIndex()):
            self.tabs.setCurrentIndex(0)
        self.page_buttons.sync()
        self.unavailable.setVisible(bool(missing))
        self.unavailable.setText(
            f"{', '.join(missing)}: not available for {model_name}. It runs on {where}, "
            "which sends the answer and its log-probabilities but not the model's insides "
            "(those views need the weights on this computer)." if missing else "")

    # -- token tab ------------------------------------------------------------------------

    def _token_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(12, 12, 12, 12)
        self.token_title = QLabel("Send a message to see each token's candidates.")
        self.token_title.setObjectName("tokenTitle")
        self.token_title.setWordWrap(True)
        layout.addWidget(self.token_title)
        self.steering_label = QLabel("")
        self.steering_label.setObjectName("steeringMark")
        self.steering_label.setWordWrap(True)
        self.steering_label.hide()
        layout.addWidget(self.steering_label)
        self.top_model = RecordTableModel(
            [
                Column("token", lambda r: visible_piece(r.piece)),
                Column("id", lambda r: str(r.id) if r.id >= 0 else "—", numeric=True,
                       tip=lambda r: "" if r.id >= 0 else "the server sends no token ids"),
                Column("logit", lambda r: "—" if r.logit is None else f"{r.logit:.3f}",
                       numeric=True, bar=lambda r: r.logit_fraction,
                       tip=lambda r: "the server reports log-probabilities only"
                       if r.logit is None else ""),
                Column("probability", lambda r: f"{r.probability:.2%}", numeric=True,
                       bar=lambda r: r.probability),
            ],
            emphasis=lambda r: CHOSEN_COLOUR if r.chosen else None,
        )
        self.top_table = table_view(self.top_model, stretch_column=0)
        header = self.top_table.horizontalHeader()
        fix_columns(self.top_table, {1: "151935"})
        for column, width in ((2, 96), (3, 120)):
            header.setSectionResizeMode(column, QHeaderView.Fixed)
            header.resizeSection(column, width)
        self.top_table.setItemDelegateForColumn(2, BarDelegate(self.top_table))
        self.top_table.setItemDelegateForColumn(3, BarDelegate(self.top_table))
        self.top_table.setFixedHeight(26 * TOP_ROWS + self.top_table.horizontalHeader()
                                      .sizeHint().height() + 4)
        layout.addWidget(self.top_table)
        self.entropy_label = hint("")
        layout.addWidget(self.entropy_label)
        layout.addWidget(section("Why this token"))
        self.reasons_label = hint("")
        layout.addWidget(self.reasons_label)
        layout.addWidget(self._reasons_table())
        layout.addWidget(section("Along the reply"))
        self.reply_chart = LineChart("probability and entropy per token (click a point)")
        self.reply_chart.pointClicked.connect(self.replyPointClicked)
        layout.addWidget(self.reply_chart)
        self.color_toggle = QCheckBox("Colour the reply by token probability (hover a token)")
        self.color_toggle.toggled.connect(self.colorTokensToggled)
        layout.addWidget(self.color_toggle)
        layout.addWidget(section("Timing"))
        self.timing_label = QLabel("–")
        self.timing_label.setObjectName("timing")
        self.timing_label.setWordWrap(True)
        layout.addWidget(self.timing_label)
        layout.addStretch(1)
        return page

    def _reasons_table(self) -> QTableView:
        """The sampler's reasons, one row per candidate."""
        self.reasons_model = RecordTableModel(
            [
                Column("token", lambda r: visible_piece(r.piece),
                       tip=lambda r: f"{visible_piece(r.piece)} (id {r.id})"),
                Column("raw", lambda r: f"{r.raw_logit:.2f}", numeric=True,
                       tip=lambda r: "the model's logit"),
                Column("pen.", lambda r: f"{r.penalized_logit:.2f}", numeric=True,
                       tip=lambda r: "penalised: the logit after repeat / presence / "
                       "frequency penalties"),
                Column("/T", lambda r: "–" if r.scaled_logit is None else
                       f"{r.scaled_logit:.2f}", numeric=True,
                       tip=lambda r: "after temperature (– : a filter dropped it)"),
                Column("cut by", cut_by_text, tip=cut_by_tip),
                Column("p", lambda r: f"{r.probability:.1%}", numeric=True,
                       bar=lambda r: r.probability,
                       tip=lambda r: "final probability in the draw"),
            ],
            emphasis=lambda r: CHOSEN_COLOUR if r.chosen else None,
        )
        self.reasons_table = table_view(self.reasons_model, stretch_column=4)
        self.reasons_table.setItemDelegateForColumn(5, BarDelegate(self.reasons_table))
        # numbers stay whole, a token as long as most; "cut by" takes the room left
        # (elided past it: its tooltip, and a long token's, says it all)
        fix_columns(self.reasons_table, {0: "·because", 1: "-99.99", 2: "-99.99",
                                         3: "-99.99", 5: "100.0%"})
        self.reasons_table.setMinimumHeight(26 * 6)
        return self.reasons_table

    def show_token(self, event, *, latest: bool) -> None:
        """Fill the top-5 table from a TokenEvent; the chosen token's row is highlighted."""
        where = "Latest token" if latest else "Token under the mouse"
        where_id = f" (id {event.id})" if event.id >= 0 else ""
        self.token_title.setText(
            f"<b>{where}</b> #{event.index + 1}: <code>{_escape(visible_piece(event.piece))}"
            f"</code>{where_id}" + (" · <u>drafted</u>" if event.drafted else "")
            + (" · thinking" if event.thinking else "")
            + (" · <b>forced by the schema</b>" if event.reasons and event.reasons.schema_forced
               else "")
        )
        self.top_model.set_records(top_rows(event))
        reasons = event.reasons
        self.reasons_model.set_records(list(reasons.candidates) if reasons else [])
        self.reasons_table.setVisible(reasons is not None)
        self.reasons_label.setText(reasons.summary if reasons else
                                   "" if event.logit is not None else
                                   "not available: only log-probabilities are known (a "
                                   "server's token, or one from the history)")
        if math.isnan(event.logprob):
            self.entropy_label.setText("the server sent no log-probabilities for this token")
            return
        entropy = (f"entropy {event.entropy:.3f} nats" if math.isfinite(event.entropy)
                   else "entropy — (only the best candidates are known: a server's token, "
                        "or one reopened from the history)")
        self.entropy_label.setText(
            f"chosen: p {math.exp(event.logprob):.2%} · logprob {event.logprob:.3f} · {entropy}")
        if event.layer_stats is not None:
            self.show_layer_stats(event.layer_stats)

    def start_reply(self) -> None:
        """A new answer begins: the chart along the reply starts over."""
        self.reply = []
        self._latest = None
        self._frame.stop()
        self.reply_chart.set_selected(None)
        self.reply_chart.set_series([])

    def stream_token(self, event) -> None:
        """A token of the answer being streamed: kept now, shown with the next frame (the
        tables and the chart take milliseconds to fill, and tokens may come faster)."""
        self.reply.append(event)
        self._latest = event
        if not self._frame.isActive():
            self._frame.start()

    def flush(self) -> None:
        """Show what streamed since the last frame now (the answer ended)."""
        self._frame.stop()
        if self._latest is not None:
            event, self._latest = self._latest, None
            self.show_token(event, latest=True)
            self._show_reply()

    def _show_reply(self) -> None:
        series = [Series("p", [math.exp(e.logprob) for e in self.reply], PROBABILITY_COLOUR)]
        entropy = [e.entropy for e in self.reply]
        with_entropy = any(math.isfinite(v) for v in entropy)   # a server reports none
        if with_entropy:
            series.append(Series("entropy (nats)", entropy, ENTROPY_COLOUR))
        self.reply_chart.title = ("probability and entropy per token (click a point)"
                                  if with_entropy else "probability per token (click a point)")
        self.reply_chart.set_series(series, [visible_piece(e.piece) for e in self.reply])

    def show_timing(self, step_ms: float, tokens_per_s: float, prompt_tokens: int | None = None,
                    prompt_s: float | None = None) -> None:
        lines = [f"step {step_ms:.1f} ms · {tokens_per_s:.1f} tok/s"]
        if prompt_tokens == 0 and prompt_s is not None:      # a server that does not count
            lines.append(f"prompt: {prompt_s:.2f} s to the first token")
        elif prompt_tokens is not None and prompt_s is not None:
            rate = prompt_tokens / prompt_s if prompt_s > 0 else 0.0
            lines.append(f"prompt: {prompt_tokens} tokens in {prompt_s:.2f} s ({rate:.0f} tok/s)")
        self.timing_label.setText("\n".join(lines))

    def show_steering(self, label: str) -> None:
        """Mark the latest answer as steered by control vectors ("" none): its tokens and
        the views of it come from a model with those vectors added."""
        self.steering_label.setText(
            f"Steered answer: {label} added to the residual stream (the views below and "
            "the Inside tab include them)" if label else "")
        self.steering_label.setVisible(bool(label))

    def clear(self) -> None:
        """Another conversation (or none): nothing of the previous one stays; every tab
        says what fills it."""
        self.token_title.setText("Send a message to see each token's candidates.")
        self.show_steering("")
        self.top_model.set_records([])
        self.reasons_model.set_records([])
        self.reasons_label.setText("")
        self.start_reply()
        self.inside.clear()
        self.entropy_label.setText("")
        self.timing_label.setText("–")
        self.prompt_label.setText(PROMPT_EMPTY)
        self.prompt_model.set_records([])
        self.stats_model.set_records([])
        self.stats_chart.set_series([])
        self.clear_check()
        self.dump.clear()
        self.opinion.clear()
        self.compare.clear()

    def show_saved_answer(self, tokens: list) -> None:
        """A reopened conversation: its latest answer's saved tokens fill the Token tab
        (the Prompt, Layers and Reference tabs say how they fill: a new message, a check)."""
        if not tokens:
            self.token_title.setText("This conversation's history holds no per-token data "
                                     "for its latest answer: send a message to see it.")
            return
        self.reply = list(tokens)
        self._show_reply()
        self.show_token(tokens[-1], latest=True)
        self.timing_label.setText("from the history: log-probabilities and the best "
                                  "alternatives were kept, logits and reasons were not")

    def clear_check(self) -> None:
        """A new answer or another conversation: an earlier verdict no longer applies."""
        self.check_strip.still()
        set_verdict(self.verdict, "", None)
        self.pair_model.set_records([])
        self.check_model.set_records([])
        self.check_chart.set_series([])

    # -- prompt tab -----------------------------------------------------------------------

    def _prompt_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(12, 12, 12, 12)
        self.prompt_label = hint(PROMPT_EMPTY)
        layout.addWidget(self.prompt_label)
        self.prompt_model = RecordTableModel(
            [
                Column("#", lambda r: str(r.position), numeric=True),
                Column("id", lambda r: str(r.id), numeric=True),
                Column("piece", lambda r: visible_piece(r.piece),
                       tip=lambda r: "replaced by the image's embeddings" if r.image else ""),
                Column("t · h · w", lambda r: r.rope,
                       tip=lambda r: "M-RoPE position: time, row, column"),
            ],
            emphasis=lambda r: IMAGE_COLOUR if r.image else None,
            bold=False,
        )
        self.prompt_table = table_view(self.prompt_model, stretch_column=2)
        self.prompt_table.clicked.connect(lambda index: self.promptRowClicked.emit(index.row()))
        layout.addWidget(self.prompt_table)
        return page

    def show_prompt(self, prompt, piece: Callable[[int], str]) -> None:
        """prompt: engine PromptTokens; image rows are tinted and, where positions are
        M-RoPE's three axes, each row shows its (t, h, w)."""
        rows = prompt_rows(prompt, piece)
        images = sum(r.image for r in rows)
        note = f"; {images} of them carry image embeddings" if images else ""
        self.prompt_label.setText(f"{len(rows)} prompt tokens (template markup included{note}); "
                                  "click one to inspect it on the Inside tab")
        self.prompt_model.set_records(rows)
        self.prompt_table.setColumnHidden(3, np.ndim(prompt.positions) == 1)

    # -- layers tab -----------------------------------------------------------------------

    def _layers_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(12, 12, 12, 12)
        self.stats_toggle = QCheckBox("Record per-layer statistics")
        self.stats_toggle.toggled.connect(self.layerStatsToggled)
        layout.addWidget(self.stats_toggle)
        layout.addWidget(hint("Reloads the model; each token then also brings back every "
                              "layer's hidden state, so answers stream more slowly while it "
                              "is on."))
        layout.addWidget(hint("Mean, spread and range of the latest token's hidden state "
                               "after each layer."))
        self.stats_chart = LineChart("per layer (0 = embeddings)", empty=STATS_OFF)
        self.stats_toggle.toggled.connect(
            lambda on: self.stats_chart.set_empty(STATS_NEXT if on else STATS_OFF))
        layout.addWidget(self.stats_chart)
        self.stats_model = RecordTableModel([
            Column("layer", lambda r: r.label),
            *(Column(name, lambda r, i=i: _number(r.stats[i]), numeric=True)
              for i, name in enumerate(("mean", "std", "min", "max"))),
        ])
        layout.addWidget(table_view(self.stats_model, stretch_column=0))
        return page

    def show_layer_stats(self, stats) -> None:
        rows = layer_rows(stats)
        self.stats_model.set_records(rows)
        self.stats_chart.set_series(
            [Series("std", [r.stats[1] for r in rows], ENTROPY_COLOUR),
             Series("mean", [r.stats[0] for r in rows], MEAN_COLOUR)],
            [r.label for r in rows])

    # -- reference tab --------------------------------------------------------------------

    def _reference_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(12, 12, 12, 12)
        layout.addWidget(hint("Runs the last prompt through a plain numpy forward pass and "
                               "compares the engine with it after every layer and at the "
                               "next token."))
        self.check_button = QPushButton("Check against reference")
        self.check_button.setObjectName("checkButton")
        self.check_button.clicked.connect(self.checkRequested)
        self.check_strip = ProgressStrip(self.check_button, self.checkCancelRequested)
        layout.addWidget(self.check_strip)
        self.verdict = verdict_label()
        layout.addWidget(self.verdict)

        layout.addWidget(section("Next token: top 5"))
        self.pair_model = RecordTableModel(
            [
                Column("#", lambda r: str(r.rank), numeric=True),
                Column("engine", lambda r: visible_piece(r.engine.piece),
                       tip=lambda r: f"id {r.engine.id}"),
                Column("logit", lambda r: f"{r.engine.logit:.3f}", numeric=True),
                Column("reference", lambda r: visible_piece(r.reference.piece),
                       tip=lambda r: f"id {r.reference.id}"),
                Column("logit", lambda r: f"{r.reference.logit:.3f}", numeric=True),
            ],
            emphasis=lambda r: None if r.same else CHOSEN_COLOUR,
        )
        self.pair_table = table_view(self.pair_model)
        header = self.pair_table.horizontalHeader()
        for column in (1, 3):
            header.setSectionResizeMode(column, QHeaderView.Stretch)
        header.setStretchLastSection(False)
        self.pair_table.setFixedHeight(26 * TOP_ROWS + header.sizeHint().height() + 4)
        layout.addWidget(self.pair_table)

        layout.addWidget(section("Last token's hidden state, layer by layer"))
        layout.addWidget(hint("The bar under max |Δ| is the share of that layer's tolerance "
                               "used; hover a row for both sides' statistics."))
        self.check_model = RecordTableModel(
            [
                Column("layer", lambda r: r.label, tip=_check_tip),
                Column("std", lambda r: _number(r.stats[1]), numeric=True, tip=_check_tip),
                Column("ref std", lambda r: _number(r.reference_stats[1]), numeric=True,
                       tip=_check_tip),
                Column("max |Δ|", lambda r: f"{r.max_abs_diff:.3g}", numeric=True,
                       bar=lambda r: r.max_abs_diff / r.tolerance if r.tolerance else 1.0,
                       tip=_check_tip),
            ],
            emphasis=lambda r: None if r.ok else FAILED_COLOUR,
        )
        self.check_chart = LineChart("max |Δ| per layer (log scale)", log=True)
        layout.addWidget(self.check_chart)
        self.check_table = table_view(self.check_model)
        self.check_table.setItemDelegateForColumn(3, BarDelegate(self.check_table))
        self.check_table.setMinimumHeight(26 * 8)
        layout.addWidget(self.check_table, 1)
        self.dump = DumpSection(table_view)
        layout.addWidget(self.dump, 1)
        return page

    def show_check_running(self) -> None:
        self.check_strip.start("Running the numpy reference on the last prompt…",
                               measured=False)
        set_verdict(self.verdict, "", None)

    def show_check(self, report) -> None:
        """report: engine.runtime.check.CheckReport: the verdict (green or red), the two
        top-5 lists side by side, and one row per layer (the first one off in view)."""
        self.check_strip.still()
        set_verdict(self.verdict, report.verdict, bool(report.ok))
        self.pair_model.set_records(top_pairs(report))
        self.check_model.set_records(list(report.rows))
        self.check_chart.set_series(
            [Series("max |Δ|", [r.max_abs_diff for r in report.rows], DIFF_COLOUR),
             Series("tolerance", [r.tolerance for r in report.rows], TOLERANCE_COLOUR,
                    dashed=True)],
            [r.label for r in report.rows])
        if report.first_off is not None:
            self.check_table.scrollTo(self.check_model.index(report.first_off, 0))

    def show_check_failed(self, message: str) -> None:
        self.check_strip.still()
        set_verdict(self.verdict, f"The check could not run: {message}", False)

    def show_check_cancelled(self) -> None:
        self.check_strip.still()
        set_verdict(self.verdict, "Cancelled.", None)



def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
