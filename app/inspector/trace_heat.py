"""Causal tracing's layer x position map: one row per hidden state (the embeddings at the
top, then every block), one column per prompt position labelled with its token below (an
image's patch group: one column, "img 1 r0-1 c2-3"), each cell tinted by the share of the
clean answer's logit difference that restoring that one state brings back; a colour scale
above. The changed positions' labels are marked. Hover: layer, place and value. A long
prompt makes the map wider than the panel, which scrolls.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QLinearGradient, QMouseEvent, QPainter
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from app.inspector.contribution_grid import DOWN, UP
from app.inspector.lens_grid import layer_name

ROW_HEIGHT = 12
LABEL_WIDTH = 40
MIN_COLUMN = 14
SCALE_HEIGHT = 26           # the colour scale's row, above the map
TOKEN_HEIGHT = 96           # the tokens' labels, written upwards below the map
CHANGED = QColor(255, 170, 40)


def share_colour(value: float) -> QColor:
    """Blue up to all of the difference restored; red where restoring makes it worse."""
    colour = QColor(UP if value >= 0 else DOWN)
    colour.setAlpha(int(235 * min(1.0, abs(value))))
    return colour


def state_name(layer: int) -> str:
    """Hidden state ``layer`` of the map in words (0: the embeddings' output)."""
    return "the embeddings" if layer == 0 else f"block {layer}"


class TraceHeat(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.restored = np.zeros((0, 0))       # [n_layers + 1, U]
        self.tokens: list[str] = []
        self.changed: list[bool] = []
        self.places: list[str] = []
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.setFixedHeight(0)

    def set_data(self, restored: np.ndarray, tokens: list[str], changed: list[bool],
                 places: list[str]) -> None:
        """tokens: each column's label (a changed one as "clean/corrupt"); places: where it
        lies, in words ("position 5 the", "image 1, patch rows 0-1, columns 2-3")."""
        self.restored, self.tokens, self.changed, self.places = restored, tokens, changed, places
        rows, columns = restored.shape
        self.setMinimumWidth(LABEL_WIDTH + columns * MIN_COLUMN + 4 if columns else 0)
        self.setFixedHeight(SCALE_HEIGHT + rows * ROW_HEIGHT + TOKEN_HEIGHT if rows else 0)
        self.update()

    def _column_width(self) -> float:
        return (self.width() - LABEL_WIDTH - 4) / max(1, self.restored.shape[1])

    def _cell(self, layer: int, position: int) -> QRectF:
        width = self._column_width()
        return QRectF(LABEL_WIDTH + position * width, SCALE_HEIGHT + layer * ROW_HEIGHT,
                      width - 1, ROW_HEIGHT - 1)

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt override)
        if not self.restored.size:
            return
        with QPainter(self) as painter:  # ended here even if a frame outlives the call
            self._paint(painter)

    def _paint(self, painter: QPainter) -> None:
        text = self.palette().windowText().color()
        painter.setPen(text)
        self._paint_scale(painter)
        for layer, row in enumerate(self.restored):
            painter.setPen(text)
            painter.drawText(QRectF(0, SCALE_HEIGHT + layer * ROW_HEIGHT, LABEL_WIDTH - 4,
                                    ROW_HEIGHT), Qt.AlignRight | Qt.AlignVCenter,
                             layer_name(layer))
            for position, value in enumerate(row):
                rect = self._cell(layer, position)
                painter.fillRect(rect, QColor(128, 128, 128, 25))
                painter.fillRect(rect, share_colour(float(value)))
        self._paint_tokens(painter, text)

    def _paint_scale(self, painter: QPainter) -> None:
        """0 % .. 100 % restored left to right, then the red of a negative share."""
        bar = QRectF(LABEL_WIDTH, 4, min(160.0, self.width() - LABEL_WIDTH - 120), 10)
        gradient = QLinearGradient(bar.topLeft(), bar.topRight())
        gradient.setColorAt(0.0, share_colour(0.0))
        gradient.setColorAt(1.0, share_colour(1.0))
        painter.fillRect(bar, QColor(128, 128, 128, 25))
        painter.fillRect(bar, gradient)
        small = painter.font()
        small.setPointSizeF(small.pointSizeF() * 0.85)
        painter.setFont(small)
        painter.drawText(QRectF(bar.left(), bar.bottom(), bar.width(), 12),
                         Qt.AlignLeft | Qt.AlignVCenter, "0%")
        painter.drawText(QRectF(bar.left(), bar.bottom(), bar.width(), 12),
                         Qt.AlignRight | Qt.AlignVCenter, "100% restored")
        swatch = QRectF(bar.right() + 12, bar.top(), 10, 10)
        painter.fillRect(swatch, share_colour(-1.0))
        painter.drawText(QRectF(swatch.right() + 4, 0, 100, 18), Qt.AlignLeft | Qt.AlignVCenter,
                         "below 0%")

    def _paint_tokens(self, painter: QPainter, text: QColor) -> None:
        """Each position's token, written upwards under its column (changed ones marked)."""
        width, top = self._column_width(), SCALE_HEIGHT + len(self.restored) * ROW_HEIGHT
        metrics = painter.fontMetrics()
        for position, (token, changed) in enumerate(zip(self.tokens, self.changed, strict=True)):
            x = LABEL_WIDTH + (position + 0.5) * width
            if changed:
                painter.fillRect(QRectF(x - width / 2, top + 1, width - 1, TOKEN_HEIGHT - 2),
                                 QColor(CHANGED.red(), CHANGED.green(), CHANGED.blue(), 70))
            painter.save()
            painter.translate(QPointF(x + metrics.ascent() / 2 - 1, top + 3))
            painter.rotate(-90)
            painter.setPen(text)
            label = metrics.elidedText(token, Qt.ElideRight, TOKEN_HEIGHT - 6)
            painter.drawText(QPointF(-metrics.horizontalAdvance(label), 0), label)
            painter.restore()

    def at(self, x: float, y: float) -> tuple[int, int] | None:
        """The (layer, position) of the cell under a point, if any."""
        rows, columns = self.restored.shape
        layer, position = int((y - SCALE_HEIGHT) // ROW_HEIGHT), int(
            (x - LABEL_WIDTH) // self._column_width())
        inside = y >= SCALE_HEIGHT and x >= LABEL_WIDTH
        return (layer, position) if inside and layer < rows and position < columns else None

    def tip(self, layer: int, position: int) -> str:
        return (f"{state_name(layer)} ({layer_name(layer)}), {self.places[position]}: "
                f"{self.restored[layer, position]:.1%} of the difference restored")

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        where = self.at(event.position().x(), event.position().y())
        if where is not None:
            QToolTip.showText(event.globalPosition().toPoint(), self.tip(*where), self)
