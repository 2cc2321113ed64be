"""Where the user writes: multi-line text (Enter sends, Shift+Enter breaks the line),
images and documents attached by button, paste or drag & drop, shown as removable
thumbnails and chips (app.chat.document_tray), and the Send button that becomes Stop
while an answer streams. A message sent while a model loads waits in the box, saying so,
and goes when the model is ready; if the load fails or is cancelled it stays, with why.

Every image is checked when it arrives, so an unreadable file is reported at once (the
`imageRejected` signal carries the engine's ImageError message) rather than at send time.
Pasted images are saved under the data dir so the history can show them again later.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QIcon, QImage, QKeyEvent, QPixmap
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.document_tray import DOCUMENT_PATTERNS, DocumentTray, is_document, local_files_of
from app.desktop.theme import RESOURCES
from app.discard import discard
from app.workers import CallJob, JobRunner
from engine.errors import ImageError
from engine.paths import data_dir
from engine.vision.preprocess import load_image
from engine.vision.video import (
    VIDEO_SUFFIXES,
    VideoSummary,
    check_format,
    is_animated,
    summarize,
)

IMAGE_SUFFIXES = frozenset({".png", ".apng", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tif",
                            ".tiff"})
THUMB_SIZE = 64
MAX_LINES = 8                # the input grows up to this many lines, then scrolls


@dataclass(frozen=True)
class Submission:
    text: str
    images: tuple[str, ...]     # image file paths
    edit: bool                  # True: replaces the last user message


def save_pasted_image(image: QImage) -> str:
    """Store a pasted bitmap as PNG under the data dir, named by its content."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.WriteOnly)
    image.save(buffer, "PNG")
    raw = bytes(data.data())
    folder = data_dir() / "images"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"pasted-{hashlib.sha256(raw).hexdigest()[:16]}.png"
    if not path.exists():
        path.write_bytes(raw)
    return str(path)


class PromptEdit(QPlainTextEdit):
    """Enter submits, Shift+Enter inserts a line break; images pasted or dropped are
    handed to the input box instead of being inserted as text."""

    submitted = Signal()
    imagesPasted = Signal(list)          # list[str] paths (of documents too)
    escapePressed = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 (Qt override)
        if event.key() in (Qt.Key_Return, Qt.Key_Enter) and \
                not event.modifiers() & Qt.ShiftModifier:
            self.submitted.emit()
            return
        if event.key() == Qt.Key_Escape:
            self.escapePressed.emit()
            return
        super().keyPressEvent(event)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:  # noqa: N802 (Qt override)
        return source.hasImage() or bool(local_files_of(source)) or \
            super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:  # noqa: N802 (Qt override)
        paths = local_files_of(source)  # images and documents: the input box sorts them
        if not paths and source.hasImage():
            image = source.imageData()
            if isinstance(image, QImage) and not image.isNull():
                paths = [save_pasted_image(image)]
        if paths:
            self.imagesPasted.emit(paths)
        else:
            super().insertFromMimeData(source)


class Thumbnail(QFrame):
    """An attached picture with its remove button; an animation carries a frame-count
    badge while the model reads video, once ``video`` (how it plays and what the model
    sees of it) is known."""

    removeRequested = Signal(str)

    def __init__(self, path: str, animated: bool = False) -> None:
        super().__init__()
        self.setObjectName("thumbnail")
        self.path, self.animated = path, animated
        self.video: VideoSummary | None = None
        self.setToolTip(path)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(3, 3, 3, 3)
        layout.setSpacing(2)
        picture = QLabel()
        pixmap = QPixmap(path)
        if not pixmap.isNull():
            picture.setPixmap(pixmap.scaled(THUMB_SIZE, THUMB_SIZE, Qt.KeepAspectRatio,
                                            Qt.SmoothTransformation))
        else:
            picture.setText(Path(path).name)
        self.badge = QLabel(self)   # over the picture's foot, as wide as it needs
        self.badge.setObjectName("videoBadge")
        self.badge.hide()
        layout.addWidget(picture)
        remove = QToolButton()
        remove.setObjectName("removeImage")
        remove.setText("✕")
        remove.setToolTip("Remove this image")
        remove.setCursor(Qt.PointingHandCursor)
        remove.clicked.connect(lambda: self.removeRequested.emit(self.path))
        layout.addWidget(remove, 0, Qt.AlignTop)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._place_badge()

    def _place_badge(self) -> None:
        self.badge.move(5, self.height() - self.badge.height() - 5)
        self.badge.raise_()

    def show_as_video(self, shown: bool) -> None:
        """The badge ("▶ 5 frames") and a tooltip saying how the animation is sampled,
        when the model takes it as a video; the plain picture otherwise."""
        video = self.video if shown else None
        self.badge.setVisible(video is not None)
        if video is None:
            self.setToolTip(self.path)
            return
        self.badge.setText(f"▶ {video.sampled} frames")
        self.badge.adjustSize()
        self._place_badge()
        self.setToolTip(f"{self.path}\nvideo: {video.total} frames over "
                        f"{video.seconds:.1f} s; the model sees {video.sampled} of them "
                        "(2 per second, paired)")


