"""The app's "Get a model" dialog against a real registry (the model appears in the
picker; cancel; a clear error), and Remove / Copy from the model list's context menu."""

import time

import pytest
from PySide6.QtWidgets import QInputDialog, QMessageBox

from app.conversations.history import History
from app.models.get_dialog import GetModelDialog
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.importer import import_gguf
from engine.store import Store, pull, writer
from tests.fixtures.registry import store_tree
from tests.fixtures.stores import StoreBuilder
from tests.fixtures.synthetic_gguf import write_model

TIMEOUT_MS = 30_000
KB = 1024


@pytest.fixture(scope="module")
def published(registry, tmp_path_factory) -> str:
    scratch = tmp_path_factory.mktemp("publish-app")
    store = Store.open(scratch / "models")
    import_gguf(store, write_model(scratch / "app.gguf", "qwen2", seed=7), "tiny",
                template="{{ .Prompt }}")
    registry.push_model(store, "tiny", "library/app-tiny", "v1")
    return f"{registry.host}/library/app-tiny:v1"


@pytest.fixture
def window(qtbot, tmp_path):
    models = tmp_path / "models"
    (models / "manifests").mkdir(parents=True)
    (models / "blobs").mkdir()
    window = MainWindow(Settings(models_dir=str(models)), History(tmp_path / "h.sqlite3"),
                        auto_load=False)
    qtbot.addWidget(window)
    window.show()
    yield window
    window.close()


def _names(window: MainWindow) -> list[str]:
    return [entry.name for entry in window.models.entries]


def _get_dialog(window: MainWindow) -> GetModelDialog:
    window.sidebar.get_model.click()
    dialog = window.manager.dialog
    assert dialog is not None and dialog.isVisible()
    window.sidebar.get_model.click()                  # a second click: the same dialog
    assert window.manager.dialog is dialog
    return dialog


def test_get_a_model_appears_in_the_picker(qtbot, window, published):
    dialog = _get_dialog(window)
    dialog.name.setText(published)
    dialog.insecure.setChecked(True)
    sizes = []
    dialog.bar.valueChanged.connect(sizes.append)
    with qtbot.waitSignal(dialog.pulled, timeout=TIMEOUT_MS) as signal:
        dialog.download.click()
    result = signal.args[0]
    assert sizes[-1] == 1000 and dialog.size.text() == "Size: 460 KB"
    assert dialog.status.text().startswith(f"{published} is in the store")
    assert not dialog.isVisible()
    qtbot.waitUntil(lambda: published in _names(window), timeout=TIMEOUT_MS)
    assert result.size == window.models_controller.store().get(published).size
    assert "is ready" in window.banner.text.text()


def test_get_a_model_cancel_keeps_only_a_resumable_download(qtbot, window, published,
                                                           monkeypatch):
    original = writer.ResumableBlob.write

    def slow_write(self, byte_range, data):
        time.sleep(0.02)
        original(self, byte_range, data)

    monkeypatch.setattr(writer.ResumableBlob, "write", slow_write)
    monkeypatch.setattr(pull, "READ_SIZE", 8 * KB)
    dialog = _get_dialog(window)
    dialog.name.setText(published)
    dialog.insecure.setChecked(True)
    dialog.download.click()
    assert dialog.cancel_button.text() == "Cancel"
    qtbot.waitUntil(lambda: dialog.bar.value() > 0, timeout=TIMEOUT_MS)
    dialog.cancel_button.click()
    qtbot.waitUntil(lambda: dialog.error.isVisible(), timeout=TIMEOUT_MS)
    assert "cancelled" in dialog.error.text() and "pull again to resume" in dialog.error.text()
    assert dialog.cancel_button.text() == "Close" and dialog.download.isEnabled()
    tree = store_tree(window.models_controller.store().root)
    assert tree and all(k.startswith(f"blobs/{writer.PARTIAL_PREFIX}") for k in tree)


def test_get_a_model_shows_one_clear_line_for_a_wrong_name(qtbot, window, registry):
    dialog = _get_dialog(window)
    dialog.name.setText(f"{registry.host}/library/no-such-model")
    dialog.insecure.setChecked(True)
    dialog.download.click()
    qtbot.waitUntil(lambda: dialog.error.isVisible(), timeout=TIMEOUT_MS)
    assert "not found in registry" in dialog.error.text() and "\n" not in dialog.error.text()
    assert not dialog.bar.isVisible() and store_tree(window.models_controller.store().root) == {}
    dialog.cancel_button.click()
    assert not dialog.isVisible()
    menu_action = next(a for a in window.menuBar().actions()[0].menu().actions()
                       if a.text() == "Get a model…")
    menu_action.trigger()                              # File -> Get a model… opens a fresh one
    assert window.manager.dialog is not dialog and window.manager.dialog.isVisible()
    window.manager.dialog.reject()
    qtbot.waitUntil(lambda: window.pages.currentWidget() is window.empty, timeout=TIMEOUT_MS)
    window.empty.get_model.click()                     # the empty store offers it too
    assert window.manager.dialog.isVisible()


def test_remove_and_copy_from_the_context_menu(qtbot, window, monkeypatch):
    builder = StoreBuilder(window.models_controller.store().root)
    builder.add("a:1", model=b"GGUF shared", template="A")
    builder.add("b:1", model=b"GGUF shared", template="B")
    window.models_controller.rescan()
    qtbot.waitUntil(lambda: _names(window) == ["a:1", "b:1"], timeout=TIMEOUT_MS)
    entry = window.models.entry(0)
    menu = window.sidebar.model_menu(entry)
    assert [a.text() for a in menu.actions()] == ["Copy…", "Remove…"]

    monkeypatch.setattr(QInputDialog, "getText", lambda *args, **kw: ("a-copy:2", True))
    menu.actions()[0].trigger()
    qtbot.waitUntil(lambda: "a-copy:2" in _names(window), timeout=TIMEOUT_MS)

    asked = []

    def answer(parent, title, text, *rest):
        asked.append(text)
        return QMessageBox.Yes

    monkeypatch.setattr(QMessageBox, "question", answer)
    window.sidebar.model_menu(window.models.entry(window.models.row_of("a:1"))) \
        .actions()[1].trigger()
    qtbot.waitUntil(lambda: "a:1" not in _names(window), timeout=TIMEOUT_MS)
    assert asked == ["Remove a:1 from the store?\n\n"
                     "This frees no space: other models use all of its files."]
    template_b = len("B")
    window.sidebar.model_menu(window.models.entry(window.models.row_of("b:1"))) \
        .actions()[1].trigger()
    qtbot.waitUntil(lambda: "b:1" not in _names(window), timeout=TIMEOUT_MS)
    assert asked[1] == (f"Remove b:1 from the store?\n\nThis frees {template_b} B. "
                        "2 files shared with other models stay.")
    assert "Removed b:1" in window.banner.text.text()
