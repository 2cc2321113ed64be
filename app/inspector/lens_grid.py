"""The logit lens as a grid: one row per layer (embeddings at the top), its top tokens
left to right, each cell tinted by probability; the final answer's token is outlined
wherever it appears, so a user sees at which layer the answer forms. Hover: the top-5.
With a mixture of experts, a last column names the experts the token took in each layer
(best first, with the weight each got): the router's choice beside what the layer predicts.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from app.inspector.rows import visible_piece
from engine.inspect import ExpertChoice, LensRow

ROW_HEIGHT = 18
LABEL_WIDTH = 44
COLUMNS = 3
EXPERTS_WIDTH = 130  # the experts column, when the model has one
CELL_COLOUR = QColor(70, 130, 240)
ANSWER_COLOUR = QColor(255, 170, 40)


def layer_name(layer: int) -> str:
    return "emb" if layer == 0 else f"L{layer}"


class LensGrid(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: tuple[LensRow, ...] = ()
        self.experts: tuple[ExpertChoice, ...] = ()
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)

    def set_rows(self, rows: tuple[LensRow, ...],
                 experts: tuple[ExpertChoice, ...] = ()) -> None:
        """``experts``: per layer (rows[1:]), the router's choice, when there is one."""
        self.rows, self.experts = rows, experts
        self.setFixedHeight(max(1, len(rows)) * ROW_HEIGHT + 2)
        self.update()

    def _cell(self, row: int, column: int) -> QRectF:
        width = (self.width() - LABEL_WIDTH - self._experts_width()) / COLUMNS
        return QRectF(LABEL_WIDTH + column * width, row * ROW_HEIGHT + 1, width - 2,
                      ROW_HEIGHT - 2)

    def _experts_width(self) -> int:
        return EXPERTS_WIDTH if self.experts else 0

    def experts_text(self, row: int) -> str:
        """The experts lens row ``row`` took ("#3 62%  #5 38%"); "" for the embeddings."""
        if not 0 < row <= len(self.experts):
            return ""
        choice = self.experts[row - 1]
        return "  ".join(f"#{int(e)} {float(w):.0%}"
                         for e, w in zip(choice.ids, choice.weights, strict=True))

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt override)
        with QPainter(self) as painter:  # ended here even if a frame outlives the call
            self._paint(painter)

    def _paint(self, painter: QPainter) -> None:
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
            if self.experts:
                painter.setPen(text)
                rect = QRectF(self.width() - EXPERTS_WIDTH + 4, r * ROW_HEIGHT, EXPERTS_WIDTH - 4,
                              ROW_HEIGHT)
                painter.drawText(rect, Qt.AlignLeft | Qt.AlignVCenter, painter.fontMetrics()
                                 .elidedText(self.experts_text(r), Qt.ElideRight,
                                             int(rect.width())))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        r = int(event.position().y() // ROW_HEIGHT)
        if not 0 <= r < len(self.rows):
            return
        row = self.rows[r]
        lines = [f"{layer_name(row.layer)}: what this layer would predict "
                 f"(entropy {row.entropy:.2f} nats)"]
        lines += [f"{visible_piece(t.token)}   p {t.prob:.3f}   logit {t.logit:.2f}"
                  for t in row.top[:5]]
        if self.experts_text(r):
            lines.append(f"experts it took (weight): {self.experts_text(r)}")
        QToolTip.showText(event.globalPosition().toPoint(), "\n".join(lines), self)
