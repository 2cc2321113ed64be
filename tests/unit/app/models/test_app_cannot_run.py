"""The sidebar over a store holding models Lantern cannot run (an MLX model, a cloud model,
a GGUF of another architecture, an embedding model): each is listed, greyed out, with what
it is and why on its second line and what to do in its tooltip; choosing one never opens
a dialog or starts a load."""

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDialog, QMessageBox

from app.conversations.history import History
from app.models.list_model import ModelListModel, StoreScanJob
from app.settings.store import Settings
from app.window import MainWindow
from app.workers import JobRunner
from engine.store import Store
from engine.store.humanize import human_bytes
from tests.fixtures.stores import CANNOT_RUN, mixed_store

TIMEOUT_MS = 60_000
TOOLTIP_HINT = "(run it with Ollama; pick another model on the left to chat here)"


@pytest.fixture
def models(tmp_path) -> Path:
    mixed_store(tmp_path / "models", tmp_path / "scratch")
    return tmp_path / "models"


def test_each_is_listed_greyed_with_what_it_is_and_why(qtbot, models):
    model, runner = ModelListModel(), JobRunner()
    job = StoreScanJob(Store.open(models))
    job.listed.connect(model.set_entries)
    job.described.connect(model.update_entry)
    runner.start(job)
    qtbot.waitUntil(lambda: bool(model.entries) and all(e.checked for e in model.entries),
                    timeout=TIMEOUT_MS)
    rows = {model.index(r).data(): model.index(r) for r in range(model.rowCount())}
    assert set(rows) == {"tiny:latest", *CANNOT_RUN}
    assert rows["tiny:latest"].flags() & Qt.ItemIsEnabled
    for name, word in CANNOT_RUN.items():
        index = rows[name]
        assert not index.flags() & Qt.ItemIsEnabled
        line = index.data(ModelListModel.DetailsRole)
        assert word in line and "blobs" not in line and "sha256-" not in line
        assert index.data(Qt.ToolTipRole).endswith(TOOLTIP_HINT)
    mlx = rows["qwen3-mlx:8b"].data(ModelListModel.EntryRole)
    assert mlx.size > 0 and rows["qwen3-mlx:8b"].data(ModelListModel.DetailsRole).startswith(
        f"{human_bytes(mlx.size)} — an MLX model (qwen3, safetensors weights, mxfp8)")
    assert rows["gemma4:e2b"].data(ModelListModel.DetailsRole).startswith(
        "1B · gemma4 · Q4_K_M")                     # what the store says it is, then why


def open_dialogs() -> list[QDialog]:
    return [w for w in QApplication.topLevelWidgets()
            if isinstance(w, QDialog | QMessageBox) and w.isVisible()]


def test_choosing_one_opens_no_dialog_and_loads_nothing(qtbot, tmp_path, models):
    # the last model used is one Lantern cannot run: the one it can run loads instead
    window = MainWindow(Settings(models_dir=str(models), last_model="qwen3-mlx:8b"),
                        History(tmp_path / "h.sqlite3"))
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=TIMEOUT_MS)
    assert window.controller.model_name == "tiny:latest"
    qtbot.waitUntil(lambda: all(e.checked for e in window.models.entries), timeout=TIMEOUT_MS)
    view = window.sidebar.model_view
    for name in CANNOT_RUN:
        index = window.models.index(window.models.row_of(name))
        qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.visualRect(index).center())
        view.activated.emit(index)                  # Enter on it after Ctrl+K
        assert not window.models_controller.loader.loading
        assert window.controller.model_name == "tiny:latest"
        assert open_dialogs() == []
        assert window.banner.level != "error"