class InputBox(QFrame):
    submitted = Signal(object)           # Submission
    stopRequested = Signal()
    imagesAttached = Signal(list)        # list[str]: paths that were added
    imagesCleared = Signal()             # the last image was removed
    imageRejected = Signal(str)          # a readable reason
    documentRejected = Signal(str)       # a readable reason

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inputBox")
        self.images: list[str] = []
        self.video = False              # the model takes animations as video
        self.runner = JobRunner(self)
        self.editing = False
        self.busy = False
        self.ready = False
        self.loading: str | None = None   # the model being loaded, if one is
        self.waiting = False              # a message waits for that load to end
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 10)
        layout.setSpacing(6)

        self.edit_label = QLabel("Editing your last message · Enter resends · Esc cancels")
        self.edit_label.setObjectName("editLabel")
        self.edit_label.hide()
        layout.addWidget(self.edit_label)
        self.wait_label = QLabel()
        self.wait_label.setObjectName("waitLabel")
        self.wait_label.setWordWrap(True)
        self.wait_label.hide()
        layout.addWidget(self.wait_label)

        self.strip = QScrollArea()
        self.strip.setObjectName("thumbnailStrip")
        self.strip.setFrameShape(QFrame.NoFrame)
        self.strip.setWidgetResizable(True)
        self.strip.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.strip.setFixedHeight(THUMB_SIZE + 14)
        strip_inner = QWidget()
        self.strip_layout = QHBoxLayout(strip_inner)
        self.strip_layout.setContentsMargins(0, 0, 0, 0)
        self.strip_layout.addStretch(1)
        self.strip.setWidget(strip_inner)
        self.strip.hide()
        layout.addWidget(self.strip)
        self.documents = DocumentTray()
        self.documents.rejected.connect(self.documentRejected)
        layout.addWidget(self.documents)

        row = QHBoxLayout()
        row.setSpacing(8)
        self.attach_button = QToolButton()
        self.attach_button.setObjectName("attachButton")
        self.attach_button.setIcon(QIcon(str(RESOURCES / "icons" / "attach-image.svg")))
        self.attach_button.setIconSize(QSize(22, 22))
        self.attach_button.setToolTip("Attach images or documents: text, source, PDF, DOCX "
                                      "(or paste / drop them here)")
        self.attach_button.setCursor(Qt.PointingHandCursor)
        self.attach_button.clicked.connect(self._choose_images)
        row.addWidget(self.attach_button, 0, Qt.AlignBottom)
        self.editor = PromptEdit()
        self.editor.setObjectName("promptEdit")
        self.editor.setPlaceholderText("Message the model…  (Shift+Enter: new line)")
        self.editor.setTabChangesFocus(True)
        self.editor.submitted.connect(self.submit)
        self.editor.imagesPasted.connect(self.attach)
        self.editor.escapePressed.connect(self.escape)
        self.editor.document().documentLayout().documentSizeChanged.connect(self._fit_height)
        self.editor.textChanged.connect(self._update_send)
        row.addWidget(self.editor, 1)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setCursor(Qt.PointingHandCursor)
        self.send_button.clicked.connect(self._send_or_stop)
        row.addWidget(self.send_button, 0, Qt.AlignBottom)
        layout.addLayout(row)
        self._fit_height()

    # -- images ---------------------------------------------------------------------------

    def attach(self, paths: list[str]) -> None:
        """Check and add images and documents; each unreadable one is reported through
        imageRejected or documentRejected."""
        # a video file goes the images' way, to be refused with the formats that do work
        documents = [p for p in paths if is_document(p, IMAGE_SUFFIXES | VIDEO_SUFFIXES)]
        if documents:
            self.documents.add(documents)
        added = []
        for path in paths:
            if path in documents:
                continue
            if path in self.images:
                continue
            try:
                check_format(path)      # first: names the formats a video may come in
                load_image(Path(path))
            except ImageError as error:
                self.imageRejected.emit(str(error))
                continue
            self.images.append(path)
            thumb = Thumbnail(path, is_animated(path))
            if thumb.animated:
                self._summarize(path)
            thumb.removeRequested.connect(self.remove_image)
            self.strip_layout.insertWidget(self.strip_layout.count() - 1, thumb)
            added.append(path)
        self.strip.setVisible(bool(self.images))
        self._update_send()
        if added:
            self.imagesAttached.emit(added)

    def remove_image(self, path: str) -> None:
        if path in self.images:
            self.images.remove(path)
        for thumb in self.thumbnails():
            if thumb.path == path:
                discard(thumb)
        self.strip.setVisible(bool(self.images))
        self._update_send()
        if not self.images:
            self.imagesCleared.emit()

    def _summarize(self, path: str) -> None:
        """How the animation plays, read on a worker thread (every frame is decoded):
        its thumbnail gets the frame count when it is known."""
        job = CallJob(lambda: (path, summarize(path)))
        # bound methods and signals of this GUI-thread object only: then they are queued
        job.result.connect(self._summarized)
        job.failed.connect(self.imageRejected)
        self.runner.start(job)

    def _summarized(self, result: tuple[str, VideoSummary | None]) -> None:
        path, summary = result
        for thumb in self.thumbnails():
            if thumb.path == path:
                thumb.video = summary
                thumb.show_as_video(self.video)

    def set_video(self, reads_video: bool) -> None:
        """Whether the model takes animations as video: their thumbnails say so."""
        self.video = reads_video
        for thumb in self.thumbnails():
            thumb.show_as_video(reads_video)

    def thumbnails(self) -> list[Thumbnail]:
        return [w for w in self.strip.widget().findChildren(Thumbnail) if w.path in self.images]

    def _choose_images(self) -> None:
        suffixes = " ".join(f"*{s}" for s in sorted(IMAGE_SUFFIXES))
        documents = " ".join(DOCUMENT_PATTERNS)
        paths, _ = QFileDialog.getOpenFileNames(
            self, "Attach images or documents", "",
            f"Images and documents ({suffixes} {documents});;Images ({suffixes});;"
            f"Documents ({documents});;All files (*)")
        self.attach(paths)

    # -- sending --------------------------------------------------------------------------

    def submit(self) -> None:
        if self.busy:
            return
        text = self.editor.toPlainText().strip()
        if not text and not self.images and not self.documents.documents:
            return
        if self.loading is not None:     # sent when the model is ready (set_ready)
            self.waiting = True
            self._say_waiting()
            return
        self._say("")
        images = () if self.editing else tuple(self.images)
        if not self.editing:
            text = self.documents.message(text)
            if text is None:            # too long, and the user chose not to truncate
                return
        self.submitted.emit(Submission(text, images, self.editing))

    def accept_submission(self) -> None:
        """The window took the message: clear the box for the next one."""
        self.editor.clear()
        if not self.editing:
            for path in list(self.images):
                self.remove_image(path)
            self.documents.clear()
        self.cancel_edit()

    def begin_edit(self, text: str) -> None:
        self.editing = True
        self.editor.setPlainText(text)
        self.editor.moveCursor(self.editor.textCursor().MoveOperation.End)
        self.edit_label.show()
        self.attach_button.setEnabled(False)
        self.editor.setFocus()

    def cancel_edit(self) -> None:
        if self.editing:
            self.editing = False
            self.edit_label.hide()
            self.attach_button.setEnabled(True)
            self.editor.clear()

    def set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setProperty("stop", busy)
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)
        self._update_send()

    def set_ready(self, ready: bool) -> None:
        """Whether a model is loaded (the user may type anyway); a loaded model also ends
        the load, and a message that waited for it is sent now."""
        self.ready = ready
        if ready:
            self.loading = None
            if self.waiting:
                self.waiting = False
                self.submit()
        self._update_send()

    def set_loading(self, name: str) -> None:
        """A model is being loaded: Enter makes a message wait for it (one that waits
        already now waits for this model)."""
        self.loading = name
        if self.waiting:
            self._say_waiting()
        self._update_send()

    def load_stopped(self, why: str) -> None:
        """The load failed or was cancelled: a waiting message stays in the box, unsent."""
        name, self.loading = self.loading, None
        if self.waiting:
            self.waiting = False
            self._say(f"Not sent: {name} {why}. Your message is still here; choose a model "
                      "in the sidebar, then press Enter.")
        self._update_send()

    def escape(self) -> None:
        """Esc: a waiting message stays unsent; else leave editing."""
        if self.waiting:
            self.waiting = False
            self._say("")
        else:
            self.cancel_edit()

    def _say_waiting(self) -> None:
        self._say(f"Loading {self.loading}… your message is sent when it is ready "
                  "(Esc keeps it here unsent)")

    def _say(self, text: str) -> None:
        self.wait_label.setText(text)
        self.wait_label.setVisible(bool(text))

    def _update_send(self) -> None:
        """Stop while busy; Send once there is something to send and a model to take it
        (or one loading, to wait for)."""
        has_message = bool(self.images) or bool(self.editor.toPlainText().strip())
        self.send_button.setEnabled(
            self.busy or ((self.ready or self.loading is not None) and has_message))

    def _send_or_stop(self) -> None:
        if self.busy:
            self.stopRequested.emit()
        else:
            self.submit()

    def _fit_height(self) -> None:
        needed = int(self.editor.document().size().height())
        lines = max(1, min(MAX_LINES, needed))
        self.editor.setVerticalScrollBarPolicy(
            Qt.ScrollBarAsNeeded if needed > MAX_LINES else Qt.ScrollBarAlwaysOff)
        metrics = self.editor.fontMetrics()
        self.editor.setFixedHeight(lines * metrics.lineSpacing() + 18)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(400, super().sizeHint().height())
