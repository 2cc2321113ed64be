"""``--self-test``: prove a build works without anyone looking at it. Open the window,
wait until the store is listed and every model described, print one line per model
(``name<TAB>details`` or ``name<TAB>cannot run: reason``), optionally save a screenshot,
and quit: exit 0, or 1 when the list did not arrive in time. The packaging smoke test
and the CI bundle jobs run the frozen app this way.
"""

from __future__ import annotations

import sys
import time

from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from app.window import MainWindow

POLL_MS = 100


def listing_done(window: MainWindow) -> bool:
    entries = window.models.entries
    if entries:
        return all(entry.checked for entry in entries)
    return window.pages.currentWidget() is window.empty     # listed, and nothing there


def report(window: MainWindow, started: float) -> str:
    lines = [f"{e.name}\t{e.details if e.runnable else f'cannot run: {e.problem}'}"
             for e in window.models.entries]
    lines.append(f"self-test: {len(window.models.entries)} models listed from "
                 f"{window.models_controller.store().root} in "
                 f"{time.perf_counter() - started:.2f} s "
                 f"(window visible: {window.isVisible()}, "
                 f"Qt platform: {QGuiApplication.platformName()})")
    return "\n".join(lines)


def run(app: QApplication, window: MainWindow, started: float, screenshot: str | None,
        timeout_s: float = 60.0) -> None:
    """Poll until the listing is done (its signals come from a worker that may already
    have fired), then report and quit with the outcome as exit status."""
    timer = QTimer(window)
    deadline = time.perf_counter() + timeout_s

    def check() -> None:
        if listing_done(window):
            timer.stop()
            if screenshot:
                window.grab().save(screenshot)
            print(report(window, started), flush=True)
            app.exit(0 if window.isVisible() else 1)
        elif time.perf_counter() > deadline:
            timer.stop()
            print(f"self-test: the model list did not arrive within {timeout_s:.0f} s",
                  file=sys.stderr, flush=True)
            app.exit(1)

    timer.timeout.connect(check)
    timer.start(POLL_MS)
