"""The logit lens as a grid: one row per layer (embeddings at the top), its top tokens
left to right, each cell tinted by probability; the final answer's token is outlined
wherever it appears, so a user sees at which layer the answer forms. Hover: the top-5.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from app.inspector.rows import visible_piece
from engine.inspect import LensRow

ROW_HEIGHT = 18
LABEL_WIDTH = 44
COLUMNS = 3
CELL_COLOUR = QColor(70, 130, 240)
ANSWER_COLOUR = QColor(255, 170, 40)


def layer_name(layer: int) -> str:
    return "emb" if layer == 0 else f"L{layer}"


class LensGrid(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: tuple[LensRow, ...] = ()
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)

    def set_rows(self, rows: tuple[LensRow, ...]) -> None:
        self.rows = rows
        self.setFixedHeight(max(1, len(rows)) * ROW_HEIGHT + 2)
        self.update()

    def _cell(self, row: int, column: int) -> QRectF:
        width = (self.width() - LABEL_WIDTH) / COLUMNS
        return QRectF(LABEL_WIDTH + column * width, row * ROW_HEIGHT + 1, width - 2,
                      ROW_HEIGHT - 2)

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        text = self.palette().windowText().color()
        answer = self.rows[-1].top[0].id if self.rows else None
        for r, row in enumerate(self.rows):
            painter.setPen(text)
            painter.drawText(QRectF(0, r * ROW_HEIGHT, LABEL_WIDTH - 4, ROW_HEIGHT),
                             Qt.AlignRight | Qt.AlignVCenter, layer_name(row.layer))
            for c, token in enumerate(row.top[:COLUMNS]):
                rect = self._cell(r, c)
                fill = QColor(CELL_COLOUR)
                fill.setAlpha(int(25 + 200 * token.prob))
                painter.fillRect(rect, fill)
                if token.id == answer:
                    painter.setPen(QPen(ANSWER_COLOUR, 2))
                    painter.drawRect(rect.adjusted(1, 1, -1, -1))
                painter.setPen(text)
                label = f"{visible_piece(token.token)}  {token.prob:.0%}"
                painter.drawText(rect.adjusted(4, 0, -2, 0), Qt.AlignLeft | Qt.AlignVCenter,
                                 painter.fontMetrics().elidedText(label, Qt.ElideRight,
                                                                  int(rect.width()) - 6))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        r = int(event.position().y() // ROW_HEIGHT)
        if not 0 <= r < len(self.rows):
            return
        row = self.rows[r]
        lines = [f"{layer_name(row.layer)}: what this layer would predict "
                 f"(entropy {row.entropy:.2f} nats)"]
        lines += [f"{visible_piece(t.token)}   p {t.prob:.3f}   logit {t.logit:.2f}"
                  for t in row.top[:5]]
        QToolTip.showText(event.globalPosition().toPoint(), "\n".join(lines), self)
