"""The desktop app without a real model: the model list over a synthetic store (broken
models shown disabled with their reason), the empty state, GGUF import, the input box's
images (drop, paste, remove, unreadable) and the notice for a model that cannot see."""

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, Qt, QUrl
from PySide6.QtGui import QColor, QImage

from app.chat.input_box import InputBox
from app.conversations.history import History
from app.models.list_model import ModelListModel, StoreScanJob
from app.settings.store import Settings
from app.window import MainWindow
from app.workers import JobRunner
from engine.catalog.importer import import_gguf
from engine.store import Store
from tests.fixtures.stores import FAKE_GGUF, StoreBuilder
from tests.fixtures.synthetic_gguf import write_model

TIMEOUT_MS = 30_000


@pytest.fixture
def synthetic_store(tmp_path) -> Path:
    """tiny-qwen2 (runs), tiny-vision (qwen25vl), a damaged GGUF and a missing blob."""
    root = tmp_path / "models"
    builder = StoreBuilder(root)
    store = Store.open(root)
    import_gguf(store, write_model(tmp_path / "text.gguf", "qwen2"), "tiny-qwen2:test")
    import_gguf(store, write_model(tmp_path / "vl.gguf", "qwen25vl"), "tiny-vision:test")
    builder.add("broken:7b", FAKE_GGUF)
    manifest = builder.add("half-deleted", FAKE_GGUF + b"\0")
    digest = json.loads(manifest.read_text())["layers"][0]["digest"].split(":")[1]
    (root / "blobs" / f"sha256-{digest}").unlink()
    return root


def image_file(path: Path, colour: str = "red") -> str:
    image = QImage(60, 40, QImage.Format_RGB32)
    image.fill(QColor(colour))
    assert image.save(str(path))
    return str(path)


