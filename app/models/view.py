"""What the window shows of its models: the store listed (or the empty page when it holds
none), a GGUF offered for import, a load's progress and failure in the banner, and the
loaded model in the sidebar, the input box, the panel and the status bar. The models
controller does the work; this is its face in the window.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog, QInputDialog, QLabel, QMainWindow

from app.chat.conversation import MODEL_SWITCH_NOTE
from app.chat.empty_state import suggested_name
from app.models.list_model import ModelEntry
from engine.chat.backend import Capability
from engine.remote.session import RemoteModel
from engine.runtime.loaded_model import LoadedModel


class ModelsView(QObject):
    def __init__(self, window: QMainWindow) -> None:
        """``window``: app.window's MainWindow, whose parts this shows the models in (not
        imported: the window imports this)."""
        super().__init__(window)
        self.window = window
        self.controller = window.models_controller
        self.status_model = QLabel("no model loaded")
        self.status_provider = QLabel("")
        self._first_listing = True
        models = self.controller
        models.storeListed.connect(self._store_listed)
        models.remoteListed.connect(self._remote_listed)
        models.message.connect(window.banner.show_message)
        models.loading.connect(self._loading)
        models.loaded.connect(self._loaded)
        models.loader.progress.connect(self._load_progress)
        models.loader.failed.connect(self._load_failed)
        models.loader.cancelled.connect(window.banner.dismiss_progress)
        window.banner.cancelRequested.connect(self._cancel_load)
        window.sidebar.modelChosen.connect(models.load)
        window.empty.folderChosen.connect(self.set_models_dir)
        window.empty.importRequested.connect(self.import_gguf)
        window.empty.rescanRequested.connect(models.rescan)

    # -- the store -------------------------------------------------------------------------

    def _store_listed(self, ok: bool) -> None:
        window = self.window
        store = self.controller.store()
        window.empty.set_store(store.root, store.root.is_dir())
        entries = window.models.entries
        window.pages.setCurrentWidget(window.chat if entries else window.empty)
        if ok:
            window.comparer.refresh()               # a model added or removed may be B
        if self._first_listing:
            self._first_listing = False
            # nothing to look inside yet (unless a server's models are on their way)
            window.panel.setVisible(bool(entries or window.settings.connections))
        if ok:
            self._select_loaded()

    def _remote_listed(self) -> None:
        self._select_loaded()
        if not self._first_listing:
            window = self.window
            window.pages.setCurrentWidget(window.chat if window.models.entries else window.empty)

    def _select_loaded(self) -> None:
        if self.controller.entry is not None:
            self.window.sidebar.select_model(self.controller.entry.name)

    def set_models_dir(self, folder: str) -> None:
        self.window.save_settings(models_dir=folder)
        self.controller.rescan()

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self.window, "Ollama model store")
        if folder:
            self.set_models_dir(folder)

    def choose_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Import a GGUF model", "",
                                              "GGUF models (*.gguf)")
        if path:
            self.import_gguf(path)

    def import_gguf(self, path: str, name: str | None = None) -> None:
        """Copy a GGUF into the store as a model (asks for its name unless given)."""
        if name is None:
            name, ok = QInputDialog.getText(self.window, "Import a GGUF",
                                            f"Name for {Path(path).name} in the store:",
                                            text=suggested_name(path))
            if not ok or not name.strip():
                return
        self.window.banner.show_progress(f"Importing {Path(path).name} as {name.strip()}…",
                                         None, cancellable=False)
        self.controller.import_gguf(path, name.strip())

    # -- the load --------------------------------------------------------------------------

    def _loading(self, entry: ModelEntry) -> None:
        window = self.window
        window.controller.answer.interrupt(MODEL_SWITCH_NOTE)   # never two models at work
        window.controller.give_up_check()
        window.sidebar.select_model(entry.name)
        window.banner.show_progress(f"Loading {entry.name}…", 0.0)
        self.status_model.setText(f"loading {entry.name}…")
        window.chat.input.set_loading(entry.name)
        window.chat.refresh_header()            # the empty chat says what is loading

    def _load_progress(self, stage: str, fraction: float) -> None:
        entry = self.controller.loader.entry
        name = entry.name if entry else ""
        self.window.banner.show_progress(f"Loading {name}: {stage}…", fraction)

    def _loaded(self, model: LoadedModel | RemoteModel, entry: ModelEntry) -> None:
        window = self.window
        where = f"the server {entry.host}" if entry.host else "this computer"
        window.controller.set_model(model, Capability.IMAGES in model.capabilities, where)
        window.chat.input.set_video(Capability.VIDEO in model.capabilities)
        window.panel.set_capabilities(model.capabilities, model.name, where)
        window.comparer.model_changed()
        window.crosscheck_action.setEnabled(not entry.host)
        window.banner.dismiss_progress()
        window.chat.input.set_ready(True)
        window.refresh_conversations()
        if not window.sidebar.search.hasFocus():     # never take the keyboard from a search
            window.focus_input()
        self.status_model.setText(entry.name + ("  · vision" if entry.vision else ""))
        self._show_where(model, entry)
        if window.settings.last_model != entry.name:
            window.save_settings(last_model=entry.name)

    def _show_where(self, model: LoadedModel | RemoteModel, entry: ModelEntry) -> None:
        if entry.remote is not None:
            kind = entry.remote.connection.kind
            self.status_provider.setText(f"remote · {entry.host} ({kind})")
            self.status_provider.setToolTip(f"{model.name} runs on {entry.host}; the panel "
                                            "shows the server's log-probabilities")
            return
        weights = model.requantization
        self.status_provider.setText(
            f"{model.provider} · {'exact' if model.exact else 'fast'} · "
            + ("" if weights is None else f"{weights.spec} re-quantized, NOT exact · ")
            + f"loaded in {model.load_duration / 1e9:.1f} s")
        self.status_provider.setToolTip(model.weights)

    def _load_failed(self, message: str) -> None:
        self.window.banner.show_message("error", message)
        self._load_stopped("did not load (the banner above says why)")

    def _cancel_load(self) -> None:
        self.controller.loader.cancel()
        self._load_stopped("was not loaded (the load was cancelled)")

    def _load_stopped(self, why: str) -> None:
        self.window.chat.input.load_stopped(why)
        self.window.chat.refresh_header()
        entry = self.controller.entry
        self.status_model.setText(entry.name if entry else "no model loaded")
