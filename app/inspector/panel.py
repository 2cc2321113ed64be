"""The live debug panel: what the model weighed at each step.

The panel holds the Token tab (the top-5 candidates of the latest token, or the one under
the mouse, with logit and probability bars and the chosen row highlighted; the sampler's
reasons; the reply's chart) and one page class per other tab: Prompt, Inside, Tracing,
Layers, Reference, llama.cpp and Compare (app/inspector/*_page.py). Each table is a
RecordTableModel over small records; the pages only fill them.
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QCheckBox,
    QDockWidget,
    QHeaderView,
    QLabel,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.inspector.charts import LineChart, Series
from app.inspector.compare_page import ComparePage
from app.inspector.inside_page import InsidePage
from app.inspector.layers_page import LayersPage
from app.inspector.opinion_page import OpinionPage
from app.inspector.page_buttons import PageButtons
from app.inspector.prompt_page import PromptPage
from app.inspector.reference_page import ReferencePage
from app.inspector.rows import (
    TOP_ROWS,
    cut_by_text,
    cut_by_tip,
    top_rows,
    visible_piece,
)
from app.inspector.table_model import Column, RecordTableModel
from app.inspector.tables import BarDelegate, fix_columns, scrolling, table_view
from app.inspector.tracing_page import TracingPage
from app.inspector.widgets import (
    hint,
    section,
)
from engine.chat.backend import Capability, unavailable_reason

CHOSEN_COLOUR = QColor(255, 200, 70, 70)
PROBABILITY_COLOUR = QColor(60, 150, 90)
ENTROPY_COLOUR = QColor(70, 130, 240)
MIN_WIDTH = 430                   # the Token page whole (its top-5 table, the reasons)
FRAME_MS = 33    # a streamed answer's Token tab and chart follow it once a frame



class DebugPanel(QDockWidget):
    colorTokensToggled = Signal(bool)
    replyPointClicked = Signal(int)          # index of a token in the reply
    pageShown = Signal(QWidget)              # a page came into view: chosen, or panel opened

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Inside the model", parent)
        self.setObjectName("debugPanel")
        self.setAllowedAreas(Qt.RightDockWidgetArea | Qt.LeftDockWidgetArea)
        self.setMinimumWidth(MIN_WIDTH)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(scrolling(self._token_tab()), "Token")
        self.prompt = PromptPage()
        self.tabs.addTab(self.prompt, "Prompt")
        self.inside = InsidePage()
        self.tabs.addTab(self.inside, "Inside")
        self.tracing = TracingPage()
        self.tabs.addTab(self.tracing, "Tracing")
        self.layers = LayersPage()
        self.tabs.addTab(self.layers, "Layers")
        self.reference = ReferencePage()
        self.tabs.addTab(scrolling(self.reference), "Reference")
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
            self.layers.show_layer_stats(event.layer_stats)

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
        self.prompt.clear()
        self.layers.clear()
        self.reference.clear()
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

def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
