"""The strip above a conversation: its title, the model, and its own system prompt and
sampling options (what differs from the app's settings), with a button to change them.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.elided_label import ElidedLabel

SYSTEM_SHOWN = 60


def settings_summary(system: str, options: dict, answer_format: str = "") -> str:
    """"system: “Answer briefly.” · temperature 0.2 · seed 7 · JSON schema", or the
    defaults' note."""
    parts = []
    if system:
        line = " ".join(system.split())
        if len(line) > SYSTEM_SHOWN:
            line = line[: SYSTEM_SHOWN - 1].rstrip() + "…"
        parts.append(f"system: “{line}”")
    parts += [f"{name} {value}" for name, value in sorted(options.items())]
    if answer_format:
        parts.append("answers in JSON" if answer_format == "json" else "JSON schema")
    return " · ".join(parts) or "default system prompt and sampling"


class ConversationHeader(QFrame):
    editRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("conversationHeader")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(16, 8, 12, 8)
        text = QVBoxLayout()
        text.setSpacing(1)
        self.title = ElidedLabel("New chat")         # elide, never widen the window
        self.title.setObjectName("headerTitle")
        self.details = ElidedLabel("")
        self.details.setObjectName("headerDetails")
        self.details.setTextInteractionFlags(Qt.TextSelectableByMouse)
        for label in (self.title, self.details):
            text.addWidget(label)
        layout.addLayout(text, 1)
        self.edit = QPushButton("System && sampling…")
        self.edit.setObjectName("headerEdit")
        self.edit.setCursor(Qt.PointingHandCursor)
        self.edit.setToolTip("This conversation's own system prompt, sampling options and "
                             "structured output (a JSON schema)")
        self.edit.clicked.connect(self.editRequested)
        layout.addWidget(self.edit)

    def show_conversation(self, title: str, model: str, system: str, options: dict,
                          answer_format: str = "") -> None:
        self.title.setText(title)
        summary = settings_summary(system, options, answer_format)
        self.details.setText(f"{model} · {summary}" if model else summary)
        self.details.setToolTip(system)
