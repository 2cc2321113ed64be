"""A conversation's own system prompt, sampling options and structured output (they win
over Settings for this conversation only). Only the values typed are kept, checked with
the engine's Options.resolve (and the schema with the engine's check) before the dialog
closes.
"""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.conversations.format_editor import FormatEditor
from app.scrolling_page import ScrollingPage
from app.settings.dialog import HINTS, SAMPLING, parse_option
from engine.chat.options import Options
from engine.errors import LanternError


class ConversationSettingsDialog(QDialog):
    def __init__(self, title: str, system: str, options: Mapping[str, object],
                 defaults: Options, default_system: str, parent: QWidget | None = None,
                 answer_format: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle(f"“{title}”: system prompt and sampling")
        self.setObjectName("conversationSettings")
        self.setMinimumWidth(520)
        self.defaults = defaults
        outer = QVBoxLayout(self)
        self.scroll = ScrollingPage(outer, "conversationSettingsScroll")
        layout = self.scroll.groups
        note = QLabel("For this conversation only; empty fields keep the app's settings "
                      "(shown in grey).")
        note.setWordWrap(True)
        layout.addWidget(note)
        form = QFormLayout()
        self.system_edit = QPlainTextEdit(system)
        self.system_edit.setPlaceholderText(default_system or "the model's own system prompt")
        self.system_edit.setFixedHeight(80)
        form.addRow("system prompt", self.system_edit)
        self.option_edits: dict[str, QLineEdit] = {}
        for name in SAMPLING:
            edit = QLineEdit(str(options[name]) if name in options else "")
            edit.setPlaceholderText(str(getattr(defaults, name)))
            edit.setToolTip(HINTS[name])
            self.option_edits[name] = edit
            form.addRow(name, edit)
        context = QLabel("The context size (num_ctx) is one for every chat: Settings → "
                         "Conversation (the model reloads with room for it).")
        context.setObjectName("contextNote")
        context.setWordWrap(True)
        form.addRow("num_ctx", context)
        self.format_editor = FormatEditor(answer_format)
        form.addRow("structured output", self.format_editor)
        layout.addLayout(form)
        self.error = QLabel("")
        self.error.setObjectName("dialogError")
        self.error.setWordWrap(True)
        self.error.hide()
        outer.addWidget(self.error)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        outer.addWidget(buttons)
        self.ok_button = buttons.button(QDialogButtonBox.Ok)
        self.format_editor.changed.connect(
            lambda: self.ok_button.setEnabled(self.format_editor.error() is None))
        self.ok_button.setEnabled(self.format_editor.error() is None)
        self.scroll.fit_screen(self)

    def system(self) -> str:
        return self.system_edit.toPlainText().strip()

    def options(self) -> dict[str, object]:
        """The values typed (ValueError names an option that is not a number)."""
        return {name: parse_option(name, edit.text())
                for name, edit in self.option_edits.items() if edit.text().strip()}

    def answer_format(self) -> str:
        """"", "json" or the schema's text (only valid ones: accept checks)."""
        return self.format_editor.text()

    def accept(self) -> None:
        try:
            Options.resolve({}, self.options())
        except (ValueError, LanternError) as error:
            self.error.setText(str(error))
            self.error.show()
            return
        problem = self.format_editor.error()
        if problem:
            self.error.setText(f"structured output: {problem}")
            self.error.show()
            return
        super().accept()
