"""Small line charts drawn with QPainter (PySide6-Essentials has no QtCharts).

One x axis of indices (tokens along a reply, or layers), one or more series sharing a y
axis (optionally logarithmic, where values <= 0 are left out), an optional dashed
reference series (a tolerance), the selected index marked; clicking a point emits its
index, hovering shows its values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 46, 10, 22, 20


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float]
    colour: QColor
    dashed: bool = False


class LineChart(QWidget):
    pointClicked = Signal(int)

    def __init__(self, title: str = "", *, log: bool = False, height: int = 130,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title, self.log = title, log
        self.series: list[Series] = []
        self.labels: Sequence[str] = ()
        self.selected: int | None = None
        self.setMinimumHeight(height)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.setMouseTracking(True)

    def set_series(self, series: list[Series], labels: Sequence[str] = ()) -> None:
        """labels[i]: how index i is named in the tooltip (a token, a layer)."""
        self.series, self.labels = series, labels
        self.update()

    def set_selected(self, index: int | None) -> None:
        self.selected = index
        self.update()

    @property
    def count(self) -> int:
        return max((len(s.values) for s in self.series), default=0)

    # -- geometry -----------------------------------------------------------------------

    def _plot(self) -> QRectF:
        left = self._left_margin()
        return QRectF(left, MARGIN_TOP, max(1, self.width() - left - MARGIN_RIGHT),
                      max(1, self.height() - MARGIN_TOP - MARGIN_BOTTOM))

    def _axis_labels(self) -> tuple[str, str]:
        """The top and bottom values of the y axis as drawn."""
        if not self.count:
            return "", ""
        low, high = self._range()
        return tuple(f"{10 ** v if self.log else v:.3g}" for v in (high, low))

    def _left_margin(self) -> int:
        """Room for the widest y-axis label (``8.8e-05`` is wider than ``0.5``), so none
        is cut."""
        metrics = self.fontMetrics()
        widest = max((metrics.horizontalAdvance(t) for t in self._axis_labels()), default=0)
        return max(MARGIN_LEFT, widest + 8)

    def _y(self, value: float) -> float:
        """Plotted height; on a log scale 0 and below are not drawn (NaN)."""
        if not self.log:
            return value
        return math.log10(value) if value > 0 else math.nan

    def _range(self) -> tuple[float, float]:
        values = [y for s in self.series for v in s.values if math.isfinite(y := self._y(v))]
        if not values:
            return 0.0, 1.0
        low, high = min(values), max(values)
        if high - low < 1e-12:
            low, high = low - 0.5, high + 0.5
        return low, high

    def _x(self, index: int, plot: QRectF) -> float:
        n = self.count
        return plot.left() + (plot.width() * index / (n - 1) if n > 1 else plot.width() / 2)

    def index_at(self, x: float) -> int | None:
        n = self.count
        if n == 0:
            return None
        plot = self._plot()
        fraction = (x - plot.left()) / plot.width() if plot.width() else 0.0
        return max(0, min(n - 1, round(fraction * (n - 1))))

    # -- painting -------------------------------------------------------------------------

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.Antialiasing)
        text = self.palette().windowText().color()
        faint = QColor(text)
        faint.setAlpha(60)
        plot = self._plot()
        painter.setPen(text)
        metrics = painter.fontMetrics()
        legend = sum(metrics.horizontalAdvance(s.name) + 8 for s in self.series)
        room = int(plot.right() - legend - 12)     # the title gives way to the legend
        painter.drawText(QRectF(4, 2, max(room, 0), MARGIN_TOP - 4),
                         Qt.AlignLeft | Qt.AlignVCenter,
                         metrics.elidedText(self.title, Qt.ElideRight, max(room, 0)))
        painter.setPen(faint)
        painter.drawRect(plot)
        if not self.count:
            painter.setPen(text)
            painter.drawText(plot, Qt.AlignCenter, "no data yet")
            return
        low, high = self._range()

        def point(i: int, v: float) -> QPointF:
            y = (self._y(v) - low) / (high - low)
            return QPointF(self._x(i, plot), plot.bottom() - y * plot.height())

        painter.setPen(text)
        for label, align in zip(self._axis_labels(), (Qt.AlignTop, Qt.AlignBottom),
                                strict=True):
            painter.drawText(QRectF(0, plot.top() - 2, plot.left() - 4, plot.height() + 4),
                             Qt.AlignRight | align, label)
        painter.drawText(QRectF(plot.left(), plot.bottom() + 2, plot.width(), MARGIN_BOTTOM - 2),
                         Qt.AlignLeft | Qt.AlignTop, "0")
        painter.drawText(QRectF(plot.left(), plot.bottom() + 2, plot.width(), MARGIN_BOTTOM - 2),
                         Qt.AlignRight | Qt.AlignTop, str(self.count - 1))
        if self.selected is not None and 0 <= self.selected < self.count:
            x = self._x(self.selected, plot)
            painter.setPen(QPen(QColor(255, 170, 40), 2))
            painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()))
        legend_x = plot.right()
        for s in reversed(self.series):
            pen = QPen(s.colour, 1.6, Qt.DashLine if s.dashed else Qt.SolidLine)
            painter.setPen(pen)
            path = QPainterPath()
            started = False
            for i, v in enumerate(s.values):
                if not math.isfinite(self._y(v)):
                    started = False
                    continue
                p = point(i, v)
                path.lineTo(p) if started else path.moveTo(p)
                started = True
            painter.drawPath(path)
            if len(s.values) <= 64 and not s.dashed:
                painter.setBrush(s.colour)
                for i, v in enumerate(s.values):
                    if math.isfinite(self._y(v)):
                        painter.drawEllipse(point(i, v), 2.2, 2.2)
                painter.setBrush(Qt.NoBrush)
            width = painter.fontMetrics().horizontalAdvance(s.name) + 8
            legend_x -= width
            painter.drawText(QRectF(legend_x, 2, width, MARGIN_TOP - 4),
                             Qt.AlignRight | Qt.AlignVCenter, s.name)

    # -- mouse ------------------------------------------------------------------------------

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        index = self.index_at(event.position().x())
        if index is not None and event.button() == Qt.LeftButton:
            self.set_selected(index)
            self.pointClicked.emit(index)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        index = self.index_at(event.position().x())
        if index is None:
            return
        lines = [f"#{index}" + (f"  {self.labels[index]}" if index < len(self.labels) else "")]
        lines += [f"{s.name}: {s.values[index]:.4g}" for s in self.series
                  if index < len(s.values)]
        QToolTip.showText(event.globalPosition().toPoint(), "\n".join(lines), self)
