"""Direct contributions as a layer x head grid: one row per layer, one cell per attention
head and a last one for the MLP, blue where the part pushes the explained token's logit
(or its margin over the runner-up) up and red where it pushes it down. The tint grows with
the square root of |part| / the largest |part|, so the many small heads stay visible next
to the few large MLPs. Hover for the value; clicking a head asks for its attention map.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from engine.inspect.contributions import Split

ROW_HEIGHT = 14
LABEL_WIDTH = 36
HEADER = 16
UP, DOWN = QColor(60, 120, 235), QColor(225, 70, 55)


def signed_tint(value: float, scale: float) -> QColor:
    colour = QColor(UP if value >= 0 else DOWN)
    colour.setAlpha(int(235 * min(1.0, abs(value) / scale) ** 0.5) if scale > 0 else 0)
    return colour


class ContributionGrid(QWidget):
    headClicked = Signal(int, int)   # layer (0-based), head (0-based)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.split: Split | None = None
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.setFixedHeight(HEADER)

    def set_split(self, split: Split | None) -> None:
        self.split = split
        layers = 0 if split is None else len(split.mlp)
        self.setFixedHeight(HEADER + layers * ROW_HEIGHT + 2)
        self.update()

    def _columns(self) -> int:
        return self.split.attention.shape[1] + 1 if self.split is not None else 1

    def _cell(self, layer: int, column: int) -> QRectF:
        width = (self.width() - LABEL_WIDTH) / self._columns()
        gap = 6 if column == self._columns() - 1 else 0   # the MLP column stands apart
        return QRectF(LABEL_WIDTH + column * width + gap, HEADER + layer * ROW_HEIGHT,
                      width - 1 - gap, ROW_HEIGHT - 1)

    def _scale(self) -> float:
        parts = np.concatenate([np.abs(self.split.attention).ravel(), np.abs(self.split.mlp)])
        return float(parts.max()) if len(parts) else 1.0

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt override)
        if self.split is None:
            return
        with QPainter(self) as painter:  # ended here even if a frame outlives the call
            self._paint(painter)

    def _paint(self, painter: QPainter) -> None:
        text = self.palette().windowText().color()
        painter.setPen(text)
        heads = self.split.attention.shape[1]
        for column, align in ((0, Qt.AlignLeft), (heads - 1, Qt.AlignRight),
                              (heads, Qt.AlignRight)):
            rect = self._cell(0, column).translated(0, -HEADER)
            painter.drawText(rect.adjusted(-20, 0, 0, HEADER - ROW_HEIGHT),
                             align | Qt.AlignVCenter,
                             "MLP" if column == heads else f"h{column + 1}")
        scale = self._scale()
        for layer, (row, mlp) in enumerate(zip(self.split.attention, self.split.mlp,
                                               strict=True)):
            painter.setPen(text)
            painter.drawText(QRectF(0, HEADER + layer * ROW_HEIGHT, LABEL_WIDTH - 4,
                                    ROW_HEIGHT), Qt.AlignRight | Qt.AlignVCenter,
                             f"L{layer + 1}")
            for column, value in enumerate((*row, mlp)):
                rect = self._cell(layer, column)
                painter.fillRect(rect, QColor(128, 128, 128, 25))
                painter.fillRect(rect, signed_tint(float(value), scale))

    def _at(self, event: QMouseEvent) -> tuple[int, int] | None:
        if self.split is None:
            return None
        point = event.position()
        layer = int((point.y() - HEADER) // ROW_HEIGHT)
        if not 0 <= layer < len(self.split.mlp) or point.x() < LABEL_WIDTH:
            return None
        column = next((c for c in range(self._columns()) if self._cell(layer, c).contains(point)),
                      None)
        return None if column is None else (layer, column)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        where = self._at(event)
        if where is None:
            return
        layer, column = where
        heads = self.split.attention.shape[1]
        if column == heads:
            tip = f"layer {layer + 1} MLP: {self.split.mlp[layer]:+.4f}"
        else:
            tip = (f"layer {layer + 1} head {column + 1}: "
                   f"{self.split.attention[layer, column]:+.4f}\nclick: its attention map")
        QToolTip.showText(event.globalPosition().toPoint(), tip, self)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        where = self._at(event)
        if where is not None and where[1] < self.split.attention.shape[1]:
            self.headClicked.emit(*where)


def summary(split: Split, what: str) -> str:
    """One line: the total and how it splits."""
    return (f"{what} {split.total:.3f} = embedding {split.embedding:+.3f} + heads "
            f"{split.attention.sum():+.3f} + MLPs {split.mlp.sum():+.3f} "
            f"(bias, the linearisation's residual: {split.bias:+.1e})")
