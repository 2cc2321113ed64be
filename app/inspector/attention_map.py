"""Attention as pictures: the context's tokens tinted by how much the inspected position
attends to each, and every image in the context with its merged patch grid tinted the
same way, over the picture the model saw.

The tint is scaled to the largest weight outside the first token: most heads park much
of their attention on it (an "attention sink"), which would wash everything else out.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from app.inspector.rows import visible_piece
from engine.inspect import ImageGrid

HEAT = QColor(235, 90, 40)
SELECTED = QColor(255, 170, 40)
PAD_X, PAD_Y, GAP = 4, 2, 3


def tint(weight: float, scale: float) -> QColor:
    colour = QColor(HEAT)
    colour.setAlpha(int(255 * min(1.0, weight / scale)) if scale > 0 else 0)
    return colour


def sink_scale(weights: np.ndarray) -> float:
    """The largest weight after the first token (all of them if there is one token)."""
    rest = weights[1:] if len(weights) > 1 else weights
    return float(rest.max()) if len(rest) else 1.0


class TokenHeat(QWidget):
    """The context as wrapped token chips, tinted by attention weight; an image's tokens
    are one chip. Clicking a chip selects that position."""

    positionClicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tokens: tuple[str, ...] = ()
        self.weights = np.zeros(0)
        self.images: tuple[ImageGrid, ...] = ()
        self.chips: list[tuple[QRectF, int, int]] = []   # rect, first position, last + 1
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)

    def set_data(self, tokens: tuple[str, ...], weights: np.ndarray,
                 images: tuple[ImageGrid, ...]) -> None:
        self.tokens, self.weights, self.images = tokens, weights, images
        self._lay_out()
        self.update()

    def _labels(self) -> list[tuple[str, int, int]]:
        starts = {g.start: g for g in self.images}
        out, p = [], 0
        while p < len(self.tokens):
            if p in starts:
                g = starts[p]
                out.append((f"[image {g.height}×{g.width}]", p, g.stop))
                p = g.stop
            else:
                out.append((visible_piece(self.tokens[p]), p, p + 1))
                p += 1
        return out

    def _lay_out(self) -> None:
        metrics = self.fontMetrics()
        height = metrics.height() + 2 * PAD_Y
        x = y = 0.0
        width = max(120, self.width())
        self.chips = []
        for label, first, stop in self._labels():
            w = min(metrics.horizontalAdvance(label) + 2 * PAD_X, width)
            if x + w > width and x > 0:
                x, y = 0.0, y + height + GAP
            self.chips.append((QRectF(x, y, w, height), first, stop))
            x += w + GAP
        self.setFixedHeight(int(y + height + 2))

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._lay_out()

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt override)
        with QPainter(self) as painter:  # ended here even if a frame outlives the call
            self._paint(painter)

    def _paint(self, painter: QPainter) -> None:
        text = self.palette().windowText().color()
        scale = self.scale() if len(self.weights) else 1.0
        labels = self._labels()
        last = len(self.tokens) - 1
        for (rect, first, stop), (label, _, _) in zip(self.chips, labels, strict=True):
            weight = float(self.weights[first:stop].sum()) if len(self.weights) else 0.0
            painter.fillRect(rect, self.colour(weight, scale))
            if first <= last < stop:
                painter.setPen(QPen(SELECTED, 2))
                painter.drawRect(rect.adjusted(1, 1, -1, -1))
            painter.setPen(text)
            painter.drawText(rect, Qt.AlignCenter, label)

    # what a subclass showing other per-token values changes
    def scale(self) -> float:
        return sink_scale(self.weights)

    def colour(self, weight: float, scale: float) -> QColor:
        return tint(weight, scale)

    def describe(self, weight: float) -> str:
        return f"attention {weight:.4f}"

    def _chip_at(self, point: QPointF) -> tuple[int, int] | None:
        return next(((first, stop) for rect, first, stop in self.chips if rect.contains(point)),
                    None)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        chip = self._chip_at(event.position())
        if chip is None or not len(self.weights):
            return
        first, stop = chip
        weight = float(self.weights[first:stop].sum())
        what = (f"#{first}  {visible_piece(self.tokens[first])}" if stop == first + 1
                else f"image tokens #{first}..{stop - 1}")
        QToolTip.showText(event.globalPosition().toPoint(), f"{what}\n{self.describe(weight)}",
                          self)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        chip = self._chip_at(event.position())
        if chip is not None and chip[1] == chip[0] + 1:
            self.positionClicked.emit(chip[0])


class ImageHeat(QWidget):
    """One image with its Hm x Wm merged patches tinted by attention weight."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.image = QImage()
        self.grid: np.ndarray = np.zeros((0, 0))
        self.share = 0.0
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.setMouseTracking(True)

    def set_data(self, picture: np.ndarray | None, grid: np.ndarray) -> None:
        """picture: uint8 [H, W, 3] (or None: the grid alone); grid: weights [Hm, Wm]."""
        self.grid = grid
        self.share = float(grid.sum())
        if picture is not None:
            h, w, _ = picture.shape
            data = np.ascontiguousarray(picture)
            self.image = QImage(data.data, w, h, 3 * w, QImage.Format_RGB888).copy()
        else:
            self.image = QImage()
        self._fit()
        self.update()

    def _target(self) -> QRectF:
        hm, wm = self.grid.shape if self.grid.size else (1, 1)
        aspect = (self.image.height() / self.image.width()) if not self.image.isNull() \
            else hm / wm
        width = float(self.width())
        height = min(width * aspect, 420.0)
        width = height / aspect
        return QRectF((self.width() - width) / 2, 0, width, height)

    def _fit(self) -> None:
        self.setFixedHeight(int(self._target().height()) + 2)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._fit()

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt override)
        if not self.grid.size:
            return
        with QPainter(self) as painter:  # ended here even if a frame outlives the call
            self._paint(painter)

    def _paint(self, painter: QPainter) -> None:
        target = self._target()
        if not self.image.isNull():
            painter.drawImage(target, self.image)
        hm, wm = self.grid.shape
        cw, ch = target.width() / wm, target.height() / hm
        scale = self.scale()
        for r in range(hm):
            for c in range(wm):
                colour = self.colour(float(self.grid[r, c]), scale)
                colour.setAlpha(int(colour.alpha() * 0.75))
                painter.fillRect(QRectF(target.left() + c * cw, target.top() + r * ch, cw, ch),
                                 colour)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        if not self.grid.size:
            return
        target = self._target()
        hm, wm = self.grid.shape
        c = int((event.position().x() - target.left()) / target.width() * wm)
        r = int((event.position().y() - target.top()) / target.height() * hm)
        if 0 <= r < hm and 0 <= c < wm:
            QToolTip.showText(event.globalPosition().toPoint(),
                              f"patch row {r}, column {c}\n{self.describe(self.grid[r, c])}",
                              self)

    # what a subclass showing other per-patch values changes
    def scale(self) -> float:
        return float(self.grid.max())

    def colour(self, weight: float, scale: float) -> QColor:
        return tint(weight, scale)

    def describe(self, weight: float) -> str:
        return f"attention {weight:.4f} (image total {self.share:.3f})"
