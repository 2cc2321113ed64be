"""The window as a daily driver: the start model is chosen and loaded by itself, the input
has focus, the title names model and conversation, an empty chat says what to do; the
keyboard shortcuts; a thinking answer streams into its section and folds; search,
rename, pin, delete + Undo, export/import round trip; a conversation's own system prompt
and sampling reach the engine and show in its header."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from app.conversations.history import History
from app.settings.store import Settings
from app.window import MainWindow
from app.workers import BATCH_S
from engine.catalog.importer import import_gguf
from engine.chat.events import DoneEvent, TokenEvent
from engine.store import Store
from tests.fixtures.synthetic_gguf import TextSpec, write_model

TIMEOUT_MS = 60_000


@pytest.fixture
def one_model(tmp_path) -> Path:
    root = tmp_path / "models"
    import_gguf(Store.open(root), write_model(tmp_path / "t.gguf", "qwen2", TextSpec(vocab=400)),
                "tiny")
    return root


@pytest.fixture
def two_models(tmp_path, one_model) -> Path:
    import_gguf(Store.open(one_model), write_model(tmp_path / "u.gguf", "qwen2",
                                                   TextSpec(vocab=400), seed=2), "other")
    return one_model


def start(qtbot, tmp_path, models_dir: Path, **settings) -> MainWindow:
    """The window as `lantern` opens it (auto-loading), shown and active."""
    window = MainWindow(Settings(models_dir=str(models_dir), **settings),
                        History(tmp_path / "history.sqlite3"))
    qtbot.addWidget(window)
    window.show()
    window.activateWindow()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=TIMEOUT_MS)
    return window


def send(qtbot, window: MainWindow, text: str) -> DoneEvent:
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        window.chat.input.editor.setPlainText(text)
        window.chat.input.submit()
    return done.args[0]


def test_first_run_loads_the_only_model_focuses_the_input_and_says_what_to_do(
        qtbot, tmp_path, one_model):
    window = start(qtbot, tmp_path, one_model)
    assert window.models_controller.entry.name == "tiny:latest"
    assert window.sidebar.model_view.currentIndex().row() == window.models.row_of("tiny:latest")
    qtbot.waitUntil(lambda: window.chat.input.editor.hasFocus())
    assert window.windowTitle() == "New chat — tiny:latest — Lantern"
    assert window.chat.view.hint.isVisible()
    assert "Ask tiny:latest anything" in window.chat.view.hint.text()
    assert window.settings.last_model == "tiny:latest"


def test_every_run_loads_the_last_used_model(qtbot, tmp_path, two_models):
    window = start(qtbot, tmp_path, two_models, last_model="other:latest")
    assert window.models_controller.entry.name == "other:latest"


def press(qtbot, window: MainWindow, key, modifiers=Qt.ControlModifier) -> None:
    """A key pressed where the keyboard focus is, as a user presses it."""
    qtbot.keyClick(QApplication.focusWidget() or window, key, modifiers)


def test_keyboard_shortcuts(qtbot, tmp_path, one_model):
    window = start(qtbot, tmp_path, one_model, options={"num_predict": 3, "seed": 1})
    done = send(qtbot, window, "Hello")
    assert window.windowTitle() == "Hello — tiny:latest — Lantern"

    QGuiApplication.clipboard().clear()
    press(qtbot, window, Qt.Key_C, Qt.ControlModifier | Qt.ShiftModifier)
    assert QGuiApplication.clipboard().text() == done.text

    press(qtbot, window, Qt.Key_K)
    assert window.sidebar.model_view.hasFocus()
    press(qtbot, window, Qt.Key_L)
    assert window.chat.input.editor.hasFocus()
    press(qtbot, window, Qt.Key_F)
    assert window.sidebar.search.hasFocus()

    press(qtbot, window, Qt.Key_N)
    assert window.controller.conversation_id is None and not window.chat.view.messages
    assert window.windowTitle() == "New chat — tiny:latest — Lantern"
    assert window.chat.input.editor.hasFocus()

    listed = [a.shortcut().toString() for a in window.shortcut_actions.values()]
    assert {"Ctrl+N", "Ctrl+L", "Ctrl+K", "Esc", "Ctrl+Shift+C", "F1"} <= set(listed)
    help_menu = next(m for m in window.menuBar().actions() if m.text() == "&Help").menu()
    assert "Keyboard shortcuts" in [a.text() for a in help_menu.actions()]


def test_escape_stops_the_answer(qtbot, tmp_path, one_model):
    # greedy, this model never stops by itself (checked: 300 tokens and counting); Escape is
    # pressed as the first token is shown, long before 4096 tokens fill the context
    window = start(qtbot, tmp_path, one_model, speculate="off",
                   options={"num_predict": -1, "temperature": 0, "num_ctx": 4096})
    shown = []

    def escape_once(event) -> None:
        shown.append(event)
        if len(shown) == 1:
            qtbot.keyClick(window.chat.input.editor, Qt.Key_Escape)

    window.controller.token.connect(escape_once)
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        window.chat.input.editor.setPlainText("Hello")
        window.chat.input.submit()
    assert done.args[0].done_reason == "cancel"
    assert done.args[0].eval_count < 4000


THINKING_REPLY = ["<think>", "\n", "Count", " the", " r", "s", ".", "\n", "</think>", "\n\n",
                  "There", " are", " 3", "."]


@pytest.fixture
def scripted_reply(monkeypatch):
    """The decode loop's raw events replaced by a thinking model's reply (each token 0.1 s
    of engine time, and apart long enough to reach the window one by one, not batched):
    everything after it (the engine's splitter, the job, the controller, the view) runs as
    in the app."""
    def run(self, prompt, options, **_):
        for index, piece in enumerate(THINKING_REPLY):
            time.sleep(BATCH_S * 1.5)
            yield TokenEvent(index, 1000 + index, piece, piece, 1.0, -0.5, 0.1, (),
                             100_000_000)
        yield DoneEvent("stop", "".join(THINKING_REPLY), "", len(prompt), 1, 14, 1, 0, 2)
    monkeypatch.setattr("engine.runtime.generate.Generator.run", run)


def test_thinking_streams_into_its_section_and_folds_when_the_answer_starts(
        qtbot, tmp_path, one_model, scripted_reply):
    window = start(qtbot, tmp_path, one_model)
    seen, titles = [], []

    def look(event: TokenEvent) -> None:      # runs after the page handled the token
        section = window.chat.answer.thinking
        seen.append((event.thinking, not section.isHidden(), section.folded,
                     window.chat.answer.text))
        window.panel.flush()                 # what the panel shows with the next frame
        titles.append(window.panel.token_title.text())
    window.controller.token.connect(look)
    panel_tokens = []
    window.controller.token.connect(panel_tokens.append)
    done = send(qtbot, window, "How many r in strawberry?")

    assert (done.text, done.thinking) == ("There are 3.", "Count the rs.\n")
    while_thinking = [s for s in seen if s[0]]
    assert all(visible and not folded and text == "" for _, visible, folded, text
               in while_thinking[1:])
    assert seen[-1][1:3] == (True, True)                      # folded once answering
    answer = window.chat.view.messages[-1]
    assert answer.text == "There are 3."
    assert answer.thinking.toggle.text() == "Thought for 0.9 s"    # 9 thinking tokens
    answer.thinking.toggle.click()
    assert not answer.thinking.folded and not answer.thinking.body.isHidden()
    assert "Count the rs." in answer.thinking.body.text()
    assert len(panel_tokens) == len(THINKING_REPLY)            # the panel saw every token
    assert titles[2].endswith("(id 1002) · thinking") and titles[-1].endswith("(id 1013)")

    stored = window.history.messages(window.controller.conversation_id)[-1]
    assert (stored.content, stored.thinking, stored.thinking_ms) == \
        ("There are 3.", "Count the rs.\n", 900)
    assert [e["thinking"] for e in stored.logprobs[:2]] == [True, True]
    conversation = window.controller.conversation_id
    window.new_chat()
    window.open_conversation(conversation)                     # from history: folded
    restored = window.chat.view.messages[-1].thinking
    assert not restored.isHidden() and restored.folded and "Count" in restored.body.text()


def test_thinking_off_reaches_the_template(qtbot, tmp_path, one_model):
    window = start(qtbot, tmp_path, one_model, think=False,
                   options={"num_predict": 2})
    send(qtbot, window, "Hello")
    assert window.controller.session.think is False


def test_search_rename_pin_delete_and_undo(qtbot, tmp_path, one_model):
    window = start(qtbot, tmp_path, one_model, options={"num_predict": 2, "seed": 3})
    send(qtbot, window, "Tell me about lighthouses")
    lighthouse = window.controller.conversation_id
    window.new_chat()
    send(qtbot, window, "A recipe for soup")
    soup = window.controller.conversation_id

    window.sidebar.search.setText("lighthouse")
    assert [c.id for c in window.conversations.conversations] == [lighthouse]
    window.sidebar.search.setText("")
    assert len(window.conversations.conversations) == 2

    window.actions.rename(lighthouse, "Beacons")
    window.actions.set_pinned(lighthouse, True)
    assert [(c.id, c.title) for c in window.conversations.conversations][0] == \
        (lighthouse, "Beacons")
    assert window.windowTitle().startswith("A recipe for soup — ")

    window.sidebar.conversationDeleteRequested.emit(soup)
    assert [c.id for c in window.conversations.conversations] == [lighthouse]
    assert window.controller.conversation_id is None           # it was open: a new chat
    assert not window.chat.view.messages
    assert window.banner.isVisible() and window.banner.action.text() == "Undo"
    window.banner.action.click()
    assert [c.id for c in window.conversations.conversations] == [lighthouse, soup]
    assert [m.role for m in window.history.messages(soup)] == ["user", "assistant"]


def test_export_and_import_round_trip(qtbot, tmp_path, one_model):
    window = start(qtbot, tmp_path, one_model, options={"num_predict": 3, "seed": 3})
    done = send(qtbot, window, "Hello")
    original = window.controller.conversation_id
    window.actions.export(original, "json", str(tmp_path / "chat"))
    window.actions.export(original, "md", str(tmp_path / "chat.md"))
    data = json.loads((tmp_path / "chat.json").read_text())
    assert data["messages"][1]["content"] == done.text
    assert len(data["messages"][1]["logprobs"]) == done.eval_count
    assert "## You\n\nHello" in (tmp_path / "chat.md").read_text()

    imported = window.actions.import_file(str(tmp_path / "chat.json"))
    assert imported != original
    window.actions.export(imported, "json", str(tmp_path / "again.json"))
    again = json.loads((tmp_path / "again.json").read_text())
    for d in (data, again):
        d.pop("created"), d.pop("updated")
    assert again == data
    window.open_conversation(imported)
    assert [w.text for w in window.chat.view.messages] == ["Hello", done.text]

    (tmp_path / "bad.json").write_text("{}")
    assert window.actions.import_file(str(tmp_path / "bad.json")) is None
    assert "not a Lantern conversation export" in window.banner.text.text()


def test_a_conversations_own_system_prompt_and_sampling(qtbot, tmp_path, one_model):
    window = start(qtbot, tmp_path, one_model, options={"num_predict": 2})
    window.controller.set_conversation_settings("Answer briefly.", {"temperature": 0.0})
    assert "system: “Answer briefly.” · temperature 0.0" in window.chat.header.details.text()
    send(qtbot, window, "Hello")
    session = window.controller.session
    assert session.system == "Answer briefly." and session.options.temperature == 0.0
    stored = window.history.conversation(window.controller.conversation_id)
    assert (stored.system, stored.options) == ("Answer briefly.", {"temperature": 0.0})
    window.new_chat()                                          # a new chat starts clean
    assert "default system prompt and sampling" in window.chat.header.details.text()


def test_ctrl_k_then_arrows_and_enter_load_another_model(qtbot, tmp_path, two_models):
    window = start(qtbot, tmp_path, two_models, last_model="tiny:latest")
    press(qtbot, window, Qt.Key_K)
    other = window.models.row_of("other:latest")
    arrow = Qt.Key_Down if other > window.models.row_of("tiny:latest") else Qt.Key_Up
    press(qtbot, window, arrow, Qt.NoModifier)
    press(qtbot, window, Qt.Key_Return, Qt.NoModifier)
    qtbot.waitUntil(lambda: window.models_controller.entry is not None
                    and window.models_controller.entry.name == "other:latest", timeout=TIMEOUT_MS)
    assert window.windowTitle() == "New chat — other:latest — Lantern"
    qtbot.waitUntil(lambda: window.chat.input.editor.hasFocus())


def test_the_conversation_settings_dialog_keeps_what_was_typed_and_checks_it(qtbot):
    from app.conversations.settings_dialog import ConversationSettingsDialog
    from engine.chat.options import Options

    dialog = ConversationSettingsDialog("Soup", "", {"seed": 7}, Options.resolve({}), "")
    qtbot.addWidget(dialog)
    assert dialog.option_edits["seed"].text() == "7"
    assert dialog.option_edits["temperature"].placeholderText() == "0.8"
    dialog.system_edit.setPlainText("  Answer in French.  ")
    dialog.option_edits["temperature"].setText("0.3")
    assert (dialog.system(), dialog.options()) == ("Answer in French.",
                                                   {"temperature": 0.3, "seed": 7})
    dialog.option_edits["top_k"].setText("many")
    dialog.accept()
    assert dialog.result() != dialog.DialogCode.Accepted
    assert "top_k must be a whole number" in dialog.error.text()
