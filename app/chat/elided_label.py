"""A one-line label that never widens what holds it: a bubble's header (the model's name,
"interrupted by the model switch") wider than the chat column would widen every bubble of
the conversation, which then all lay out their text again, and scroll sideways.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel, QWidget


class ElidedLabel(QLabel):
    """Its whole text when there is room; narrower, the text ends in "…" and the tooltip
    holds all of it. ``text()`` stays the whole text. The first ``keep`` characters stay
    shown (a model's name before a note beside it)."""

    def __init__(self, text: str = "", parent: QWidget | None = None, keep: int = 0) -> None:
        super().__init__(text, parent)
        self._own_tip = ""
        self._keep = keep

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        text = self.text()
        kept = text if len(text) <= self._keep else text[:self._keep] + "…"
        margins = self.contentsMargins()
        width = self.fontMetrics().horizontalAdvance(kept) + margins.left() + margins.right()
        return QSize(width if kept else 0, super().minimumSizeHint().height())

    def setToolTip(self, tip: str) -> None:  # noqa: N802 (Qt override)
        self._own_tip = tip
        self._update_tip()

    def setText(self, text: str) -> None:  # noqa: N802 (Qt override)
        super().setText(text)
        self._update_tip()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._update_tip()

    def _elided(self) -> bool:
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def _update_tip(self) -> None:
        cut = self._elided() and self.text()
        super().setToolTip("\n".join(t for t in (self.text() if cut else "", self._own_tip)
                                     if t))

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt override)
        if not self._elided():
            super().paintEvent(event)
            return
        with QPainter(self) as painter:  # ended here even if a frame outlives the call
            self._paint(painter)

    def _paint(self, painter: QPainter) -> None:
        rect = self.contentsRect()
        shown = self.fontMetrics().elidedText(self.text(), Qt.ElideRight, rect.width())
        self.style().drawItemText(painter, rect, int(self.alignment()), self.palette(),
                                  self.isEnabled(), shown, self.foregroundRole())
