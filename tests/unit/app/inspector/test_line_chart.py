"""The panel's line charts draw long series as a user needs them: a spike among 20 000
points is still drawn, a gap (a value a log scale cannot show) stays a gap, and a short
series has its points marked. A streamed answer's chart is painted every frame, so a long
series is drawn as each pixel column's highest and lowest value
(docs/benchmarks-journal.md, 'The reply chart')."""

import math

import numpy as np
from PySide6.QtGui import QColor, QImage

from app.inspector.charts import LineChart, Series

RED = QColor(220, 30, 30)


def painted(chart: LineChart) -> np.ndarray:
    """A mask of the pixels painted in the series' colour (rows, columns)."""
    image = chart.grab().toImage().convertToFormat(QImage.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(
        image.height(), image.bytesPerLine() // 4, 4)[:, :image.width()]
    blue, green, red = (pixels[..., i].astype(int) for i in range(3))
    return (red - green > 40) & (abs(green - blue) < 30)      # anti-aliased red too


def chart_of(qtbot, values, *, log: bool = False) -> LineChart:
    chart = LineChart("p", log=log)
    qtbot.addWidget(chart)
    chart.resize(420, 130)
    chart.set_series([Series("series", values, RED)])
    return chart


def test_a_spike_in_a_long_series_is_drawn_from_top_to_bottom(qtbot):
    values = [0.0] * 20_000
    values[12_345] = 1.0
    chart = chart_of(qtbot, values)
    plot, mask = chart._plot(), painted(chart)
    x = round(plot.left() + plot.width() * 12_345 / 19_999)
    column = mask[int(plot.top()) + 1:int(plot.bottom()), x - 1:x + 2].any(axis=1)
    assert column.mean() > 0.9                      # the whole height, one pixel wide
    flat = mask[int(plot.bottom()) - 2:int(plot.bottom()) + 1, int(plot.left()) + 5:x - 5]
    assert flat.any(axis=0).mean() > 0.95            # the zeros along the bottom
    xs, ys = chart._points(chart._heights[0], plot, *chart._span)
    assert len(xs) <= 2 * plot.width() + 2           # two points a pixel column at most


def test_a_gap_on_a_log_scale_stays_a_gap(qtbot):
    values = [0.5] * 5000 + [0.0] * 5000 + [0.25] * 5000      # 0: not on a log scale
    chart = chart_of(qtbot, values, log=True)
    plot, mask = chart._plot(), painted(chart)
    inside = mask[int(plot.top()) - 1:int(plot.bottom()) + 2]     # 0.5 on top, 0.25 below

    def at(fraction: float) -> bool:
        return bool(inside[:, round(plot.left() + plot.width() * fraction)].any())

    assert at(0.15) and at(0.85) and not at(0.5)
    assert chart._axis_labels() == ("0.5", "0.25")


def test_a_short_series_has_its_points_marked(qtbot):
    chart = chart_of(qtbot, [0.1, 0.9, math.nan, 0.4, 0.6])
    plot, mask = chart._plot(), painted(chart)
    for index, value in ((0, 0.1), (1, 0.9), (3, 0.4), (4, 0.6)):
        x = round(plot.left() + plot.width() * index / 4)
        y = round(plot.bottom() - (value - 0.1) / 0.8 * plot.height())
        assert mask[y - 1:y + 2, x - 1:x + 2].all()        # a dot, not only a line
    x = round(plot.left() + plot.width() * 2 / 4)
    assert not mask[int(plot.top()) + 3:int(plot.bottom()) - 3, x].any()   # NaN: no line
