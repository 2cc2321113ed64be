"""A message sent while the model loads (the first start preselects one) waits in the box,
saying so, and is sent when the model is ready; a load that fails or is cancelled leaves
it in the box, unsent, with why. Nothing typed is lost."""

from PySide6.QtCore import Qt

from app.models import loader as loader_module
from engine.errors import CorruptModel
from tests.unit.app.chat.test_app_chat import TIMEOUT_MS, open_window, send, tiny_store  # noqa: F401 (fixture)

NAME = "tiny:latest"


def start_loading(qtbot, window) -> None:
    qtbot.waitUntil(lambda: window.models.row_of(NAME) >= 0, timeout=TIMEOUT_MS)
    window.models_controller.load(window.models.entry(window.models.row_of(NAME)))
    assert window.models_controller.loader.loading and window.controller.model is None


def test_enter_during_a_load_sends_it_when_the_model_is_ready(qtbot, tmp_path, tiny_store):  # noqa: F811
    window = open_window(qtbot, tmp_path / "h.sqlite3", tiny_store, num_predict=2)
    start_loading(qtbot, window)
    box = window.chat.input
    qtbot.keyClicks(box.editor, "Hello")
    qtbot.keyClick(box.editor, Qt.Key.Key_Return)
    assert box.waiting and box.editor.toPlainText() == "Hello"
    assert "sent when it is ready" in box.wait_label.text() and not box.wait_label.isHidden()
    assert window.chat.view.messages == []
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        pass                                      # the load ends, then the answer
    user, answer = window.chat.view.messages
    assert (user.role, user.text, answer.role) == ("user", "Hello", "assistant")
    assert box.editor.toPlainText() == "" and box.wait_label.isHidden() and not box.waiting


def test_a_failed_load_keeps_the_waiting_message_unsent(qtbot, tmp_path, tiny_store, monkeypatch):  # noqa: F811
    def broken(*_, **__):
        raise CorruptModel("t.gguf: the file ends inside its tensor data")

    monkeypatch.setattr(loader_module, "ready_model", broken)
    window = open_window(qtbot, tmp_path / "h.sqlite3", tiny_store)
    start_loading(qtbot, window)
    box = window.chat.input
    send(window, "Hello")
    qtbot.waitUntil(lambda: not window.models_controller.loader.loading, timeout=TIMEOUT_MS)
    assert not box.waiting and box.editor.toPlainText() == "Hello"
    assert box.wait_label.text().startswith(f"Not sent: {NAME} did not load")
    assert window.chat.view.messages == [] and window.history.conversations() == []


def test_a_cancelled_load_keeps_the_waiting_message_unsent(qtbot, tmp_path, tiny_store):  # noqa: F811
    window = open_window(qtbot, tmp_path / "h.sqlite3", tiny_store)
    start_loading(qtbot, window)
    job = window.models_controller.loader.job
    box = window.chat.input
    send(window, "Hello")
    window.banner.cancelRequested.emit()
    assert not box.waiting and box.editor.toPlainText() == "Hello"
    assert "the load was cancelled" in box.wait_label.text()
    qtbot.waitUntil(job.ended.is_set, timeout=TIMEOUT_MS)
    qtbot.wait(50)                                # the late signals of the given-up load
    assert window.controller.model is None and window.chat.view.messages == []
    assert box.editor.toPlainText() == "Hello"


def test_esc_keeps_a_waiting_message_in_the_box(qtbot, tmp_path, tiny_store):  # noqa: F811
    window = open_window(qtbot, tmp_path / "h.sqlite3", tiny_store, num_predict=2)
    start_loading(qtbot, window)
    box = window.chat.input
    send(window, "Hello")
    window.escape()
    assert not box.waiting and box.wait_label.isHidden()
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=TIMEOUT_MS)
    assert window.chat.view.messages == [] and box.editor.toPlainText() == "Hello"


def test_the_empty_chat_says_what_is_loading(qtbot, tmp_path, tiny_store):  # noqa: F811
    # it said "Pick a model on the left" while the preselected model loaded
    window = open_window(qtbot, tmp_path / "h.sqlite3", tiny_store, num_predict=2)
    start_loading(qtbot, window)
    assert f"Loading {NAME}" in window.chat.view.hint.text()
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=TIMEOUT_MS)
    assert f"Ask {NAME}" in window.chat.view.hint.text()
