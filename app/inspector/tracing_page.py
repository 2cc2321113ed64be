"""The panel's "Tracing" tab: causal tracing of the conversation's latest message.

The latest message is the clean text; the user edits a copy into the corrupted text (one
word changed) and the page says at once when their token counts differ, which the trace
cannot compare. A message's images go with both texts. The result: the clean answer and its
rival, the two logit differences and the layer x position map of the share restored, an
image's patch groups as columns of their own. The page only draws; the Tracer decides what
to compute.
"""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QWidget,
)

from app.inspector.progress_strip import ProgressStrip
from app.inspector.rows import visible_piece
from app.inspector.trace_heat import TraceHeat, state_name
from app.inspector.widgets import hint, scrolling_body, section
from engine.inspect.tracing import Trace

EMPTY = ("Send a message first: causal tracing starts from this conversation's latest "
         "message.")
EDIT = ("Change one word of the corrupted text for another of the same length in tokens, "
        "then trace.")
EDIT_OR_NOISE = ("Change one word of the corrupted text for another of the same length in "
                 "tokens, or noise the picture, then trace.")
TEXT_LINES = 3


def text_box(read_only: bool) -> QPlainTextEdit:
    box = QPlainTextEdit()
    box.setReadOnly(read_only)
    box.setTabChangesFocus(True)
    lines = box.fontMetrics().lineSpacing() * TEXT_LINES
    box.setFixedHeight(int(lines + 2 * box.frameWidth() + 8))
    return box


