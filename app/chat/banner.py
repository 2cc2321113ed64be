"""A strip above the chat for one readable line: an engine error, a notice, or the
progress of a long job with its Cancel button. It never blocks like a dialog would.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

LEVELS = ("info", "warning", "error", "progress")


INFO_SECONDS = 8              # long enough to read two lines

class Banner(QFrame):
    cancelRequested = Signal()
    actionRequested = Signal()           # the message's own button (e.g. Undo)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.level = ""
        # an info without a button goes by itself; warnings and errors wait for the user
        self._expiry = QTimer(self)
        self._expiry.setSingleShot(True)
        self._expiry.timeout.connect(self._expire)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(14, 8, 8, 8)
        layout.setSpacing(10)
        self.icon = QLabel()
        self.icon.setObjectName("bannerIcon")
        layout.addWidget(self.icon)
        self.text = QLabel()
        self.text.setObjectName("bannerText")
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addWidget(self.text, 1)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setFixedWidth(180)
        layout.addWidget(self.progress)
        self.action = QPushButton("")
        self.action.setObjectName("bannerAction")
        self.action.clicked.connect(self._act)
        layout.addWidget(self.action)
        self.cancel = QPushButton("Cancel")
        self.cancel.setObjectName("bannerCancel")
        self.cancel.clicked.connect(self.cancelRequested)
        layout.addWidget(self.cancel)
        self.close_button = QPushButton("✕")
        self.close_button.setObjectName("bannerClose")
        self.close_button.setToolTip("Dismiss")
        self.close_button.setCursor(Qt.PointingHandCursor)
        self.close_button.clicked.connect(self.dismiss)
        layout.addWidget(self.close_button)
        self.hide()

    def show_message(self, level: str, text: str, action: str = "") -> None:
        """level: "info", "warning" or "error"; `action` labels a button that emits
        actionRequested (and dismisses the message)."""
        self._set_level(level)
        self.action.setText(action)
        self.action.setVisible(bool(action))
        self.icon.setText({"info": "ℹ", "warning": "⚠", "error": "✖"}.get(level, ""))
        self.text.setText(text)
        self.progress.hide()
        self.cancel.hide()
        self.close_button.show()
        self.show()
        if level == "info" and not action:
            self._expiry.start(int(INFO_SECONDS * 1000))
        else:
            self._expiry.stop()

    def _expire(self) -> None:
        if self.level == "info":
            self.dismiss()

    def show_progress(self, text: str, fraction: float | None, cancellable: bool = True) -> None:
        """fraction None: busy indicator without a known end."""
        self._set_level("progress")
        self.icon.setText("")
        self.text.setText(text)
        if fraction is None:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * max(0.0, min(1.0, fraction))))
        self.progress.show()
        self.action.hide()
        self.cancel.setVisible(cancellable)
        self.close_button.hide()
        self.show()

    def _act(self) -> None:
        self.dismiss()
        self.actionRequested.emit()

    def dismiss(self) -> None:
        self._expiry.stop()
        self.level = ""
        self.hide()

    def dismiss_progress(self) -> None:
        """Hide the banner if it still shows progress (a message shown since stays)."""
        if self.level == "progress":
            self.dismiss()

    def _set_level(self, level: str) -> None:
        if level not in LEVELS:
            raise ValueError(f"unknown banner level {level!r}; use one of {LEVELS}")
        self.level = level
        self.setProperty("level", level)
        self.style().unpolish(self)
        self.style().polish(self)
