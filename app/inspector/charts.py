"""Small line charts drawn with QPainter (PySide6-Essentials has no QtCharts).

One x axis of indices (tokens along a reply, or layers), one or more series sharing a y
axis (optionally logarithmic, where values <= 0 are left out), an optional dashed
reference series (a tolerance), the selected index marked; clicking a point emits its
index, hovering shows its values.

A streamed answer's chart is painted again each frame, so a paint costs about the same
for 50 tokens or 50 000: lines one pixel wide (a wider line is stroked with joins, a cost
that grows with every point), and where there are more points than pixel columns, each
column's lowest and highest value only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 46, 10, 22, 20
MAX_DOTS = 64           # a series this short has its points marked


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float]
    colour: QColor
    dashed: bool = False


class LineChart(QWidget):
    pointClicked = Signal(int)

    def __init__(self, title: str = "", *, log: bool = False, height: int = 130,
                 empty: str = "no data yet", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title, self.log = title, log
        self.empty = empty                           # drawn while there are no points
        self.series: list[Series] = []
        self._heights: list[np.ndarray] = []       # each series' plotted heights
        self._span = (0.0, 1.0)                      # their lowest and highest
        self.labels: Sequence[str] = ()
        self.selected: int | None = None
        self.setMinimumHeight(height)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.setMouseTracking(True)

    def set_series(self, series: list[Series], labels: Sequence[str] = ()) -> None:
        """labels[i]: how index i is named in the tooltip (a token, a layer)."""
        self.series, self.labels = series, labels
        self._heights = [self._plotted(s.values) for s in series]
        self._span = _span(self._heights)
        self.update()

    def set_empty(self, text: str) -> None:
        self.empty = text
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
        low, high = self._span
        return tuple(f"{10 ** v if self.log else v:.3g}" for v in (high, low))

    def _left_margin(self) -> int:
        """Room for the widest y-axis label (``8.8e-05`` is wider than ``0.5``), so none
        is cut."""
        metrics = self.fontMetrics()
        widest = max((metrics.horizontalAdvance(t) for t in self._axis_labels()), default=0)
        return max(MARGIN_LEFT, widest + 8)

    def _plotted(self, values: Sequence[float]) -> np.ndarray:
        """Plotted heights; on a log scale 0 and below are not drawn (NaN)."""
        heights = np.array(values, dtype=np.float64)
        heights[~np.isfinite(heights)] = np.nan
        if self.log:
            with np.errstate(divide="ignore", invalid="ignore"):
                heights = np.where(heights > 0, np.log10(heights), np.nan)
        return heights

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
        with QPainter(self) as painter:  # ended here even if a frame outlives the call
            self._paint(painter)

    def _paint(self, painter: QPainter) -> None:
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
            painter.drawText(plot, Qt.AlignCenter | Qt.TextWordWrap, self.empty)
            return
        low, high = self._span
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
        for s, heights in zip(reversed(self.series), reversed(self._heights), strict=True):
            painter.setPen(QPen(s.colour, 1, Qt.DashLine if s.dashed else Qt.SolidLine))
            xs, ys = self._points(heights, plot, low, high)
            for line in _finite_runs(xs, ys):
                painter.drawPolyline(line)
            if len(heights) <= MAX_DOTS and not s.dashed:
                painter.setBrush(s.colour)
                for x, y in zip(xs, ys, strict=True):
                    if np.isfinite(y):
                        painter.drawEllipse(QPointF(x, y), 2.2, 2.2)
                painter.setBrush(Qt.NoBrush)
            width = painter.fontMetrics().horizontalAdvance(s.name) + 8
            legend_x -= width
            painter.drawText(QRectF(legend_x, 2, width, MARGIN_TOP - 4),
                             Qt.AlignRight | Qt.AlignVCenter, s.name)

    def _points(self, heights: np.ndarray, plot: QRectF, low: float,
                high: float) -> tuple[np.ndarray, np.ndarray]:
        """Pixel positions of a series' points; more points than pixel columns become each
        column's highest and lowest (NaN where a column has none)."""
        n = self.count
        index = np.arange(len(heights), dtype=np.float64)
        columns = max(1, int(plot.width()))
        if len(heights) > 2 * columns:
            column = np.arange(len(heights)) * columns // len(heights)
            starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
            ends = np.r_[starts[1:], len(heights)]
            centre = (starts + ends - 1) / 2
            index = np.repeat(centre, 2)
            heights = np.column_stack([np.fmax.reduceat(heights, starts),
                                       np.fmin.reduceat(heights, starts)]).ravel()
        xs = plot.left() + (plot.width() * index / (n - 1) if n > 1
                            else np.full(len(index), plot.width() / 2))
        ys = plot.bottom() - (heights - low) / (high - low) * plot.height()
        return xs, ys

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


def _finite_runs(xs: np.ndarray, ys: np.ndarray) -> list[QPolygonF]:
    """The polylines through the points, broken where a value is not drawn (NaN)."""
    finite = np.isfinite(ys)
    edges = np.flatnonzero(np.diff(np.r_[False, finite, False].astype(np.int8)))
    return [QPolygonF([QPointF(x, y) for x, y in zip(xs[a:b], ys[a:b], strict=True)])
            for a, b in zip(edges[::2], edges[1::2], strict=True) if b - a > 1]


def _span(heights: list[np.ndarray]) -> tuple[float, float]:
    """The y axis: the lowest and highest height drawn (a flat series gets room around
    it), worked out once a series is set rather than on every paint."""
    finite = np.concatenate([h[np.isfinite(h)] for h in heights]) if heights else ()
    if not len(finite):
        return 0.0, 1.0
    low, high = float(np.min(finite)), float(np.max(finite))
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    return low, high
