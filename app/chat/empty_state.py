"""What the window shows before there is anything to chat with: where models come from,
which folder Lantern looked in, and the ways to fix that (another folder, a GGUF import).
"""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

PULL_COMMAND = "ollama pull qwen2.5vl"
SMALL_PULL_COMMAND = "ollama pull qwen2.5-coder:0.5b"


def suggested_name(gguf: str | Path) -> str:
    """A model name from a GGUF file name: lower case, Ollama's allowed characters."""
    stem = Path(gguf).stem.lower()
    name = re.sub(r"[^a-z0-9._-]+", "-", stem).strip("-._")
    return name or "imported"


class EmptyState(QFrame):
    getModelRequested = Signal()
    folderChosen = Signal(str)
    importRequested = Signal(str)            # path of a .gguf file
    rescanRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("emptyState")
        outer = QVBoxLayout(self)
        outer.addStretch(1)
        card = QFrame()
        card.setObjectName("emptyCard")
        card.setMaximumWidth(620)
        layout = QVBoxLayout(card)
        layout.setContentsMargins(32, 28, 32, 28)
        layout.setSpacing(12)
        self.headline = QLabel()
        self.headline.setObjectName("emptyHeadline")
        self.headline.setWordWrap(True)
        layout.addWidget(self.headline)
        explanation = QLabel(
            "Lantern chats with the models in your Ollama model store and shows what they "
            "weigh at every token. Get a model here (no Ollama needed):"
        )
        explanation.setWordWrap(True)
        layout.addWidget(explanation)
        get_row = QHBoxLayout()
        self.get_model = QPushButton("Get a model…")
        self.get_model.setObjectName("primaryButton")
        self.get_model.clicked.connect(self.getModelRequested)
        get_row.addWidget(self.get_model)
        get_row.addStretch(1)
        layout.addLayout(get_row)
        layout.addWidget(QLabel("…or with Ollama:"))
        for command, note in ((PULL_COMMAND, "vision + text, 3B"),
                              (SMALL_PULL_COMMAND, "small and quick, text only")):
            row = QHBoxLayout()
            code = QLabel(command)
            code.setObjectName("commandLine")
            code.setTextInteractionFlags(Qt.TextSelectableByMouse)
            row.addWidget(code)
            hint = QLabel(note)
            hint.setObjectName("panelHint")
            row.addWidget(hint)
            row.addStretch(1)
            layout.addLayout(row)
        drop = QLabel("…or drop a <b>.gguf</b> file onto this window to import it into the "
                      "store under a name you choose.")
        drop.setWordWrap(True)
        layout.addWidget(drop)
        layout.addSpacing(6)
        where_title = QLabel("MODEL STORE")
        where_title.setObjectName("sectionLabel")
        layout.addWidget(where_title)
        self.store_path = QLabel()
        self.store_path.setObjectName("storePath")
        self.store_path.setWordWrap(True)
        self.store_path.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addWidget(self.store_path)
        buttons = QHBoxLayout()
        choose = QPushButton("Choose another folder…")
        choose.clicked.connect(self._choose_folder)
        buttons.addWidget(choose)
        import_button = QPushButton("Import a GGUF…")
        import_button.clicked.connect(self._choose_gguf)
        buttons.addWidget(import_button)
        rescan = QPushButton("Look again")
        rescan.setObjectName("primaryButton")
        rescan.clicked.connect(self.rescanRequested)
        buttons.addWidget(rescan)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(card, 10)
        row.addStretch(1)
        outer.addLayout(row)
        outer.addStretch(2)

    def set_store(self, root: Path, exists: bool) -> None:
        self.headline.setText("No model store found" if not exists
                              else "No models in the store yet")
        state = "does not exist yet" if not exists else "holds no models"
        self.store_path.setText(f"<code>{root}</code> — {state}")

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Ollama model store (the folder with "
                                                        "manifests/ and blobs/)")
        if folder:
            self.folderChosen.emit(folder)

    def _choose_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import a GGUF model", "",
                                              "GGUF models (*.gguf)")
        if path:
            self.importRequested.emit(path)
