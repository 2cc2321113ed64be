"""The window's keyboard shortcuts, in one list that both binds them and shows them
(Help → Keyboard shortcuts)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

# (key, what it does, action name in the window's table); Enter and Ctrl+D are bound
# elsewhere (the input box, the View menu) and listed here so the list is complete
SHORTCUTS = (
    ("Ctrl+N", "New chat", "new_chat"),
    ("Ctrl+L", "Focus the message box", "focus_input"),
    ("Ctrl+K", "Pick a model (arrows, then Enter loads it)", "pick_model"),
    ("Ctrl+F", "Search conversations", "search"),
    ("Esc", "Stop the answer (or leave editing)", "escape"),
    ("Ctrl+Shift+C", "Copy the last answer", "copy_answer"),
    ("Enter", "Send (Shift+Enter: new line)", ""),
    ("Ctrl+D", "Show or hide the debug panel", ""),
    ("F1", "This list", "show_shortcuts"),
)


def bind(window: QWidget, handlers: Mapping[str, Callable[[], object]]) -> dict[str, QAction]:
    """Window-wide actions for every listed shortcut that has a handler (menus reuse
    them, so each key is bound once)."""
    actions = {}
    for key, text, name in SHORTCUTS:
        if name:
            action = QAction(text, window)
            action.setShortcut(QKeySequence(key))
            action.setShortcutContext(Qt.WindowShortcut)
            action.triggered.connect(handlers[name])
            window.addAction(action)
            actions[name] = action
    return actions


def shown(key: str) -> str:
    """A key as this platform writes it (Ctrl becomes ⌘ on macOS)."""
    return QKeySequence(key).toString(QKeySequence.NativeText) or key


class ShortcutsDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        layout = QVBoxLayout(self)
        rows = "".join(f"<tr><td style='padding:3px 18px 3px 0'><b>{shown(key)}</b></td>"
                       f"<td>{text}</td></tr>" for key, text, _ in SHORTCUTS)
        self.table = QLabel(f"<table>{rows}</table>")
        self.table.setTextFormat(Qt.RichText)
        layout.addWidget(self.table)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
