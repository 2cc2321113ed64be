"""The one progress strip of the panel: the button that starts a piece of work, and beside
it while the work runs a thin bar and Cancel, the stage below in words with the time left
once it can be told. Every long action of the panel (inspection, attribution, tracing, the
layer comparisons, llama.cpp's opinion, Compare) shows its progress where it was started.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

ESTIMATE_AFTER = 0.05      # a fraction done before the time left is told (less says little)
ESTIMATE_FROM_S = 3.0      # and only for work that has run this long already


def time_left(seconds: float) -> str:
    if seconds < 60:
        return f"about {max(5, round(seconds / 5) * 5):.0f} s left"
    if seconds < 3600:
        return f"about {round(seconds / 60):.0f} min left"
    return f"about {seconds / 3600:.1f} h left"


class ProgressStrip(QWidget):
    """``button`` (and ``also``, the actions beside it) on the left; while busy, the bar and
    Cancel beside them, the stage under them, and they are disabled. ``progress`` and
    ``cancel_button`` are the parts tests and callers look at."""

    def __init__(self, button: QPushButton, cancelled: Callable[[], object],
                 *also: QPushButton, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.buttons = (button, *also)
        self._started = 0.0
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(2)
        row = QHBoxLayout()
        for action in self.buttons:
            row.addWidget(action)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setTextVisible(False)        # a thin bar: the stage is a line below
        row.addWidget(self.progress, 1)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(cancelled)
        row.addWidget(self.cancel_button)
        outer.addLayout(row)
        self.stage = QLabel("")
        self.stage.setObjectName("panelHint")
        self.stage.setWordWrap(True)
        outer.addWidget(self.stage)
        self.still()

    @property
    def busy(self) -> bool:
        return not self.progress.isHidden()

    def start(self, stage: str = "", *, measured: bool = True) -> None:
        """Work started: the bar from 0 (a moving bar when the work reports no fraction,
        ``measured`` False), Cancel shown, the actions that would start more disabled."""
        self._started = time.monotonic()
        self.progress.setRange(0, 100 if measured else 0)
        self.progress.setValue(0)
        self.progress.show()
        self.cancel_button.show()
        for button in self.buttons:
            button.setEnabled(False)
        self.stage.setText(stage)
        self.stage.setVisible(bool(stage))

    def advance(self, stage: str, fraction: float) -> None:
        """The work's stage and how far it is; the time left once it can be told."""
        self.progress.setValue(int(100 * fraction))
        elapsed = time.monotonic() - self._started
        if fraction >= ESTIMATE_AFTER and elapsed >= ESTIMATE_FROM_S and fraction < 1:
            stage = f"{stage} · {time_left(elapsed * (1 - fraction) / fraction)}"
        self.stage.setText(stage)
        self.stage.setVisible(bool(stage))

    def still(self) -> None:
        """No work runs: the bar, Cancel and the stage hidden, the actions usable again."""
        self.progress.hide()
        self.cancel_button.hide()
        self.stage.hide()
        for button in self.buttons:
            button.setEnabled(True)
