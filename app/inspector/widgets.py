"""The panel's small shared widgets: labels, a left-aligned action
button and a page body that scrolls; the tint of image rows every table shares (the
progress strip is app/inspector/progress_strip.py)."""

from collections.abc import Callable

from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

IMAGE_COLOUR = QColor(140, 90, 220, 45)   # rows an image's embeddings fill


def section(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("panelSection")
    return label


def hint(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("panelHint")
    label.setWordWrap(True)
    return label


def action_row(text: str, name: str, clicked: Callable[[], object]) -> tuple[QHBoxLayout,
                                                                          QPushButton]:
    """A button on the left of its own row (a tab's one action), and the row to add."""
    row = QHBoxLayout()
    button = QPushButton(text)
    button.setObjectName(name)
    button.clicked.connect(clicked)
    row.addWidget(button)
    row.addStretch(1)
    return row, button


def scrolling_body(page: QWidget) -> QVBoxLayout:
    """The layout of ``page``'s content, inside a frameless area that scrolls when the tab
    is shorter than it."""
    outer = QVBoxLayout(page)
    outer.setContentsMargins(0, 0, 0, 0)
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.NoFrame)
    outer.addWidget(scroll)
    body = QWidget()
    scroll.setWidget(body)
    layout = QVBoxLayout(body)
    layout.setContentsMargins(12, 12, 12, 12)
    return layout


