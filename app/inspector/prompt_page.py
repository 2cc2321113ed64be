"""The panel's "Prompt" tab: every token the model saw, template markup included, image
rows tinted, M-RoPE's (t, h, w) where the positions have three axes; a click inspects one."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.inspector.rows import prompt_rows, visible_piece
from app.inspector.table_model import Column, RecordTableModel
from app.inspector.tables import table_view
from app.inspector.widgets import IMAGE_COLOUR, hint

EMPTY = ("The prompt the model saw, token by token, appears here after the next "
         "message.")


class PromptPage(QWidget):
    rowClicked = Signal(int)           # a prompt position


    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 12, 12, 12)
        self.prompt_label = hint(EMPTY)
        layout.addWidget(self.prompt_label)
        self.prompt_model = RecordTableModel(
            [
                Column("#", lambda r: str(r.position), numeric=True),
                Column("id", lambda r: str(r.id), numeric=True),
                Column("piece", lambda r: visible_piece(r.piece),
                       tip=lambda r: "replaced by the image's embeddings" if r.image else ""),
                Column("t · h · w", lambda r: r.rope,
                       tip=lambda r: "M-RoPE position: time, row, column"),
            ],
            emphasis=lambda r: IMAGE_COLOUR if r.image else None,
            bold=False,
        )
        self.prompt_table = table_view(self.prompt_model, stretch_column=2)
        self.prompt_table.clicked.connect(lambda index: self.rowClicked.emit(index.row()))
        layout.addWidget(self.prompt_table)

    def show_prompt(self, prompt, piece: Callable[[int], str]) -> None:
        """prompt: engine PromptTokens; image rows are tinted and, where positions are
        M-RoPE's three axes, each row shows its (t, h, w)."""
        rows = prompt_rows(prompt, piece)
        images = sum(r.image for r in rows)
        note = f"; {images} of them carry image embeddings" if images else ""
        self.prompt_label.setText(f"{len(rows)} prompt tokens (template markup included{note}); "
                                  "click one to inspect it on the Inside tab")
        self.prompt_model.set_records(rows)
        self.prompt_table.setColumnHidden(3, np.ndim(prompt.positions) == 1)

    def clear(self) -> None:
        self.prompt_label.setText(EMPTY)
        self.prompt_model.set_records([])
