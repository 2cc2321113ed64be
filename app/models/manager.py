"""Changing the store from the app: get (pull), copy and remove a model. Each asks first
(removal says how much space it frees: blobs other models share are not counted), does
its work in a job off the GUI thread, then reports ``storeChanged`` so the list refreshes.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QInputDialog, QMessageBox, QWidget

from app.models.get_dialog import GetModelDialog
from app.models.list_model import ModelEntry
from app.workers import CallJob, JobRunner
from engine.store import Store
from engine.store.copy_remove import Removal, copy_model, plan_removal, remove_model
from engine.store.humanize import human_bytes
from engine.store.pull import PullResult


def removal_question(removal: Removal) -> str:
    name = removal.name.display
    if removal.freed:
        space = f"This frees {human_bytes(removal.freed)}."
    else:
        space = "This frees no space: other models use all of its files."
    shared = removal.shared
    kept = (f" {shared} file{'s' if shared != 1 else ''} shared with other models "
            f"stay{'s' if shared == 1 else ''}." if shared and removal.freed else "")
    return f"Remove {name} from the store?\n\n{space}{kept}"


def copy_suggestion(name: str) -> str:
    model, _, tag = name.partition(":")
    return f"{model}-copy:{tag or 'latest'}"


class ModelManager(QObject):
    storeChanged = Signal()
    message = Signal(str, str)           # kind ("info" / "error"), one line

    def __init__(self, runner: JobRunner, store: Callable[[], Store], parent: QWidget) -> None:
        super().__init__(parent)
        self.runner, self.store, self.window = runner, store, parent
        self.jobs: dict[CallJob, Callable[[object], None]] = {}
        self.dialog: GetModelDialog | None = None

    def get_model(self) -> GetModelDialog:
        """Open the "Get a model" dialog (the one already open, if any)."""
        if self.dialog is not None and self.dialog.isVisible():
            self.dialog.raise_()
            return self.dialog
        if self.dialog is not None:
            self.dialog.deleteLater()
        self.dialog = GetModelDialog(self.runner, self.store(), self.window)
        self.dialog.pulled.connect(self._pulled)
        self.dialog.open()
        return self.dialog

    def _pulled(self, result: PullResult) -> None:
        self.message.emit("info", f"{result.name.display} is ready "
                                  f"({human_bytes(result.size)}).")
        self.storeChanged.emit()

    def remove(self, entry: ModelEntry) -> None:
        store = self.store()
        self._run(lambda: plan_removal(store, entry.name),
                  lambda plan: self._confirm_removal(store, plan))

    def _confirm_removal(self, store: Store, plan: Removal) -> None:
        answer = QMessageBox.question(self.window, "Remove a model", removal_question(plan),
                                      QMessageBox.Yes | QMessageBox.Cancel, QMessageBox.Cancel)
        if answer != QMessageBox.Yes:
            return
        self._run(lambda: remove_model(store, plan.name), self._removed)

    def _removed(self, removal: Removal) -> None:
        self.message.emit("info", f"Removed {removal.name.display}; freed "
                                  f"{human_bytes(removal.freed)}.")
        self.storeChanged.emit()

    def copy(self, entry: ModelEntry) -> None:
        name, ok = QInputDialog.getText(
            self.window, "Copy a model",
            f"Name of the copy of {entry.name}\n(it shares its files: no extra space):",
            text=copy_suggestion(entry.name))
        if not ok or not name.strip():
            return
        store = self.store()
        self._run(lambda: copy_model(store, entry.name, name.strip()),
                  lambda target: self._copied(entry.name, target.display))

    def _copied(self, source: str, target: str) -> None:
        self.message.emit("info", f"Copied {source} to {target}.")
        self.storeChanged.emit()

    def _run(self, call: Callable[[], object], done: Callable[[object], None]) -> None:
        """Run ``call`` off the GUI thread; ``done(result)`` runs back on the GUI thread."""
        job = CallJob(call)
        self.jobs[job] = done
        job.result.connect(self._job_result)         # bound slots: queued to this thread
        job.failed.connect(self._job_failed)
        self.runner.start(job)

    def _job_result(self, value: object) -> None:
        done = self.jobs.pop(self.sender(), None)
        if done is not None:
            done(value)

    def _job_failed(self, text: str) -> None:
        self.jobs.pop(self.sender(), None)
        self.message.emit("error", text)
