"""Chatting in the window: answers stream into the view and the debug panel, Stop works
mid-answer, and the history (including an answer cut off by quitting) survives a
restart. A tiny synthetic model covers the flow; the real 0.5B model checks the panel
against the engine's own TokenEvents."""

from pathlib import Path

import pytest

from app.conversations.history import History
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.importer import import_gguf
from engine.store import Store
from tests.fixtures.synthetic_gguf import write_model

TIMEOUT_MS = 60_000
REAL_NAME = "qwen2.5-coder:0.5b"


def open_window(qtbot, history_path: Path, models_dir: Path, **options) -> MainWindow:
    window = MainWindow(Settings(models_dir=str(models_dir), options=options),
                        History(history_path), auto_load=False)
    qtbot.addWidget(window)
    return window


def load(qtbot, window: MainWindow, name: str) -> None:
    qtbot.waitUntil(lambda: window.models.row_of(name) >= 0, timeout=TIMEOUT_MS)
    window.models_controller.load(window.models.entry(window.models.row_of(name)))
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=TIMEOUT_MS)


def send(window: MainWindow, text: str) -> None:
    window.chat.input.editor.setPlainText(text)
    window.chat.input.submit()


@pytest.fixture
def tiny_store(tmp_path) -> Path:
    root = tmp_path / "models"
    root.mkdir()
    import_gguf(Store.open(root), write_model(tmp_path / "t.gguf", "qwen2"), "tiny")
    return root


@pytest.fixture(scope="module")
def real_store(demo_05b, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("real") / "models"
    root.mkdir()
    import_gguf(Store.open(root), demo_05b, REAL_NAME)
    return root


def test_tiny_model_streams_saves_and_regenerates(qtbot, tmp_path, tiny_store):
    # seed 0 gives this random-weight model 8 tokens before the length limit
    window = open_window(qtbot, tmp_path / "h.sqlite3", tiny_store,
                         temperature=1.0, seed=0, num_predict=8)
    load(qtbot, window, "tiny:latest")
    tokens = []
    window.controller.token.connect(tokens.append)
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        send(window, "Hello")
    assert len(tokens) == 8 and done.args[0].done_reason == "length"
    user, answer = window.chat.view.messages
    assert (user.role, user.text, answer.role) == ("user", "Hello", "assistant")
    assert answer.text == done.args[0].text and len(answer.tokens) == 8
    assert window.panel.prompt.prompt_model.rowCount() == len(window.controller.session.last_prompt)
    [conversation] = window.history.conversations()
    stored = window.history.messages(conversation.id)
    assert [(m.role, m.content, m.complete) for m in stored] == [
        ("user", "Hello", True), ("assistant", answer.text, True)]

    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        answer.buttons["Regenerate"].click()
    assert len(window.chat.view.messages) == 2                # replaced, not added
    assert len(window.history.messages(conversation.id)) == 2


def test_edit_last_message_truncates_and_resends(qtbot, tmp_path, tiny_store):
    window = open_window(qtbot, tmp_path / "h.sqlite3", tiny_store,
                         temperature=1.0, seed=0, num_predict=4)
    load(qtbot, window, "tiny:latest")
    for text in ("one", "two"):
        with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
            send(window, text)
    last_user = window.chat.view.messages[2]
    last_user.buttons["Edit"].click()
    assert window.chat.input.editing and window.chat.input.editor.toPlainText() == "two"
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        send(window, "three")
    texts = [(w.role, w.text) for w in window.chat.view.messages]
    assert [t for t in texts if t[0] == "user"] == [("user", "one"), ("user", "three")]
    stored = window.history.messages(window.controller.conversation_id)
    assert [m.content for m in stored if m.role == "user"] == ["one", "three"]
    assert [m.content for m in window.controller.session.messages if m.role == "user"] == \
        ["one", "three"]


def test_real_model_streams_matches_the_engine_and_stops(qtbot, tmp_path, real_store):
    window = open_window(qtbot, tmp_path / "h.sqlite3", real_store,
                         temperature=0.0, num_predict=24)
    load(qtbot, window, REAL_NAME)
    tokens, lengths = [], []
    window.controller.token.connect(tokens.append)
    window.controller.token.connect(lambda _: lengths.append(len(window.controller.answer.text)))
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        send(window, "Write a haiku about lanterns.")
    assert len(tokens) > 5 and lengths == sorted(lengths) and lengths[-1] > lengths[0]
    assert window.chat.view.messages[-1].text == done.args[0].text != ""
    shown = [(r.id, r.logit, r.chosen) for r in window.panel.top_model.records]
    last = tokens[-1]
    assert shown == [(t.id, t.logit, t.id == last.id) for t in last.top[:5]]
    assert window.panel.top_model.rowCount() == 5

    # hovering a token (colour mode) shows that token's own candidates
    window.panel.color_toggle.setChecked(True)
    answer = window.chat.view.messages[-1]
    answer.tokenHovered.emit(answer, 2)
    assert [r.id for r in window.panel.top_model.records] == [t.id for t in tokens[2].top[:5]]

    # Stop mid-answer: the answer ends within a token or two and is kept as "stopped"
    window.controller.settings.options["num_predict"] = 400
    streamed = []
    window.controller.token.connect(streamed.append)
    send(window, "Count from 1 to 200, one number per line.")
    qtbot.waitUntil(lambda: len(streamed) >= 3, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(window.controller.answerDone, timeout=10_000) as stopped:
        window.chat.input.send_button.click()                 # the Stop button
    assert stopped.args[0].done_reason == "cancel"
    assert len(streamed) < 20
    assert window.chat.view.messages[-1].status.text() == "stopped"


def test_history_survives_restart_and_quitting_mid_answer(qtbot, tmp_path, real_store):
    history = tmp_path / "h.sqlite3"
    first = open_window(qtbot, history, real_store, temperature=0.0, num_predict=400)
    load(qtbot, first, REAL_NAME)
    tokens = []
    first.controller.token.connect(tokens.append)
    send(first, "List twenty fruits, one per line.")
    qtbot.waitUntil(lambda: len(tokens) >= 4, timeout=TIMEOUT_MS)
    first.close()                                             # quits mid-answer
    assert not first.controller.busy

    second = open_window(qtbot, history, real_store)
    assert second.conversations.rowCount() == 1
    second.open_conversation(second.conversations.conversations[0].id)
    user, answer = second.chat.view.messages
    assert user.text == "List twenty fruits, one per line."
    assert answer.text and answer.text.startswith(first.controller.answer.text[:10])
    assert answer.status.text() == "interrupted"
