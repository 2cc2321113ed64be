"""A message too long for the context is taken back: the error says what to do, the text
returns to the input to be shortened, and neither the view nor the history keeps it."""

from pathlib import Path

import pytest

from app.conversations.history import History
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.importer import import_gguf
from engine.store import Store
from tests.fixtures.synthetic_gguf import write_model
from tests.unit.app.chat.test_app_chat import TIMEOUT_MS, load, send

LONG = "lantern " * 400


@pytest.fixture
def tiny_store(tmp_path) -> Path:
    root = tmp_path / "models"
    root.mkdir()
    import_gguf(Store.open(root), write_model(tmp_path / "t.gguf", "qwen2"), "tiny")
    return root


def open_window(qtbot, tmp_path: Path, models: Path) -> MainWindow:
    settings = Settings(models_dir=str(models), num_ctx=512,
                        options={"temperature": 0.0, "num_predict": 4})
    window = MainWindow(settings, History(tmp_path / "h.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    return window


def test_an_over_long_first_message_returns_to_the_input(qtbot, tmp_path, tiny_store):
    window = open_window(qtbot, tmp_path, tiny_store)
    load(qtbot, window, "tiny:latest")
    with qtbot.waitSignal(window.controller.answerFailed, timeout=TIMEOUT_MS) as failed:
        send(window, LONG)
    qtbot.waitUntil(lambda: window.chat.input.editor.toPlainText() == LONG.strip())
    assert "num_ctx" in failed.args[0] and "Settings → Conversation" in failed.args[0]
    assert window.chat.view.messages == []
    assert window.history.conversations() == [] and window.controller.conversation_id is None
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        send(window, "short")
    assert [m.content for m in window.history.messages(window.controller.conversation_id)
            if m.role == "user"] == ["short"]


def test_an_over_long_follow_up_leaves_the_conversation_as_it_was(qtbot, tmp_path, tiny_store):
    window = open_window(qtbot, tmp_path, tiny_store)
    load(qtbot, window, "tiny:latest")
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        send(window, "first")
    conversation = window.controller.conversation_id
    with qtbot.waitSignal(window.controller.answerFailed, timeout=TIMEOUT_MS):
        send(window, LONG)
    assert [w.role for w in window.chat.view.messages] == ["user", "assistant"]
    assert window.chat.input.editor.toPlainText() == LONG.strip()
    assert window.controller.conversation_id == conversation
    assert len(window.history.messages(conversation)) == 2
    # the next turn is answered without the message taken back
    window.chat.input.editor.clear()
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        send(window, "second")
    assert [m.content for m in window.controller.session.messages if m.role == "user"] == \
        ["first", "second"]
