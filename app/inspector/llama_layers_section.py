"""The llama.cpp tab's "Layer by layer" section: every block's output in llama.cpp and in
Lantern's fp32 reference side by side, the first block that diverges named.

A chart of each block's relative max |Δ| against the tolerance (log scale) and a table
(mean and std of the last token in both, max |Δ|, relative, cosine); the verdict says when
both ran with a steered answer's control vectors. The section only draws; the Inspector
runs the comparison as a job with progress and cancel.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.inspector.charts import LineChart, Series
from app.inspector.progress_strip import ProgressStrip
from app.inspector.table_model import Column, RecordTableModel
from app.inspector.widgets import (
    hint,
    section,
)
from app.verdict import set_verdict, verdict_label
from engine.inspect.llama_layers import LayerSide, LlamaLayers

FIRST_OFF = QColor(230, 70, 70, 90)
RELATIVE_COLOUR = QColor(200, 80, 200)
TOLERANCE_COLOUR = QColor(150, 150, 150)
IDLE = ("Compare every block's output with llama.cpp's over the same context: press the "
        "button.")
RUNNING = "Running llama.cpp and the reference over the context…"
MEASURED = ("Measured: every block's output over the same tokens, relative max |Δ| against "
            "the tolerance of llama.cpp's int8 drift; the next-token check above measures "
            "log-probabilities, so the two can differ.")


def steered_note(steered: bool, label: str) -> str:
    """What a verdict adds when both engines ran steered ("" when neither was)."""
    if not steered:
        return ""
    return f" Both ran steered by the answer's control vectors ({label or 'as it was'})."


class LlamaLayersSection(QWidget):
    requested = Signal()
    cancelRequested = Signal()

    def __init__(self, table_factory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.marked: LayerSide | None = None     # the first block that diverges
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(section("Layer by layer"))
        layout.addWidget(hint("Each block's output in llama.cpp and in the reference over "
                              "the same tokens; the first block whose relative error (max "
                              "|Δ| over the largest value the position's stream carried; "
                              "attention sinks are not judged) is over the tolerance (the "
                              "drift of llama.cpp's int8 activations) is named. Mean and "
                              "std are the last token's, Lantern's then llama.cpp's."))
        self.button = QPushButton("Compare every layer")
        self.button.setObjectName("llamaLayersButton")
        self.button.setSizePolicy(QSizePolicy.Fixed, QSizePolicy.Fixed)   # not the row's width
        self.button.clicked.connect(self.requested)
        self.strip = ProgressStrip(self.button, self.cancelRequested)
        self.progress, self.cancel_button = self.strip.progress, self.strip.cancel_button
        layout.addWidget(self.strip)
        self.status = verdict_label(IDLE, "layersVerdict")
        layout.addWidget(self.status)
        self.chart = LineChart("relative max |Δ| per block", log=True, height=140)
        layout.addWidget(self.chart)
        self.rows = RecordTableModel(
            [
                Column("layer", lambda r: r.delta.label),
                Column("mean", lambda r: f"{r.ours[0]:.4g}", numeric=True,
                       tip=lambda r: "reference, last token"),
                Column("llama.cpp", lambda r: f"{r.theirs[0]:.4g}", numeric=True),
                Column("std", lambda r: f"{r.ours[1]:.4g}", numeric=True,
                       tip=lambda r: "reference, last token"),
                Column("llama.cpp", lambda r: f"{r.theirs[1]:.4g}", numeric=True),
                Column("max |Δ|", lambda r: f"{r.delta.max_abs:.3g}", numeric=True),
                Column("relative", lambda r: f"{r.delta.relative:.3g}", numeric=True),
                Column("cosine", lambda r: f"{r.delta.cosine:.5f}", numeric=True),
            ],
            emphasis=lambda r: FIRST_OFF if r is self.marked else None,
        )
        self.table = table_factory(self.rows, stretch_column=0)
        self.table.setMinimumHeight(26 * 8)
        layout.addWidget(self.table, 1)

    def show_missing(self, text: str) -> None:
        set_verdict(self.status, text)
        self.button.setEnabled(False)

    def show_running(self) -> None:
        self.strip.start()
        set_verdict(self.status, RUNNING)

    def show_progress(self, stage: str, fraction: float) -> None:
        self.strip.advance(stage, fraction)

    def show_failed(self, text: str) -> None:
        self._idle()
        set_verdict(self.status, text, False)

    def _idle(self) -> None:
        self.strip.still()

    def clear(self) -> None:
        """Another conversation: the rows shown were over the previous one's context."""
        if self.button.isEnabled() or not self.progress.isHidden():
            self._idle()
            set_verdict(self.status, IDLE)
        self.marked = None
        self.rows.set_records([])
        self.chart.set_series([])

    def show_layers(self, layers: LlamaLayers, steering: str = "") -> None:
        self._idle()
        off = layers.first_off
        self.marked = layers.rows[off] if off is not None and off < len(layers.rows) else None
        set_verdict(self.status,
                    f"{'AGREE' if layers.ok else 'DIVERGE'}: {layers.verdict()} "
                    f"(llama-cpp-python {layers.version}, {len(layers.ids)} tokens)."
                    + steered_note(layers.steered, steering) + f" {MEASURED}", layers.ok)
        self.rows.set_records(list(layers.rows))
        labels = [r.delta.label for r in layers.rows]
        tolerance = layers.result.tolerance
        self.chart.set_series([
            Series("relative max |Δ|", [r.delta.relative for r in layers.rows], RELATIVE_COLOUR),
            Series("tolerance", [tolerance] * len(layers.rows), TOLERANCE_COLOUR, dashed=True),
        ], labels)
        self.chart.set_selected(None if self.marked is None else off)
        if self.marked is not None:
            self.table.scrollTo(self.rows.index(off, 0))
