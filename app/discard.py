"""Taking a widget out of the window. ``setParent(None)`` takes it out of its layout and out
of its parent's children at once, but hands it to Python: until Qt's ``deleteLater`` runs,
Python's garbage collector could destroy it first, on whichever thread collects (a job's),
which crashes. ``discard`` holds it until Qt has destroyed it on the GUI thread."""

import shiboken6
from PySide6.QtWidgets import QWidget

_held: list[QWidget] = []       # discarded, not yet destroyed by Qt


def discard(widget: QWidget) -> None:
    """Hide ``widget``, take it out of its parent now, destroy it on the next turn of the
    GUI thread's event loop."""
    _held[:] = [held for held in _held if shiboken6.isValid(held)]
    widget.hide()
    widget.setParent(None)
    _held.append(widget)
    widget.deleteLater()
