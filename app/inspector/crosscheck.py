"""The cross-check view: Lantern's loaded model against the same weights on a server,
token by token along the current conversation. The server's tokens and log-probabilities
sit beside Lantern's; the largest gaps are marked, gaps past the tolerance in red.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.hints import explain
from app.inspector.checks import Checks
from app.inspector.panel import CHOSEN_COLOUR
from app.inspector.reference_page import FAILED_COLOUR
from app.inspector.rows import visible_piece
from app.inspector.table_model import Column, RecordTableModel
from app.inspector.tables import BarDelegate, table_view
from app.models.list_model import ModelListModel
from app.verdict import set_verdict, verdict_label
from engine.errors import LanternError
from engine.remote.crosscheck import CrossCheckReport, CrossCheckRow


def _emphasis(row: CrossCheckRow, tolerance: float):
    if row.gap > tolerance:
        return FAILED_COLOUR
    return CHOSEN_COLOUR if row.marked else None


class CrossCheckDialog(QDialog):
    def __init__(self, checks: Checks, models: ModelListModel,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Cross-check with a server")
        self.setObjectName("crossCheckDialog")
        self.resize(760, 620)
        self.checks, self.models = checks, models
        self.tolerance = 0.0
        layout = QVBoxLayout(self)
        self.intro = QLabel("")
        self.intro.setWordWrap(True)
        layout.addWidget(self.intro)
        row = QHBoxLayout()
        row.addWidget(QLabel("server model"))
        self.remote = QComboBox()
        self.remote.setObjectName("remoteModel")
        row.addWidget(self.remote, 1)
        row.addWidget(QLabel("tokens"))
        self.tokens = QSpinBox()
        self.tokens.setRange(1, 512)
        self.tokens.setValue(32)
        row.addWidget(self.tokens)
        self.run_button = QPushButton("Run")
        self.run_button.setObjectName("runCrossCheck")
        self.run_button.clicked.connect(self.run)
        row.addWidget(self.run_button)
        layout.addLayout(row)
        self.same_weights = QCheckBox("The server runs the same weights (say so when it "
                                      "reports no digest, as OpenAI-compatible servers do)")
        layout.addWidget(self.same_weights)
        self.verdict = verdict_label()
        layout.addWidget(self.verdict)
        self.table_model = RecordTableModel(
            [
                Column("#", lambda r: str(r.index), numeric=True),
                Column("token", lambda r: visible_piece(r.piece)),
                Column("server", lambda r: f"{r.server_logprob:.4f}", numeric=True),
                Column("Lantern", lambda r: f"{r.lantern_logprob:.4f}", numeric=True),
                Column("gap", lambda r: f"{r.gap:.4f}" + (" ◀" if r.marked else ""),
                       numeric=True,
                       bar=lambda r: r.gap / self.tolerance if self.tolerance else 0.0,
                       tip=lambda r: f"|Δ log-probability|; tolerance {self.tolerance}"),
                Column("Lantern's best", lambda r: visible_piece(r.lantern_best)
                       if r.lantern_best else "",
                       tip=lambda r: "the token Lantern finds most likely here, where it "
                                     "differs from the server's"),
            ],
            emphasis=lambda r: _emphasis(r, self.tolerance),
        )
        self.table = table_view(self.table_model, stretch_column=1)
        self.table.horizontalHeader().setSectionResizeMode(4, QHeaderView.Fixed)
        self.table.horizontalHeader().resizeSection(4, 110)
        self.table.setItemDelegateForColumn(4, BarDelegate(self.table))
        layout.addWidget(self.table, 1)
        checks.crossCheckDone.connect(self.show_report)
        checks.crossCheckFailed.connect(self.show_failure)

    def refresh(self) -> None:
        """Offer the connections' models; say what will be compared."""
        current = self.remote.currentText()
        self.remote.clear()
        for entry in self.models.entries:
            if entry.remote is not None and entry.runnable:
                self.remote.addItem(entry.name, entry.remote)
        self.remote.setCurrentIndex(max(0, self.remote.findText(current)))
        name = self.checks.conversation.model_name or "no model"
        self.intro.setText(
            f"Asks the server for a greedy answer to this conversation's last message, then "
            f"runs Lantern's <b>{name}</b> along the server's tokens and puts both "
            "log-probabilities side by side. Same weights: for Ollama Lantern compares the "
            "weights' sha256; other servers do not say, so you confirm it."
            + ("" if self.remote.count() else "<br><b>Add a server in File → Connections "
               "first.</b>"))
        self.run_button.setEnabled(self.remote.count() > 0)

    def run(self) -> None:
        remote = self.remote.currentData()
        if remote is None:
            return
        try:
            self.checks.cross_check(remote, self.same_weights.isChecked(),
                                        self.tokens.value())
        except LanternError as error:
            self.show_failure(explain(error))
            return
        self.run_button.setEnabled(False)
        set_verdict(self.verdict, f"Asking {remote.connection.host}, then running Lantern…", None)

    def show_report(self, report: CrossCheckReport) -> None:
        self.run_button.setEnabled(True)
        self.tolerance = report.tolerance
        self.table_model.set_records(list(report.rows))
        set_verdict(self.verdict, f"{report.verdict}.<br>Lantern {report.lantern_mode}; "
                          f"weights: {report.weights}", report.agrees)

    def show_failure(self, message: str) -> None:
        self.run_button.setEnabled(self.remote.count() > 0)
        set_verdict(self.verdict, f"The cross-check could not run: {message}", False)

