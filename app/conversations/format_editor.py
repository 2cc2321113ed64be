"""A conversation's structured output: off, any JSON object, or a JSON schema.

The schema is checked as it is typed (the engine's own check: valid JSON, and a schema
llguidance can enforce); the dialog that holds the editor refuses to close on an error.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QComboBox, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from engine.chat.answer_format import JSON, parse_format
from engine.errors import LanternError

MODES = (("off", "off: free text"), (JSON, "JSON: any JSON object"),
         ("schema", "schema: JSON that matches this schema"))
EXAMPLE = '{\n  "type": "object",\n  "properties": {"answer": {"type": "string"}},\n' \
          '  "required": ["answer"]\n}'


class FormatEditor(QWidget):
    changed = Signal()

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.mode = QComboBox()
        self.mode.setObjectName("formatMode")
        for key, label in MODES:
            self.mode.addItem(label, key)
        self.mode.setToolTip("Enforced while the model writes: every token it may not write "
                             "is removed (the panel shows how many, and when the schema "
                             "forced the token). Tell the model in your message what to fill in.")
        self.schema = QPlainTextEdit()
        self.schema.setObjectName("formatSchema")
        self.schema.setPlaceholderText(EXAMPLE)
        self.schema.setFont(QFontDatabase.systemFont(QFontDatabase.FixedFont))
        self.schema.setFixedHeight(140)
        self.status = QLabel("")
        self.status.setObjectName("formatStatus")
        self.status.setWordWrap(True)
        layout.addWidget(self.mode)
        layout.addWidget(self.schema)
        layout.addWidget(self.status)
        if text and text != JSON:
            self.schema.setPlainText(text)
        self.mode.setCurrentIndex({"": 0, JSON: 1}.get(text, 2))
        self.mode.currentIndexChanged.connect(self._update)
        self.schema.textChanged.connect(self._update)
        self._update()

    def text(self) -> str:
        """What the conversation stores: "", "json" or the schema's text."""
        key = self.mode.currentData()
        if key == "off":
            return ""
        return JSON if key == JSON else self.schema.toPlainText().strip()

    def error(self) -> str | None:
        """Why the schema cannot be used, with what to do; None when it can."""
        if self.mode.currentData() != "schema":
            return None
        text = self.schema.toPlainText().strip()
        if not text:
            return "Type a JSON schema, or choose off or JSON."
        try:
            parse_format(text)
        except LanternError as error:
            message = str(error)
            return message[:1].upper() + message[1:] + ". Fix it, or choose off or JSON."
        return None

    def _update(self) -> None:
        schema_mode = self.mode.currentData() == "schema"
        self.schema.setVisible(schema_mode)
        error = self.error()
        self.status.setProperty("error", error is not None)
        self.status.setText(error or ("The schema is valid." if schema_mode else ""))
        self.status.setStyleSheet("color: #c0392b;" if error else "")
        self.status.setVisible(schema_mode)
        self.changed.emit()
