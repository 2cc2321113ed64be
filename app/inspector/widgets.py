"""The panel's small shared labels."""

from PySide6.QtWidgets import QLabel


def section(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("panelSection")
    return label


def hint(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("panelHint")
    label.setWordWrap(True)
    return label
