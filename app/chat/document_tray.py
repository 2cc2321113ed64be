"""Documents attached to the next message, shown above the input as removable chips
with their token counts, and put into the message when it is sent.

A message that would not fit the context asks first: truncate the documents to fit, or
cancel (the message and its documents stay in the box). Nothing is ever cut silently.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QMessageBox, QToolButton, QWidget

from app.discard import discard
from engine.chat.documents import Document, DocumentError, compose, fit, read_document

# what the attach dialog offers besides images; any other file is tried as UTF-8 text
DOCUMENT_PATTERNS = ("*.pdf", "*.docx", "*.txt", "*.md", "*.rst", "*.csv", "*.json", "*.yaml",
                     "*.yml", "*.toml", "*.xml", "*.html", "*.py", "*.js", "*.ts", "*.c", "*.h",
                     "*.cpp", "*.rs", "*.go", "*.java", "*.sh", "*.sql", "*.log")
# (tokens, exact) of a text with the current model, and the tokens a new message may take
Counter = Callable[[str], tuple[int, bool]]


def local_files_of(mime: QMimeData) -> list[str]:
    """Local files in a drop or paste."""
    if not mime.hasUrls():
        return []
    return [url.toLocalFile() for url in mime.urls() if url.isLocalFile()]


def tokens_text(count: int, exact: bool) -> str:
    return f"{'' if exact else '≈'}{count:,} tokens"


class DocumentChip(QFrame):
    removeRequested = Signal(str)

    def __init__(self, document: Document, tokens: str) -> None:
        super().__init__()
        self.setObjectName("documentChip")
        self.name = document.name
        self.setToolTip(document.text[:400])
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 3, 3, 3)
        self.label = QLabel(f"{document.name} · {tokens}")
        layout.addWidget(self.label)
        remove = QToolButton()
        remove.setText("✕")
        remove.setToolTip("Remove this document")
        remove.setCursor(Qt.PointingHandCursor)
        remove.clicked.connect(lambda: self.removeRequested.emit(self.name))
        layout.addWidget(remove)


class DocumentTray(QWidget):
    rejected = Signal(str)          # a file that cannot be read, with why

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.documents: list[Document] = []
        self.count_tokens: Counter = lambda text: (-(-len(text) // 3), False)
        self.message_room: Callable[[], int] = lambda: 1 << 30
        self.ask_truncate: Callable[[str], bool] = self._ask_truncate
        self.row = QHBoxLayout(self)
        self.row.setContentsMargins(0, 0, 0, 0)
        self.row.addStretch(1)
        self.hide()

    def add(self, paths: list[str]) -> None:
        for path in paths:
            try:
                document = read_document(path)
            except DocumentError as error:
                self.rejected.emit(f"{error}: attach a text, source, PDF or DOCX file")
                continue
            if any(d.name == document.name for d in self.documents):
                continue
            self.documents.append(document)
        self.refresh()

    def remove(self, name: str) -> None:
        self.documents = [d for d in self.documents if d.name != name]
        self.refresh()

    def clear(self) -> None:
        self.documents = []
        self.refresh()

    def chips(self) -> list[DocumentChip]:
        return self.findChildren(DocumentChip)

    def refresh(self) -> None:
        """Chips for the documents, counted with the current model's tokenizer."""
        for chip in self.chips():
            discard(chip)
        for document in self.documents:
            chip = DocumentChip(document, tokens_text(*self.count_tokens(document.text)))
            chip.removeRequested.connect(self.remove)
            self.row.insertWidget(self.row.count() - 1, chip)
        self.setVisible(bool(self.documents))

    def message(self, text: str) -> str | None:
        """The message to send with the documents in it; None when the user cancelled."""
        if not self.documents:
            return text
        count = lambda t: self.count_tokens(t)[0]  # noqa: E731
        total, exact = self.count_tokens(compose(text, self.documents))
        room = self.message_room()
        if total <= room:
            return compose(text, self.documents)
        question = (f"This message with its documents is {tokens_text(total, exact)}, but the "
                    f"context leaves room for {room:,} (num_ctx, less the room kept for the "
                    "answer).\n\nTruncate the documents to fit, or cancel and attach less "
                    "(or raise num_ctx in Settings)?")
        if not self.ask_truncate(question):
            return None
        try:
            return compose(text, fit(text, self.documents, count, room))
        except DocumentError as error:
            self.rejected.emit(f"{error}: shorten the message or raise num_ctx in Settings")
            return None

    def _ask_truncate(self, question: str) -> bool:
        box = QMessageBox(QMessageBox.Question, "Too long for the context", question,
                          parent=self)
        truncate = box.addButton("Truncate to fit", QMessageBox.AcceptRole)
        box.addButton(QMessageBox.Cancel)
        box.exec()
        return box.clickedButton() is truncate


def is_document(path: str, image_suffixes: frozenset[str]) -> bool:
    """Not an image and not a model file: a document to read."""
    suffix = Path(path).suffix.lower()
    return suffix not in image_suffixes and suffix != ".gguf"
