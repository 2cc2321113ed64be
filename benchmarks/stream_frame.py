"""What a streamed answer's frame costs the window in the widgets that change each frame:
the Token tab's reply chart and top-5 table (one repaint), and an answer coloured by token
probability (the frame's new tokens shown, laid out and painted), for answers of growing
length: a cost that grows with the answer freezes the window of a user with a long one.
Medians, offscreen, with the app's style sheet.

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m benchmarks.stream_frame
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
TOKENS_A_FRAME = 4
PARAGRAPH = 90          # tokens a paragraph of the coloured answer


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
    coloured_answer(app)
    return 0


def coloured_answer(app: QApplication) -> None:
    """An answer streamed TOKENS_A_FRAME tokens a frame with colouring on: each frame's
    cost (the new tokens, layout, paint) at the lengths of ANSWER_TOKENS."""
    from app.chat.view import ChatView, MessageWidget
    from engine.chat.events import TokenEvent

    view = ChatView()
    view.resize(800, 700)
    view.show()
    answer = view.add(MessageWidget("assistant", "Lantern"))
    answer.set_color_tokens(True)
    tokens: list[TokenEvent] = []
    answer.tokens = tokens
    frames: list[float] = []
    for n in range(1, max(ANSWER_TOKENS) + 1):
        text = "\n\n" if n % PARAGRAPH == 0 else " word"
        tokens.append(TokenEvent(n - 1, 5, text, text, 1.0, -0.3, 0.5, (), 0))
        if n % TOKENS_A_FRAME:
            continue
        started = time.perf_counter()
        answer.set_text("".join(t.text for t in tokens), immediate=True)
        app.processEvents()
        frames.append((time.perf_counter() - started) * 1000)
        if n in ANSWER_TOKENS:
            print(f"coloured answer, {n:5d} tokens: a frame {statistics.median(frames):7.2f} ms"
                  f" (median of the last {len(frames)}, slowest {max(frames):.2f})")
            frames = []


if __name__ == "__main__":
    sys.exit(main())