def open_window(qtbot, tmp_path, models_dir: Path) -> MainWindow:
    window = MainWindow(Settings(models_dir=str(models_dir)),
                        History(tmp_path / "history.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    return window


def wait_described(qtbot, model: ModelListModel) -> None:
    qtbot.waitUntil(lambda: bool(model.entries) and all(e.checked for e in model.entries),
                    timeout=TIMEOUT_MS)


def test_model_list_describes_models_and_disables_broken_ones(qtbot, synthetic_store):
    model, runner = ModelListModel(), JobRunner()
    job = StoreScanJob(Store.open(synthetic_store))
    job.listed.connect(model.set_entries)
    job.described.connect(model.update_entry)
    runner.start(job)
    wait_described(qtbot, model)

    rows = {model.index(r).data(): model.index(r) for r in range(model.rowCount())}
    assert set(rows) == {"tiny-qwen2:test", "tiny-vision:test", "broken:7b", "half-deleted:latest"}
    text, vision = rows["tiny-qwen2:test"], rows["tiny-vision:test"]
    assert text.flags() & Qt.ItemIsEnabled and vision.flags() & Qt.ItemIsEnabled
    assert "qwen2" in text.data(ModelListModel.DetailsRole)
    assert not text.data(ModelListModel.VisionRole)
    assert vision.data(ModelListModel.VisionRole)
    for broken in ("broken:7b", "half-deleted:latest"):
        index = rows[broken]
        assert not index.flags() & Qt.ItemIsEnabled
        assert index.data(ModelListModel.ProblemRole)            # second line: the reason
        assert str(synthetic_store) not in index.data(ModelListModel.ProblemRole)  # brief
    assert "not in" in rows["half-deleted:latest"].data(Qt.ToolTipRole)  # whole message


def test_empty_state_for_missing_and_empty_store(qtbot, tmp_path):
    missing = tmp_path / "nowhere" / "models"
    window = open_window(qtbot, tmp_path, missing)
    qtbot.waitUntil(lambda: window.pages.currentWidget() is window.empty, timeout=TIMEOUT_MS)
    assert "No model store found" in window.empty.headline.text()
    assert str(missing) in window.empty.store_path.text()
    assert "ollama pull" in " ".join(label.text() for label in window.empty.findChildren(
        type(window.empty.headline)))

    empty = tmp_path / "empty"
    (empty / "manifests").mkdir(parents=True)
    window.models_view.set_models_dir(str(empty))
    qtbot.waitUntil(lambda: "No models in the store yet" in window.empty.headline.text(),
                    timeout=TIMEOUT_MS)
    assert Settings.load().models_dir == str(empty)          # remembered


def test_dropping_a_gguf_imports_it_into_the_store(qtbot, tmp_path):
    root = tmp_path / "models"
    (root / "manifests").mkdir(parents=True)
    window = open_window(qtbot, tmp_path, root)
    qtbot.waitUntil(lambda: window.pages.currentWidget() is window.empty, timeout=TIMEOUT_MS)
    window.models_view.import_gguf(str(write_model(tmp_path / "mine.gguf", "qwen2")), name="mine")
    qtbot.waitUntil(lambda: window.models.row_of("mine:latest") >= 0, timeout=TIMEOUT_MS)
    assert window.pages.currentWidget() is window.chat
    assert Store.open(root).get("mine").model_path.is_file()


def test_input_box_images_by_drop_paste_and_remove(qtbot, tmp_path):
    box = InputBox()
    qtbot.addWidget(box)
    dropped = QMimeData()
    dropped.setUrls([QUrl.fromLocalFile(image_file(tmp_path / "a.png"))])
    with qtbot.waitSignal(box.imagesAttached, timeout=TIMEOUT_MS):
        box.editor.insertFromMimeData(dropped)
    pasted = QMimeData()
    bitmap = QImage(30, 30, QImage.Format_RGB32)
    bitmap.fill(QColor("blue"))
    pasted.setImageData(bitmap)
    box.editor.insertFromMimeData(pasted)
    assert len(box.images) == 2 and len(box.thumbnails()) == 2
    assert Path(box.images[1]).is_file()                      # pasted image kept on disk
    assert box.editor.toPlainText() == ""                     # not inserted as text

    box.thumbnails()[0].findChild(type(box.attach_button)).click()
    assert box.images == [box.images[0]] and Path(box.images[0]).name.startswith("pasted-")
    assert len(box.thumbnails()) == 1

    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image at all")
    with qtbot.waitSignal(box.imageRejected, timeout=TIMEOUT_MS) as rejected:
        box.attach([str(bad)])
    assert str(bad) in rejected.args[0]
    assert len(box.images) == 1


def test_enter_submits_and_shift_enter_breaks_the_line(qtbot):
    box = InputBox()
    qtbot.addWidget(box)
    box.editor.setPlainText("first")
    box.editor.moveCursor(box.editor.textCursor().MoveOperation.End)
    qtbot.keyClick(box.editor, Qt.Key_Return, Qt.ShiftModifier)
    assert box.editor.toPlainText() == "first\n"
    with qtbot.waitSignal(box.submitted, timeout=TIMEOUT_MS) as sent:
        qtbot.keyClick(box.editor, Qt.Key_Return)
    assert sent.args[0].text == "first" and not sent.args[0].edit


def test_text_model_gets_a_notice_for_images_and_keeps_them(qtbot, tmp_path, synthetic_store):
    window = open_window(qtbot, tmp_path, synthetic_store)
    wait_described(qtbot, window.models)
    entry = window.models.entry(window.models.row_of("tiny-qwen2:test"))
    window.models_controller.load(entry)
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=TIMEOUT_MS)

    window.chat.input.attach([image_file(tmp_path / "cat.png")])
    assert window.banner.isVisibleTo(window) and window.banner.level == "warning"
    assert "cannot see images" in window.banner.text.text()
    window.chat.input.remove_image(window.chat.input.images[0])
    assert not window.banner.isVisibleTo(window)     # the warning goes with the image
    window.chat.input.attach([image_file(tmp_path / "cat.png")])
    window.banner.dismiss()

    window.chat.input.editor.setPlainText("What is this?")
    window.chat.input.submit()
    assert window.banner.level == "warning" and "tiny-qwen2:test" in window.banner.text.text()
    assert window.chat.view.messages == []                    # nothing sent...
    assert len(window.chat.input.images) == 1                 # ...and nothing dropped
    assert window.chat.input.editor.toPlainText() == "What is this?"


def test_settings_dialog_stores_only_changed_options_and_checks_them(qtbot):
    from app.settings.dialog import SettingsDialog
    from engine.runtime.providers import available_providers

    dialog = SettingsDialog(Settings(options={"top_k": 20}), params_layer={"temperature": 0.2},
                            system_layer="Be brief.")
    qtbot.addWidget(dialog)
    edits = dialog.option_edits
    assert edits["temperature"].placeholderText() == "0.2"   # the model's params layer
    assert edits["top_p"].placeholderText() == "0.9"          # Ollama's default
    assert edits["top_k"].text() == "20"
    assert dialog.system_edit.placeholderText() == "Be brief."
    assert [dialog.provider.itemData(i) for i in range(dialog.provider.count())] == \
        available_providers() and "cpu" in available_providers()

    edits["seed"].setText("7")
    edits["top_k"].clear()
    dialog.num_ctx.setValue(8192)
    result = dialog.result_settings()
    assert result.options == {"seed": 7} and result.num_ctx == 8192

    edits["top_p"].setText("1.5")
    dialog.accept()
    assert dialog.error.isVisibleTo(dialog) and "top_p" in dialog.error.text()
    assert dialog.result() == 0                               # stays open


def test_settings_dialog_offers_requantization_only_outside_exact_mode(qtbot):
    from app.settings.dialog import SettingsDialog

    dialog = SettingsDialog(Settings(requantize="q4/128"), params_layer={}, system_layer="")
    qtbot.addWidget(dialog)
    combo = dialog.requantize
    assert [combo.itemData(i) for i in range(combo.count())] == ["", "q4", "q4/64", "q4/128"]
    assert combo.currentData() == "q4/128" and "NOT exact" in combo.currentText()
    assert dialog.result_settings().requantize == "q4/128"
    dialog.exact.setChecked(True)               # exact mode runs the GGUF's own weights
    assert not combo.isEnabled() and dialog.result_settings().requantize == ""
    dialog.exact.setChecked(False)
    combo.setCurrentIndex(0)
    assert combo.isEnabled() and dialog.result_settings().requantize == ""


def test_jobs_hand_the_gil_back_to_the_window_often(qtbot, monkeypatch):
    """A job in Python code keeps the GUI thread waiting at most GIL_SWITCH_S per turn."""
    import sys

    from app.workers import GIL_SWITCH_S

    monkeypatch.setattr(sys, "getswitchinterval", lambda: 0.005)   # CPython's default
    shortened: list[float] = []
    monkeypatch.setattr(sys, "setswitchinterval", shortened.append)
    JobRunner()
    assert shortened == [GIL_SWITCH_S] and GIL_SWITCH_S < 0.005
