"""The panel's "Reference" tab: the current context through the plain numpy forward
pass, the engine compared with it after every layer and at the next token (a green or
red verdict naming the first layer off), and under it the layer dumps of your own engine
against Lantern (app/inspector/dump_section.py)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHeaderView, QPushButton, QVBoxLayout, QWidget

from app.inspector.charts import LineChart, Series
from app.inspector.dump_section import DumpSection
from app.inspector.progress_strip import ProgressStrip
from app.inspector.rows import TOP_ROWS, top_pairs, visible_piece
from app.inspector.table_model import Column, RecordTableModel
from app.inspector.tables import BarDelegate, short_number, table_view
from app.inspector.widgets import hint, section
from app.verdict import set_verdict, verdict_label

CHOSEN_COLOUR = QColor(255, 200, 70, 70)
FAILED_COLOUR = QColor(230, 80, 70, 70)
DIFF_COLOUR = QColor(220, 70, 60)
TOLERANCE_COLOUR = QColor(130, 130, 130)


def _check_tip(row) -> str:
    """A LayerCheck in full: both sides' statistics and the tolerance (the bar under
    max |Δ| shows how much of it is used)."""
    names = ("mean", "std", "min", "max")
    lines = [f"{who}: " + "  ".join(f"{n} {short_number(v)}"
                                    for n, v in zip(names, stats, strict=True))
             for who, stats in (("engine", row.stats), ("reference", row.reference_stats))]
    return "\n".join([row.label, *lines, f"max |Δ| {row.max_abs_diff:.3g} of tolerance "
                       f"{row.tolerance:.3g}"])


class ReferencePage(QWidget):
    checkRequested = Signal()
    cancelRequested = Signal()


    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 12, 12, 12)
        layout.addWidget(hint("Runs the last prompt through a plain numpy forward pass and "
                               "compares the engine with it after every layer and at the "
                               "next token."))
        self.check_button = QPushButton("Check against reference")
        self.check_button.setObjectName("checkButton")
        self.check_button.clicked.connect(self.checkRequested)
        self.check_strip = ProgressStrip(self.check_button, self.cancelRequested)
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
                Column("std", lambda r: short_number(r.stats[1]), numeric=True, tip=_check_tip),
                Column("ref std", lambda r: short_number(r.reference_stats[1]), numeric=True,
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

    def clear_check(self) -> None:
        """A new answer or another conversation: an earlier verdict no longer applies."""
        self.check_strip.still()
        set_verdict(self.verdict, "", None)
        self.pair_model.set_records([])
        self.check_model.set_records([])
        self.check_chart.set_series([])

    def clear(self) -> None:
        """Another conversation: the verdict and the dump comparison go."""
        self.clear_check()
        self.dump.clear()
