"""A check's verdict as a label: green when it agrees or works, red when not, plain while
it runs. The panel's checks and the Settings tests (a connection, an MCP server) share it,
and the style sheet colours it (``QLabel[verdict="true"][ok=...]``)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel


def verdict_label(text: str = "", name: str = "verdict") -> QLabel:
    """A check's verdict: green when it agrees, red when not, plain while it runs."""
    label = QLabel(text)
    label.setObjectName(name)
    label.setProperty("verdict", True)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextSelectableByMouse)
    return label


def set_verdict(label: QLabel, text: str, ok: bool | None = None) -> None:
    label.setText(text)
    label.setProperty("ok", "" if ok is None else ("yes" if ok else "no"))
    label.style().unpolish(label)
    label.style().polish(label)
