"""The "Thinking" part of an answer from a thinking model (Qwen3, DeepSeek-R1): open while
the model thinks, folded to one line with its duration once the answer starts, and
unfolded again with a click.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QToolButton, QVBoxLayout, QWidget


def thought_for(duration_ms: int) -> str:
    """The folded section's title ("Thinking" when the time is not known, e.g. imported)."""
    if duration_ms <= 0:
        return "Thinking"
    seconds = duration_ms / 1000
    return f"Thought for {seconds:.1f} s" if seconds < 60 else \
        f"Thought for {int(seconds // 60)} min {int(seconds % 60)} s"


class ThinkingSection(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("thinkingSection")
        self.text = ""
        self.duration_ms = 0
        self.streaming = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 4, 10, 6)
        layout.setSpacing(4)
        self.toggle = QToolButton()
        self.toggle.setObjectName("thinkingToggle")
        self.toggle.setCheckable(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        self.toggle.setCursor(Qt.PointingHandCursor)
        self.toggle.toggled.connect(self._toggled)
        layout.addWidget(self.toggle, 0, Qt.AlignLeft)
        self.body = QLabel()
        self.body.setObjectName("thinkingText")
        self.body.setWordWrap(True)
        self.body.setTextFormat(Qt.PlainText)
        self.body.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addWidget(self.body)
        self.hide()

    @property
    def folded(self) -> bool:
        return not self.toggle.isChecked()

    def stream(self, text: str, duration_ms: int) -> None:
        """The model is thinking: show what it has thought so far, unfolded."""
        self.text, self.duration_ms, self.streaming = text, duration_ms, True
        self.body.setText(text.strip())
        self.toggle.setChecked(True)
        self._title()
        self.show()

    def finish(self, text: str, duration_ms: int) -> None:
        """Thinking is over (the answer started, or a stored answer is shown): fold."""
        self.text, self.duration_ms, self.streaming = text, duration_ms, False
        self.body.setText(text.strip())
        self.toggle.setChecked(False)
        self._title()
        self.setVisible(bool(text.strip()))

    def _toggled(self, unfolded: bool) -> None:
        self.body.setVisible(unfolded)
        self._title()

    def _title(self) -> None:
        arrow = Qt.DownArrow if self.toggle.isChecked() else Qt.RightArrow
        self.toggle.setArrowType(arrow)
        self.toggle.setText("Thinking…" if self.streaming else thought_for(self.duration_ms))
