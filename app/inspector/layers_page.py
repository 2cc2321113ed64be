"""The panel's "Layers" tab: mean, spread and range of the latest token's hidden state
after each layer, recorded while "Record per-layer statistics" is on (it reloads the
model: every token then brings back every layer's state)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QVBoxLayout, QWidget

from app.inspector.charts import LineChart, Series
from app.inspector.rows import layer_rows
from app.inspector.table_model import Column, RecordTableModel
from app.inspector.tables import short_number, table_view
from app.inspector.widgets import hint

STATS_OFF = "Tick “Record per-layer statistics”, then send a message or regenerate."
STATS_NEXT = "Recorded from the next answer: send a message or regenerate."
MEAN_COLOUR = QColor(200, 120, 40)
STD_COLOUR = QColor(70, 130, 240)


class LayersPage(QWidget):
    statsToggled = Signal(bool)


    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 12, 12, 12)
        self.stats_toggle = QCheckBox("Record per-layer statistics")
        self.stats_toggle.toggled.connect(self.statsToggled)
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
            *(Column(name, lambda r, i=i: short_number(r.stats[i]), numeric=True)
              for i, name in enumerate(("mean", "std", "min", "max"))),
        ])
        layout.addWidget(table_view(self.stats_model, stretch_column=0))

    def show_layer_stats(self, stats) -> None:
        rows = layer_rows(stats)
        self.stats_model.set_records(rows)
        self.stats_chart.set_series(
            [Series("std", [r.stats[1] for r in rows], STD_COLOUR),
             Series("mean", [r.stats[0] for r in rows], MEAN_COLOUR)],
            [r.label for r in rows])

    def clear(self) -> None:
        self.stats_model.set_records([])
        self.stats_chart.set_series([])
