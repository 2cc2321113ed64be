"""The debug panel's table model works out a row's cells once, not on every paint (a
streamed answer repaints the Token tab's tables each frame), and new records replace
them whole."""

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from app.inspector.table_model import BAR_ROLE, RECORD_ROLE, Column, RecordTableModel


@dataclass(frozen=True)
class Row:
    piece: str
    p: float
    chosen: bool


def test_cells_are_worked_out_once_a_row_and_replaced_with_the_records(qapp):
    calls = []

    def text(r: Row) -> str:
        calls.append(r.piece)
        return r.piece.upper()

    model = RecordTableModel(
        [Column("token", text, tip=lambda r: f"tip {r.piece}"),
         Column("p", lambda r: f"{r.p:.0%}", numeric=True, bar=lambda r: r.p)],
        emphasis=lambda r: QColor("red") if r.chosen else None)
    model.set_records([Row("a", 0.5, True), Row("b", 0.25, False)])
    for _ in range(3):                              # three paints of every cell
        for row in range(2):
            for column in range(2):
                for role in (Qt.DisplayRole, Qt.ToolTipRole, Qt.FontRole, BAR_ROLE):
                    model.index(row, column).data(role)
    assert calls == ["a", "b"]

    def cell(row: int, column: int, role=Qt.DisplayRole):
        return model.index(row, column).data(role)

    assert (cell(0, 0), cell(0, 1), cell(0, 1, BAR_ROLE), cell(0, 0, Qt.ToolTipRole)) == \
        ("A", "50%", 0.5, "tip a")
    assert cell(0, 0, Qt.FontRole).bold() and cell(1, 0, Qt.FontRole) is None
    assert cell(0, 0, Qt.BackgroundRole).color() == QColor("red")
    assert cell(1, 0, Qt.BackgroundRole) is None and cell(1, 0, BAR_ROLE) is None
    assert cell(0, 1, Qt.TextAlignmentRole) == int((Qt.AlignRight | Qt.AlignVCenter).value)

    model.set_records([Row("c", 1.0, False), Row("d", 0.0, True)])     # same shape
    assert (cell(0, 0), cell(0, 1, BAR_ROLE), cell(1, 0, RECORD_ROLE)) == \
        ("C", 1.0, Row("d", 0.0, True))
    assert cell(0, 0, Qt.FontRole) is None and cell(1, 0, Qt.FontRole).bold()
    model.set_records([Row("e", 0.1, False)])                          # another shape
    assert model.rowCount() == 1 and cell(0, 0) == "E"
