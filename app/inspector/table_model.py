"""A read-only table model over a list of records, one Column per column: the debug
panel's tables (top-5, prompt tokens, layer statistics, reference check) are all this.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont

BAR_ROLE = Qt.UserRole + 1          # float 0..1 drawn as a bar behind the cell text
RECORD_ROLE = Qt.UserRole + 2       # the row's record
DISPLAY, ALIGNMENT, BACKGROUND, FONT, TOOLTIP = (
    int(role) for role in (Qt.DisplayRole, Qt.TextAlignmentRole, Qt.BackgroundRole,
                           Qt.FontRole, Qt.ToolTipRole))
RIGHT = int((Qt.AlignRight | Qt.AlignVCenter).value)
LEFT = int((Qt.AlignLeft | Qt.AlignVCenter).value)


@dataclass(frozen=True)
class Column:
    header: str
    text: Callable[[object], str]
    numeric: bool = False                           # right-aligned
    bar: Callable[[object], float] | None = None    # fraction 0..1 for BAR_ROLE
    tip: Callable[[object], str] | None = None      # tooltip text


class RecordTableModel(QAbstractTableModel):
    """Rows are records; `emphasis(record)` returns a highlight colour (or None), drawn
    bold unless `bold` is False."""

    def __init__(self, columns: Sequence[Column],
                 emphasis: Callable[[object], QColor | None] | None = None,
                 parent: QObject | None = None, *, bold: bool = True) -> None:
        super().__init__(parent)
        self.columns = list(columns)
        self.records: list[object] = []
        self._emphasis = emphasis or (lambda record: None)
        self._bold = bold
        self._bold_font = QFont()
        self._bold_font.setBold(True)

    def set_records(self, records: Sequence[object]) -> None:
        if len(records) == len(self.records) and records:
            self.records = list(records)      # same shape: repaint in place
            self.dataChanged.emit(self.index(0, 0),
                                  self.index(len(records) - 1, len(self.columns) - 1))
            return
        self.beginResetModel()
        self.records = list(records)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802, B008 (Qt override)
        return 0 if parent.isValid() else len(self.records)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802, B008 (Qt override)
        return 0 if parent.isValid() else len(self.columns)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.DisplayRole) -> object:
        if role == Qt.DisplayRole and orientation == Qt.Horizontal:
            return self.columns[section].header
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex,
             role: int = Qt.DisplayRole) -> object:
        # called for every painted cell and role: the common roles are answered first
        if not index.isValid():
            return None
        record, column = self.records[index.row()], self.columns[index.column()]
        if role == DISPLAY:
            return column.text(record)
        if role == ALIGNMENT:
            return RIGHT if column.numeric else LEFT
        if role == BACKGROUND:
            colour = self._emphasis(record)
            return QBrush(colour) if colour is not None else None
        if role == FONT:
            return self._bold_font if self._bold and self._emphasis(record) is not None \
                else None
        if role == BAR_ROLE:
            return column.bar(record) if column.bar is not None else None
        if role == TOOLTIP and column.tip is not None:
            return column.tip(record)
        if role == RECORD_ROLE:
            return record
        return None
