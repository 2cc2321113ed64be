"""The panel's tables: how a RecordTableModel is shown (rows of 26 pixels, no grid, a
column that stretches), the bar a cell can carry, columns sized once, a tab that scrolls,
and how a statistic is printed."""

from __future__ import annotations

import math

from PySide6.QtCore import QModelIndex, QRect, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPainterPath
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHeaderView,
    QScrollArea,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QWidget,
)

from app.inspector.table_model import BAR_ROLE, RecordTableModel

BAR_COLOUR = QColor(70, 130, 240, 70)
CELL_PADDING = 18   # a table cell's margins around its text


def short_number(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value)


class BarDelegate(QStyledItemDelegate):
    """Paints a rounded bar proportional to BAR_ROLE under the cell text."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        fraction = index.data(BAR_ROLE)
        if fraction is not None:
            rect: QRect = option.rect.adjusted(3, 4, -3, -4)
            width = int(rect.width() * max(0.0, min(1.0, float(fraction))))
            if width > 0:
                painter.save()
                painter.setRenderHint(QPainter.Antialiasing)
                path = QPainterPath()
                path.addRoundedRect(rect.x(), rect.y(), width, rect.height(), 3, 3)
                painter.fillPath(path, BAR_COLOUR)
                painter.restore()
        super().paint(painter, option, index)


def table_view(model: RecordTableModel, stretch_column: int | None = None) -> QTableView:
    view = QTableView()
    view.setModel(model)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(26)
    view.setEditTriggers(QAbstractItemView.NoEditTriggers)
    view.setSelectionMode(QAbstractItemView.NoSelection)
    view.setFocusPolicy(Qt.NoFocus)
    view.setShowGrid(False)
    view.setAlternatingRowColors(True)
    view.setFrameShape(QFrame.NoFrame)
    header = view.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeToContents)
    header.setDefaultAlignment(Qt.AlignLeft | Qt.AlignVCenter)
    if stretch_column is None:
        header.setStretchLastSection(True)
    else:
        header.setSectionResizeMode(stretch_column, QHeaderView.Stretch)
    return view


def scrolling(page: QWidget) -> QScrollArea:
    """A tab whose content scrolls when the panel is shorter than it (a 720-pixel screen):
    its fixed-height tables would otherwise make the window taller than the screen."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
    area.setWidget(page)
    return area


def fix_columns(view: QTableView, samples: dict[int, str]) -> None:
    """Size columns once for their widest text (a sample, or the header) rather than
    measuring every row again on each update: the Token tab's tables change with every
    streamed token, and measuring them cost the window most of a frame."""
    font = QFont(view.font())
    font.setBold(True)                     # the chosen row is bold, the widest
    header, metrics = view.horizontalHeader(), QFontMetrics(font)
    for column, sample in samples.items():
        title = str(view.model().headerData(column, Qt.Horizontal))
        width = max(metrics.horizontalAdvance(text) for text in (sample, title))
        header.setSectionResizeMode(column, QHeaderView.Fixed)
        header.resizeSection(column, width + CELL_PADDING)
