"""The Reference tab's "Your engine against Lantern" section: write the fp32 reference's
layer dump of the latest context to a folder, or compare a dump another engine wrote.

The comparison draws as the llama.cpp tab's layer section does: each layer's relative
max |Δ| against the tolerance (log scale), a row per layer (max |Δ|, relative, cosine)
with the first one off in red, the verdict and the usual suspects in words. The section
only draws and asks for folders; app/inspector/dump_jobs.py runs the work.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFileDialog, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from app.inspector.charts import LineChart, Series
from app.inspector.llama_layers_section import FIRST_OFF, RELATIVE_COLOUR, TOLERANCE_COLOUR
from app.inspector.progress_strip import ProgressStrip
from app.inspector.table_model import Column, RecordTableModel
from app.inspector.widgets import (
    hint,
    section,
)
from app.verdict import set_verdict, verdict_label
from engine.inspect.dump_compare import DumpComparison
from engine.reference.against import LayerDelta

IDLE = ("Export the reference's layers for the latest context, or compare a dump your "
        "engine wrote in the same format (README, 'Your engine against Lantern').")


class DumpSection(QWidget):
    exportRequested = Signal(Path)
    compareRequested = Signal(Path)
    cancelRequested = Signal()

    def __init__(self, table_factory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.marked: LayerDelta | None = None     # the first layer off
        self.folder = ""                          # where the last chooser was left
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(section("Your engine against Lantern"))
        self.export_button = self._button("Export layer dump…", "exportDump", self._export)
        self.compare_button = self._button("Compare with a dump…", "compareDump",
                                           self._compare)
        self.strip = ProgressStrip(self.export_button, self.cancelRequested, self.compare_button)
        self.progress, self.cancel_button = self.strip.progress, self.strip.cancel_button
        layout.addWidget(self.strip)
        self.status = verdict_label(IDLE, "dumpVerdict")
        self.status.setObjectName("dumpVerdict")
        layout.addWidget(self.status)
        self.suspects = hint("")
        self.suspects.hide()
        layout.addWidget(self.suspects)
        self.chart = LineChart("per layer (log scale)", log=True, height=120)
        layout.addWidget(self.chart)
        self.rows = RecordTableModel(
            [Column("layer", lambda r: r.label),
             Column("max |Δ|", lambda r: f"{r.max_abs:.3g}", numeric=True),
             Column("relative", lambda r: f"{r.relative:.3g}", numeric=True,
                    tip=lambda r: "the largest over positions of max |Δ| / max |reference|"),
             Column("cosine", lambda r: f"{r.cosine:.6f}", numeric=True,
                    tip=lambda r: "mean over positions")],
            emphasis=lambda r: FIRST_OFF if r is self.marked else None,
        )
        self.table = table_factory(self.rows, stretch_column=0)
        self.table.setMinimumHeight(26 * 8)
        layout.addWidget(self.table, 1)

    def _button(self, text: str, name: str, clicked) -> QPushButton:
        button = QPushButton(text)
        button.setObjectName(name)
        button.setSizePolicy(QSizePolicy.Fixed, QSizePolicy.Fixed)
        button.clicked.connect(clicked)
        return button

    def _choose(self, title: str) -> Path | None:
        folder = QFileDialog.getExistingDirectory(self, title, self.folder)
        if not folder:
            return None
        self.folder = folder
        return Path(folder)

    def _export(self) -> None:
        if (folder := self._choose("Export layer dump to a folder")) is not None:
            self.exportRequested.emit(folder)

    def _compare(self) -> None:
        if (folder := self._choose("Compare with a dump (the folder of its manifest.json)")
                ) is not None:
            self.compareRequested.emit(folder)

    def show_running(self, text: str) -> None:
        self.strip.start()
        set_verdict(self.status, text)

    def show_progress(self, stage: str, fraction: float) -> None:
        self.strip.advance(stage, fraction)

    def show_status(self, text: str) -> None:
        """Idle again, with what came of the last action (or why it could not run)."""
        self._idle()
        set_verdict(self.status, text)

    def _idle(self) -> None:
        self.strip.still()

    def clear(self) -> None:
        """Another conversation: what is shown was about the previous one's context."""
        self.show_status(IDLE)
        self._show_rows([], None, ())

    def show_comparison(self, comparison: DumpComparison, folder: Path) -> None:
        self._idle()
        result = comparison.result
        rows = list(result.rows) + ([result.logits] if result.logits is not None else [])
        note = comparison.ids_note("this conversation's latest context")
        set_verdict(
            self.status,
            f"{'AGREE' if result.ok else 'DIVERGE'}: {result.verdict()}. Dump of "
            f"{comparison.model or 'an unnamed model'} in {folder}, {len(comparison.ours.ids)} "
            f"tokens" + (f"; {note}" if note else "") + ".", result.ok)
        self._show_rows(rows, result.first_off, result.suspects)
        tolerance = result.tolerance
        self.chart.set_series([
            Series("relative max |Δ|", [r.relative for r in rows], RELATIVE_COLOUR),
            Series("tolerance", [tolerance] * len(rows), TOLERANCE_COLOUR, dashed=True),
        ], [r.label for r in rows])
        self.chart.set_selected(result.first_off)

    def _show_rows(self, rows: list[LayerDelta], first_off: int | None,
                   suspects: tuple[str, ...]) -> None:
        self.marked = rows[first_off] if first_off is not None else None
        self.rows.set_records(rows)
        if not rows:
            self.chart.set_series([])
        self.suspects.setText("Usual suspects (hints, not proofs):\n"
                              + "\n".join(f"• {s}" for s in suspects))
        self.suspects.setVisible(bool(suspects))
        if first_off is not None:
            self.table.scrollTo(self.rows.index(first_off, 0))
