"""Loads the chosen model on a worker thread (building its ONNX session takes seconds),
one load at a time: choosing another model cancels the load in progress. A remote model
loads nothing: its server is asked whether it still has it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

from PySide6.QtCore import QObject, Signal

from app.models.list_model import ModelEntry
from app.settings.store import Settings
from app.workers import JobRunner, LoadJob
from engine.launch import EngineChoices, load_local
from engine.remote.session import RemoteModel, open_remote_model
from engine.runtime.loaded_model import LoadedModel


def reach(remote: RemoteModel, progress: Callable[[str, float], None],
          cancel: threading.Event) -> RemoteModel:
    """"Loading" a remote model: make sure its server still has it (nothing is loaded here)."""
    progress(f"Asking {remote.connection.host}", 0.5)
    return open_remote_model(remote.connection, remote.name)


class ModelLoader(QObject):
    started = Signal(object)                # ModelEntry
    progress = Signal(str, float)           # stage, fraction
    loaded = Signal(object, object)         # LoadedModel, ModelEntry
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, runner: JobRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.job: LoadJob | None = None
        self.entry: ModelEntry | None = None

    @property
    def loading(self) -> bool:
        return self.job is not None

    def load(self, entry: ModelEntry, settings: Settings) -> None:
        self.cancel()
        if entry.remote is not None:
            load = partial(reach, entry.remote)
        else:
            choices = EngineChoices(
                exact=settings.exact, provider=settings.provider,
                requantize=None if settings.exact else settings.requantize or None,
                layer_stats=settings.layer_stats)
            load = partial(load_local, entry.model, choices, settings.num_ctx)
        job = LoadJob(load)
        job.progress.connect(self._on_progress)
        job.loaded.connect(self._on_loaded)
        job.failed.connect(self._on_failed)
        self.job, self.entry = job, entry
        self.started.emit(entry)
        self.runner.start(job)

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self.job = None
            self.cancelled.emit()

    def _current(self) -> bool:
        return self.job is not None and self.sender() is self.job

    def _on_progress(self, stage: str, fraction: float) -> None:
        if self._current():
            self.progress.emit(stage, fraction)

    def _on_loaded(self, model: LoadedModel) -> None:
        if self._current():
            self.job = None
            self.loaded.emit(model, self.entry)

    def _on_failed(self, message: str) -> None:
        if self._current():
            self.job = None
            self.failed.emit(message)
