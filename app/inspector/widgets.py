"""The panel's small shared widgets: labels and a left-aligned action button."""

from collections.abc import Callable

from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton


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
