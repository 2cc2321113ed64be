"""Loads the chosen model on a worker thread (building its ONNX session takes seconds),
one load at a time: choosing another model cancels the load in progress. A remote model
loads nothing: its server is asked whether it still has it (engine.launch.ready_model
decides where a model runs, for the window as for `lantern run`).
"""

from __future__ import annotations

from functools import partial

from PySide6.QtCore import QObject, Signal

from app.models.list_model import ModelEntry
from app.settings.store import Settings
from app.workers import JobRunner, LoadJob
from engine.launch import EngineChoices, Where, ready_model
from engine.runtime.loaded_model import LoadedModel


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
        choices = EngineChoices(
            exact=settings.exact, provider=settings.provider,
            requantize=None if settings.exact else settings.requantize or None,
            layer_stats=settings.layer_stats)
        model, where = entry.model, Where()
        if entry.remote is not None:
            model, where = entry.remote.name, Where(server=entry.remote.connection)
        job = LoadJob(partial(ready_model, model, where, choices,
                              {"num_ctx": settings.num_ctx}))
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
