"""A document attached to a sent message, as its bubble shows it: a chip with the file's
name and size that opens to its text, instead of the ``<document name=…>`` markup and the
whole text the model reads."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QPlainTextEdit, QToolButton, QVBoxLayout

from engine.chat.documents import Document

SHOWN_LINES = 12        # an opened document's text scrolls past this many lines


def size_text(document: Document) -> str:
    lines = document.text.count("\n") + 1
    cut = " · cut to fit" if "[… truncated:" in document.text else ""
    return f"{lines:,} line{'s' if lines != 1 else ''} · {len(document.text):,} characters{cut}"


class SentDocument(QFrame):
    def __init__(self, document: Document) -> None:
        super().__init__()
        self.setObjectName("documentChip")
        self.document = document
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 3, 6, 3)
        layout.setSpacing(2)
        self.toggle = QToolButton()
        self.toggle.setObjectName("sentDocument")
        self.toggle.setCheckable(True)
        self.toggle.setCursor(Qt.PointingHandCursor)
        self.toggle.setToolButtonStyle(Qt.ToolButtonTextOnly)
        self.toggle.setToolTip("The model read this file's text with the message; click to "
                               "show it")
        self.toggle.toggled.connect(self._show_text)
        layout.addWidget(self.toggle, 0, Qt.AlignLeft)
        self.text = QPlainTextEdit(document.text)
        self.text.setReadOnly(True)
        lines = min(document.text.count("\n") + 1, SHOWN_LINES)
        # the frame, the document's margin and the style sheet's 4-pixel padding, each side
        margins = 2 * (self.text.frameWidth() + int(self.text.document().documentMargin()) + 4)
        self.text.setFixedHeight(self.text.fontMetrics().lineSpacing() * lines + margins)
        if lines < SHOWN_LINES:          # all of it is in view
            self.text.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.text.hide()
        layout.addWidget(self.text)
        self._show_text(False)

    def _show_text(self, shown: bool) -> None:
        arrow = "▾" if shown else "▸"
        self.toggle.setText(f"{arrow} {self.document.name} · {size_text(self.document)}")
        self.text.setVisible(shown)
