""""Get a model": type a name such as ``qwen2.5vl:3b``, watch its size and progress, cancel.
The pull runs as a job off the GUI thread; a cancelled or failed pull keeps what can be
resumed, so pressing Download again continues where it stopped.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.workers import Job, JobRunner
from engine.store import Store
from engine.store.humanize import human_bytes
from engine.store.names import DEFAULT_HOST
from engine.store.pull import PullProgress, PullResult, pull_model

STEPS = 1000


class PullJob(Job):
    progress = Signal(object)        # PullProgress
    pulled = Signal(object)          # PullResult

    def __init__(self, store: Store, name: str, insecure: bool) -> None:
        super().__init__()
        self.store, self.name, self.insecure = store, name, insecure

    def work(self) -> None:
        result = pull_model(self.store, self.name, insecure=self.insecure,
                            progress=self.progress.emit, cancel=self.cancel_event)
        self.pulled.emit(result)


class GetModelDialog(QDialog):
    pulled = Signal(object)          # PullResult, once the model is in the store

    def __init__(self, runner: JobRunner, store: Store, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Get a model")
        self.setObjectName("getModelDialog")
        self.setFixedWidth(560)          # fixed: wrapped lines then get their height
        self.runner, self.store = runner, store
        self.job: PullJob | None = None
        self.started = 0.0
        layout = QVBoxLayout(self)
        intro = QLabel(f"Download a model into the Ollama store at {store.root}, from "
                       f"{DEFAULT_HOST} unless the name starts with another registry.")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.name = QLineEdit()
        self.name.setPlaceholderText("qwen2.5vl:3b")
        self.name.returnPressed.connect(self.start)
        layout.addWidget(self.name)
        self.insecure = QCheckBox("Allow plain http (a private registry on your network)")
        layout.addWidget(self.insecure)
        self.size = QLabel("")
        self.size.setObjectName("pullSize")
        layout.addWidget(self.size)
        self.bar = QProgressBar()
        self.bar.setRange(0, STEPS)
        self.bar.setTextVisible(False)
        self.bar.hide()
        layout.addWidget(self.bar)
        self.status = QLabel("")
        self.status.setObjectName("pullStatus")
        self.status.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addWidget(self.status)
        self.error = QLabel("")
        self.error.setObjectName("pullError")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: rgb(200, 60, 50);")
        self.error.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.error.hide()
        layout.addWidget(self.error)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.cancel_button = QPushButton("Close")
        self.cancel_button.clicked.connect(self.cancel_or_close)
        self.download = QPushButton("Download")
        self.download.setDefault(True)
        self.download.clicked.connect(self.start)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.download)
        layout.addLayout(buttons)

    @property
    def running(self) -> bool:
        return self.job is not None

    def start(self) -> None:
        name = self.name.text().strip()
        if self.running or not name:
            return
        self.error.hide()
        self.bar.setValue(0)
        self.size.setText("")
        for widget in (self.size, self.bar, self.status):
            widget.show()
        self.adjustSize()
        self.status.setText(f"Looking up {name}…")
        self.job = job = PullJob(self.store, name, self.insecure.isChecked())
        job.progress.connect(self._progress)
        job.pulled.connect(self._pulled)
        job.failed.connect(self._failed)
        self._set_running(True)
        self.started = time.monotonic()
        self.runner.start(job)

    def cancel_or_close(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self.status.setText("Cancelling…")
        else:
            self.reject()

    def _set_running(self, running: bool) -> None:
        self.name.setEnabled(not running)
        self.insecure.setEnabled(not running)
        self.download.setEnabled(not running)
        self.cancel_button.setText("Cancel" if running else "Close")

    def _progress(self, progress: PullProgress) -> None:
        if self.sender() is not self.job:
            return
        self.bar.setValue(int(progress.fraction * STEPS))
        if progress.total:
            self.size.setText(f"Size: {human_bytes(progress.total)}")
            self.status.setText(f"{progress.fraction:.0%} · {progress.status} · "
                                f"{progress.describe(time.monotonic() - self.started)}")
        else:
            self.status.setText(progress.status)

    def _pulled(self, result: PullResult) -> None:
        self.job = None
        self._set_running(False)
        self.bar.setValue(STEPS)
        self.status.setText(f"{result.name.display} is in the store "
                            f"({human_bytes(result.size)}).")
        self.pulled.emit(result)
        self.accept()

    def _failed(self, message: str) -> None:
        if self.sender() is not self.job:
            return
        self.job = None
        self._set_running(False)
        for widget in (self.size, self.bar, self.status):
            widget.hide()
        self.error.setText(message)
        self.error.show()
        self.adjustSize()

    def reject(self) -> None:
        """Closing the dialog (Esc, the window's close button) cancels a pull in progress."""
        if self.job is not None:
            self.job.cancel()
            self.job = None
        super().reject()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        self.reject()
        event.accept()
