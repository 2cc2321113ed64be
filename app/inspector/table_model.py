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


@dataclass(frozen=True)
class _Cells:
    """One row's answers to the roles a paint asks for: worked out once per row, not on
    every paint (a streamed answer repaints the Token tab's tables each frame)."""
    record: object
    texts: tuple[str, ...]
    bars: tuple[float | None, ...]
    tips: tuple[str | None, ...]
    background: QBrush | None
    font: QFont | None


class RecordTableModel(QAbstractTableModel):
    """Rows are records; `emphasis(record)` returns a highlight colour (or None), drawn
    bold unless `bold` is False."""

    def __init__(self, columns: Sequence[Column],
                 emphasis: Callable[[object], QColor | None] | None = None,
                 parent: QObject | None = None, *, bold: bool = True) -> None:
        super().__init__(parent)
        self.columns = list(columns)
        self.records: list[object] = []
        self._cells: list[_Cells | None] = []
        self._alignments = [RIGHT if c.numeric else LEFT for c in self.columns]
        self._emphasis = emphasis or (lambda record: None)
        self._bold = bold
        self._bold_font = QFont()
        self._bold_font.setBold(True)

    def set_records(self, records: Sequence[object]) -> None:
        if len(records) == len(self.records) and records:
            self.records = list(records)      # same shape: repaint in place
            self._cells = [None] * len(records)
            self.dataChanged.emit(self.index(0, 0),
                                  self.index(len(records) - 1, len(self.columns) - 1))
            return
        self.beginResetModel()
        self.records = list(records)
        self._cells = [None] * len(records)
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
        cells, column = self._row(index.row()), index.column()
        if role == DISPLAY:
            return cells.texts[column]
        if role == ALIGNMENT:
            return self._alignments[column]
        if role == BACKGROUND:
            return cells.background
        if role == FONT:
            return cells.font
        if role == BAR_ROLE:
            return cells.bars[column]
        if role == TOOLTIP:
            return cells.tips[column]
        if role == RECORD_ROLE:
            return cells.record
        return None

    def _row(self, row: int) -> _Cells:
        """A row's cells, worked out when first painted (a table of thousands of rows
        works out only those shown)."""
        cells = self._cells[row]
        if cells is None:
            record = self.records[row]
            colour = self._emphasis(record)
            cells = self._cells[row] = _Cells(
                record,
                tuple(c.text(record) for c in self.columns),
                tuple(c.bar(record) if c.bar is not None else None for c in self.columns),
                tuple(c.tip(record) if c.tip is not None else None for c in self.columns),
                QBrush(colour) if colour is not None else None,
                self._bold_font if self._bold and colour is not None else None)
        return cells
