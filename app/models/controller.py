"""The models the window offers and the one it runs: the store's listing (the models of
Settings → Connections join it after the local ones), a GGUF imported into the store, and
the load of the model chosen, by the user or for the user on start. The window shows what
it reports; the conversation gets the loaded model from it (``loaded``).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.conversations.history import History
from app.models.list_model import ModelEntry, ModelListModel, RemoteScanJob, StoreScanJob
from app.models.loader import ModelLoader
from app.models.start_choice import start_model
from app.settings.connections import connection_of
from app.settings.store import Settings
from app.workers import CallJob, JobRunner
from engine.catalog.importer import import_gguf
from engine.errors import LanternError
from engine.remote.session import RemoteModel
from engine.runtime.loader import LoadedModel
from engine.store import Store


class ModelsController(QObject):
    storeListed = Signal(bool)          # the store's scan ended (False: it failed)
    remoteListed = Signal()             # the connections' models joined the list
    loading = Signal(object)            # ModelEntry whose load starts (the one before goes)
    loaded = Signal(object, object)     # LoadedModel or RemoteModel, its ModelEntry
    message = Signal(str, str)          # level ("info" / "error"), one line for the banner

    def __init__(self, models: ModelListModel, history: History,
                 settings: Callable[[], Settings], runner: JobRunner, auto_load: bool,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.models, self.history, self.settings = models, history, settings
        self.runner, self.auto_load = runner, auto_load
        self.loader = ModelLoader(runner, self)
        self.loader.loaded.connect(self._loaded)
        self._start_note = ""      # why the model loaded on start was chosen for the user
        self.scan_job: StoreScanJob | None = None
        self.remote_job: RemoteScanJob | None = None
        self.local_entries: list[ModelEntry] = []
        self.remote_entries: list[ModelEntry] = []     # models of Settings → Connections
        self.import_job: CallJob | None = None
        self.entry: ModelEntry | None = None          # the loaded model's entry

    # -- the store -------------------------------------------------------------------------

    def store(self) -> Store:
        return Store.open(self.settings().models_dir)

    def rescan(self) -> None:
        self.rescan_remote()
        if self.scan_job is not None:
            self.scan_job.cancel()
        job = StoreScanJob(self.store())
        job.listed.connect(self._listed)
        job.described.connect(self._described)
        job.failed.connect(self._scan_failed)
        self.scan_job = job
        self.runner.start(job)

    def rescan_remote(self) -> None:
        """Ask every connection for its models (they join the list after the local ones)."""
        if self.remote_job is not None:
            self.remote_job.cancel()
        connections = []
        for record in self.settings().connections:
            try:
                connections.append(connection_of(record))
            except LanternError as error:
                self.message.emit("error", f"a saved connection is unusable: {error}")
        self.remote_entries = []
        if not connections:
            self._show_entries()
            return
        job = RemoteScanJob(connections)
        job.listed.connect(self._remote_listed)
        self.remote_job = job
        self.runner.start(job)

    def _remote_listed(self, entries: list[ModelEntry]) -> None:
        if self.sender() is not self.remote_job:
            return
        self.remote_job = None
        self.remote_entries = entries
        self._show_entries()
        for entry in entries:
            if (self.auto_load and entry.runnable and entry.name == self.settings().last_model
                    and self.entry is None and not self.loader.loading):
                self.load(entry)

    def _show_entries(self) -> None:
        """Local models first (the store scan describes them by row), then remote ones."""
        self.models.set_entries(self.local_entries + self.remote_entries)
        self.remoteListed.emit()

    def _listed(self, entries: list[ModelEntry]) -> None:
        self.local_entries = list(entries)
        self.models.set_entries(self.local_entries + self.remote_entries)
        self.storeListed.emit(True)

    def _described(self, row: int, entry: ModelEntry) -> None:
        if 0 <= row < len(self.local_entries):
            self.local_entries[row] = entry
        self.models.update_entry(row, entry)
        if not self.auto_load or self.entry is not None or self.loader.loading:
            return
        name, note = start_model(self.models.entries, self.settings().last_model,
                                 self.history.conversations())
        chosen = next((e for e in self.local_entries if e.name == name), None)
        if chosen is not None and chosen.checked and chosen.runnable:
            self._start_note = note
            self.load(chosen)

    def _scan_failed(self, message: str) -> None:
        self.local_entries = []
        self.models.set_entries(self.remote_entries)
        self.storeListed.emit(False)

    def import_gguf(self, path: str, name: str) -> None:
        """Copy a GGUF into the store as the model ``name``; the store is listed again."""
        store = self.store()
        self.import_job = job = CallJob(lambda: import_gguf(store, path, name))
        job.result.connect(self._imported)
        job.failed.connect(self._import_failed)
        self.runner.start(job)

    def _imported(self, model) -> None:
        self.import_job = None
        self.message.emit("info", f"Imported {model.name.display} into the store.")
        self.rescan()

    def _import_failed(self, message: str) -> None:
        self.import_job = None
        self.message.emit("error", message)

    # -- loading ---------------------------------------------------------------------------

    def load(self, entry: ModelEntry) -> None:
        """Load ``entry`` unless it is the model loaded; ``loading`` comes first, so that
        the model at work stops before the next one loads (never two at once)."""
        if self.entry is not None and entry.name == self.entry.name and \
                not self.loader.loading:
            return
        self.loading.emit(entry)
        self.loader.load(entry, self.settings())

    def reload(self) -> None:
        """The loaded model again (settings it was built with changed)."""
        if self.entry is not None:
            entry, self.entry = self.entry, None
            self.load(entry)

    def _loaded(self, model: LoadedModel | RemoteModel, entry: ModelEntry) -> None:
        self.entry = entry
        self.loaded.emit(model, entry)
        if self._start_note:
            self.message.emit("info", self._start_note)
            self._start_note = ""
