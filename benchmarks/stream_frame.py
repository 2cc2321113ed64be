"""What one repaint of the Token tab's busiest widgets costs: the reply chart for answers
of growing length, and the top-5 table with new records each time (a streamed answer
repaints both every frame). Median of repeated ``repaint()`` calls, offscreen, with the
app's style sheet.

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m benchmarks.panel_paint
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QWidget

ANSWER_TOKENS = (64, 500, 2000, 8000)
REPAINTS = 40


def median_repaint_ms(widget: QWidget, before: Callable[[int], None]) -> float:
    times = []
    for k in range(REPAINTS):
        before(k)
        started = time.perf_counter()
        widget.repaint()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> int:
    app = QApplication.instance() or QApplication(sys.argv)
    from app.desktop import theme
    from app.inspector.charts import LineChart, Series
    from app.inspector.panel import DebugPanel
    from app.inspector.rows import TopRow

    theme.apply(app, dark=False)
    rng = random.Random(0)
    for n in ANSWER_TOKENS:
        chart = LineChart("probability and entropy per token (click a point)")
        chart.resize(420, 130)
        chart.show()
        chart.set_series([Series("p", [rng.random() for _ in range(n)], QColor("red")),
                          Series("entropy", [3 * rng.random() for _ in range(n)],
                                 QColor("blue"))])
        app.processEvents()
        print(f"reply chart, {n:5d} tokens: {median_repaint_ms(chart, lambda k: None):7.2f} ms")
    panel = DebugPanel()
    panel.resize(430, 900)
    panel.show()
    app.processEvents()
    table = panel.top_table

    def new_records(k: int) -> None:
        panel.top_model.set_records([TopRow(i, f" word{i}{k % 3}", 10.0 - i, 0.5 / (i + 1),
                                            1 - i / 5, i == 0) for i in range(5)])

    print(f"top-5 table, new records: "
          f"{median_repaint_ms(table.viewport(), new_records):7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
