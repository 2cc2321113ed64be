"""A dialog's groups in a scroll area, its error line and buttons below in view: a
720-pixel screen holds every dialog, however tall its groups grow (a JSON schema, many
connections)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QFrame, QScrollArea, QVBoxLayout, QWidget


class ScrollingPage(QScrollArea):
    """The scrolling top of ``dialog``'s layout ``outer``; groups go into ``groups``."""

    def __init__(self, outer: QVBoxLayout, object_name: str) -> None:
        super().__init__()
        self.setObjectName(object_name)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.content = QWidget()
        self.groups = QVBoxLayout(self.content)
        self.groups.setContentsMargins(0, 0, 0, 0)
        self.setWidget(self.content)
        outer.addWidget(self, 1)

    def fit_screen(self, dialog: QDialog) -> None:
        """Size ``dialog`` as tall as its groups need, never taller than its screen."""
        available = dialog.screen().availableGeometry()
        scrollbar = self.verticalScrollBar().sizeHint().width()
        hint = self.content.sizeHint()
        width = min(max(dialog.minimumWidth(), hint.width() + scrollbar + 24),
                    available.width() - 40)
        height = min(hint.height() + 90, available.height() - 60)
        dialog.resize(width, height)
