"""Control vectors of the conversation, above the input: one row per vector with a
strength slider (-3 .. 3, llama.cpp's strength), a button to add a vector file (llama.cpp's
GGUF format, e.g. made by `lantern steer`) and one to take a vector away. Every change is
emitted whole; the conversation applies it from the next answer on, with no reload.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

STEPS = 100       # slider steps per unit of strength
LIMIT = 3.0       # strengths from -LIMIT to LIMIT


class VectorRow(QWidget):
    """One vector: its name, the strength slider and its value, a remove button."""

    def __init__(self, path: str, strength: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.path = path
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        name = QLabel(Path(path).stem)
        name.setObjectName("vectorName")
        name.setToolTip(path)
        layout.addWidget(name)
        self.slider = QSlider(Qt.Horizontal)
        self.slider.setObjectName("strengthSlider")
        self.slider.setRange(int(-LIMIT * STEPS), int(LIMIT * STEPS))
        self.slider.setValue(round(strength * STEPS))
        self.slider.setToolTip("strength: how much of the vector is added (negative: away "
                               "from it)")
        layout.addWidget(self.slider, 1)
        self.value = QLabel()
        self.value.setObjectName("strengthValue")
        self.value.setMinimumWidth(40)
        layout.addWidget(self.value)
        self.remove = QPushButton("×")
        self.remove.setObjectName("removeVector")
        self.remove.setToolTip("stop steering with this vector")
        layout.addWidget(self.remove)
        self.slider.valueChanged.connect(self._show_value)
        self._show_value()

    @property
    def strength(self) -> float:
        return self.slider.value() / STEPS

    def _show_value(self) -> None:
        self.value.setText(f"{self.strength:+.2f}")


class SteeringBar(QWidget):
    changed = Signal(list)       # [(path, strength)] after every change

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("steeringBar")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 4, 14, 0)
        layout.setSpacing(2)
        self.rows_layout = QVBoxLayout()
        layout.addLayout(self.rows_layout)
        line = QHBoxLayout()
        self.add_button = QPushButton("Steer with a control vector…")
        self.add_button.setObjectName("addVector")
        self.add_button.setToolTip("add a control vector (llama.cpp's GGUF format; make one "
                                   "with `lantern steer`) to the model's residual stream")
        self.add_button.clicked.connect(self._choose)
        line.addWidget(self.add_button)
        line.addStretch(1)
        layout.addLayout(line)
        self.rows: list[VectorRow] = []

    def vectors(self) -> list[tuple[str, float]]:
        return [(row.path, row.strength) for row in self.rows]

    def set_vectors(self, vectors: list[tuple[str, float]]) -> None:
        """Show a conversation's vectors (emits nothing; the same ones keep their rows, so
        a slider being dragged stays in hand)."""
        if vectors == self.vectors():
            return
        for row in self.rows:
            row.deleteLater()
        self.rows = []
        for path, strength in vectors:
            self._add_row(path, strength)

    def add_vector(self, path: str, strength: float = 1.0) -> None:
        self._add_row(path, strength)
        self.changed.emit(self.vectors())

    def _add_row(self, path: str, strength: float) -> None:
        row = VectorRow(path, strength)
        row.slider.valueChanged.connect(lambda _value: self.changed.emit(self.vectors()))
        row.remove.clicked.connect(lambda _=False, r=row: self._remove(r))
        self.rows_layout.addWidget(row)
        self.rows.append(row)

    def _remove(self, row: VectorRow) -> None:
        self.rows.remove(row)
        row.deleteLater()
        self.changed.emit(self.vectors())

    def _choose(self) -> None:
        dialog = control_vector_dialog(self)
        if dialog.exec() and dialog.selectedFiles():
            self.add_vector(dialog.selectedFiles()[0])


MAKE_ONE = ("A control vector is a GGUF of one direction per layer, added to the model's "
            "hidden state (llama.cpp's format). Make one from two files of contrasting "
            "prompts, one per line:\n"
            "    lantern steer MODEL --positive happy.txt --negative sad.txt -o mood.gguf\n"
            "or with llama.cpp's cvector-generator. It must be made for this model's "
            "architecture and width.")


def control_vector_dialog(parent: QWidget) -> QFileDialog:
    """The file dialog for a control vector, saying what one is and how to make one (Qt's
    own dialog: a native one takes no extra text)."""
    dialog = QFileDialog(parent, "Steer with a control vector", "", "Control vectors (*.gguf)")
    dialog.setFileMode(QFileDialog.ExistingFile)
    dialog.setOption(QFileDialog.DontUseNativeDialog)
    note = QLabel(MAKE_ONE)
    note.setObjectName("controlVectorHint")
    note.setWordWrap(True)
    note.setTextInteractionFlags(Qt.TextSelectableByMouse)
    grid = dialog.layout()
    grid.addWidget(note, grid.rowCount(), 0, 1, grid.columnCount())
    return dialog