class TracingPage(QWidget):
    traceRequested = Signal()
    cancelRequested = Signal()
    textsEdited = Signal()          # the corrupted text or the template choice changed

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = scrolling_body(self)
        layout.addWidget(section("Causal tracing"))
        layout.addWidget(hint(
            "Which hidden states carry the answer. The clean and the corrupted prompt run "
            "through the numpy fp32 reference; then, for each hidden state (the embeddings "
            "and every block's output) at each position, the corrupted run is repeated with "
            "that one state restored to its clean value. The map shows the share of the "
            "clean answer's logit difference over its rival that comes back."))
        layout.addWidget(hint("Clean: the conversation's latest message"))
        self.clean = text_box(read_only=True)
        layout.addWidget(self.clean)
        self.image_note = hint("")
        self.image_note.setObjectName("traceImages")
        layout.addWidget(self.image_note)
        layout.addWidget(hint("Corrupted: the same with one word changed"))
        self.corrupt = text_box(read_only=False)
        self.corrupt.textChanged.connect(self.textsEdited)
        layout.addWidget(self.corrupt)
        self.plain = QCheckBox("Plain text: no chat template (a continuation, like "
                               "lantern trace --raw)")
        self.plain.toggled.connect(self.textsEdited)
        layout.addWidget(self.plain)
        self.noise = QCheckBox("Noise the picture in the corrupted prompt (the words may stay "
                               "the same)")
        self.noise.setObjectName("traceNoise")
        self.noise.toggled.connect(self.textsEdited)
        self.noise.setVisible(False)
        layout.addWidget(self.noise)
        self.counts = hint("")
        self.counts.setObjectName("traceCounts")
        layout.addWidget(self.counts)
        self.button = QPushButton("Trace")
        self.button.setObjectName("traceButton")
        self.button.setSizePolicy(QSizePolicy.Fixed, QSizePolicy.Fixed)   # not the row's width
        self.button.clicked.connect(self.traceRequested)
        self.strip = ProgressStrip(self.button, self.cancelRequested)
        self.progress, self.cancel_button = self.strip.progress, self.strip.cancel_button
        layout.addWidget(self.strip)
        self.status = hint(EMPTY)
        layout.addWidget(self.status)
        self.summary = hint("")
        self.summary.setObjectName("traceSummary")
        layout.addWidget(self.summary)
        self.heat = TraceHeat()
        self.heat_area = QScrollArea()    # a wide map scrolls alone; the text keeps the width
        self.heat_area.setWidgetResizable(True)
        self.heat_area.setFrameShape(QFrame.NoFrame)
        self.heat_area.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.heat_area.setWidget(self.heat)
        layout.addWidget(self.heat_area)
        layout.addStretch(1)
        self.trace: Trace | None = None
        self.ready = False               # the texts can be traced against each other
        self.images = 0                  # the images the message holds
        self.button.setEnabled(False)

    # -- the texts ----------------------------------------------------------------------

    def set_clean(self, text: str, images: int = 0) -> None:
        """A new latest message (``text`` empty: none) holding ``images``."""
        self.clean.setPlainText(text)
        self.corrupt.blockSignals(True)
        self.corrupt.setPlainText(text)
        self.corrupt.blockSignals(False)
        self.corrupt.setReadOnly(not text)
        self.images = images
        self.image_note.setText(("The message's image goes" if images == 1 else
                                 f"The message's {images} images go") +
                                " with both texts." if images else "")
        self.image_note.setVisible(bool(images))
        self.noise.setVisible(bool(images))
        self.noise.blockSignals(True)
        self.noise.setChecked(False)
        self.noise.blockSignals(False)
        self.show_result(None)
        self.ready = False
        self.counts.setText("")
        self._idle()
        self.status.setText("" if text else EMPTY)

    def corrupt_text(self) -> str:
        return self.corrupt.toPlainText()

    def noised(self) -> bool:
        """Does the corrupted prompt go with noise for the message's pictures?"""
        return bool(self.images) and self.noise.isChecked()

    def show_counts(self, clean: int, corrupt: int, same: bool) -> bool:
        """Say whether the two texts can be traced against each other; True if they can.
        With images the counts are the texts' own: the images add the same to both."""
        besides = {0: "", 1: " besides the image"}.get(self.images, " besides the images")
        if clean != corrupt:
            text = (f"The corrupted text has {corrupt} tokens{besides}, the clean one {clean}: "
                    "change one word for another of the same length in tokens.")
        elif same and not self.noised():
            text = EDIT_OR_NOISE if self.images else EDIT
        elif same:
            text = "The same words, the picture noised: ready to trace."
        else:
            text = f"Both texts have {clean} tokens{besides}: ready to trace."
        self.counts.setText(text)
        self.ready = clean == corrupt and (not same or self.noised())
        self.button.setEnabled(self.ready and self.progress.isHidden())
        return self.ready

    def show_blocked(self, text: str) -> None:
        """The texts cannot be traced as they are set: ``text`` says why."""
        self.counts.setText(text)
        self.ready = False
        self.button.setEnabled(False)

    # -- states -------------------------------------------------------------------------

    def show_running(self) -> None:
        self.strip.start("Tracing…")
        self.status.setText("")

    def show_progress(self, stage: str, fraction: float) -> None:
        self.strip.advance(stage, fraction)

    def show_failed(self, text: str) -> None:
        self._idle()
        self.status.setText(text)

    def _idle(self) -> None:
        self.strip.still()
        self.button.setEnabled(self.ready)

    def clear(self) -> None:
        """Another conversation: nothing of the previous one's trace stays."""
        self.set_clean("")

    # -- the result ---------------------------------------------------------------------

    def show_result(self, trace: Trace | None, piece=str) -> None:
        """The trace's answer, rival, differences and map (None: none shown)."""
        self.trace = trace
        if trace is None:
            self.summary.setText("")
            self.heat.set_data(np.zeros((0, 0)), [], [], [])
            self._fit_heat()
            return
        self._idle()
        self.status.setText("")
        answer, rival = (html.escape(visible_piece(piece(t))) for t in (trace.answer, trace.rival))
        restored = trace.restored
        layer, best = divmod(int(restored.argmax()), restored.shape[1])
        columns = [column(trace, n, piece) for n in range(len(trace.units))]
        label, place = columns[best]
        where = place if trace.patch_block(best) is not None else \
            f"<code>{html.escape(label)}</code>, position {trace.units[best][0]}"
        self.summary.setText(
            f"Clean answer <code>{answer}</code> against its rival <code>{rival}</code>: "
            f"logit difference {trace.clean_diff:+.3f} clean, {trace.corrupt_diff:+.3f} "
            f"corrupted. Most restored: {state_name(layer)} at {where} "
            f"({restored[layer, best]:.0%}).{image_note(trace)} Hover a cell for its value.")
        self.heat.set_data(restored, [label for label, _ in columns],
                           [trace.changed(n) for n in range(len(trace.units))],
                           [place for _, place in columns])
        self._fit_heat()

    def _fit_heat(self) -> None:
        """The map's area as tall as the map and a scroll bar under it."""
        bar = self.heat_area.horizontalScrollBar().sizeHint().height()
        height = self.heat.minimumHeight()   # set_data fixes it
        self.heat_area.setFixedHeight(height + bar if height else 0)


def image_note(trace: Trace) -> str:
    """How the map shows the images, and why their columns are empty where they are."""
    if not trace.images:
        return ""
    group = trace.patch_group
    note = (f" Each image's merged patches are restored {group} x {group} at a time, a "
            "column each" if group > 1 else " Each image's merged patch is a column")
    columns = [n for n in range(len(trace.units)) if trace.patch_block(n) is not None]
    if not trace.restored[:, columns].any():
        note += (": the image comes before the changed word, the same in both runs, so "
                 "restoring it brings nothing back" if len(trace.images) == 1 else
                 ": the images come before the changed word, the same in both runs, so "
                 "restoring them brings nothing back")
    return note + "."


def column(trace: Trace, unit: int, piece) -> tuple[str, str]:
    """A map column's label (a changed token as "clean/corrupt", an image's patch group as
    "img 1 r0-1 c2-3") and where it lies, in words."""
    block = trace.patch_block(unit)
    positions = trace.units[unit]
    if block is not None:
        return block.label, block.name
    a, b = trace.clean[positions[0]], trace.corrupt[positions[0]]
    token = visible_piece(piece(a)) if a == b else \
        f"{visible_piece(piece(a))}/{visible_piece(piece(b))}"
    return token, f"position {positions[0]} {token}"
