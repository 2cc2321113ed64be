"""An answer the user does not give up is kept: switching conversation (or New chat) lets it
finish in the background, marked in the sidebar, while sending elsewhere asks the user to
wait or Stop it (one answer at a time); a model switch still stops it, its note shown whole.
A stopped, cut-off or interrupted answer offers Continue, which goes on in the same bubble
and history row. Regenerate keeps the earlier answer as a version (‹ 1/2 ›), and the version
shown is the one the conversation goes on from."""

from pathlib import Path

import pytest

from app.chat.page import DONE_NOTES
from app.conversations.history import History
from app.conversations.list_model import ConversationListModel
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.importer import import_gguf
from engine.store import Store
from tests.fixtures.old_history import write_first_release_history
from tests.fixtures.synthetic_gguf import TextSpec, write_model

TIMEOUT_MS = 60_000
NUM_CTX = 2048
MODEL_SWITCH_NOTE = "interrupted by the model switch"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("keeps") / "models"
    # slow enough per token that a few hundred of them outlast a switch of conversation
    spec = TextSpec(hidden=256, heads=4, kv_heads=2, layers=16, ffn=1024, context=NUM_CTX)
    gguf = write_model(root.parent / "slow.gguf", "qwen2", spec, seed=5)
    for name in ("slow", "slow2"):
        import_gguf(Store.open(root), gguf, name)
    return root


def loaded_window(qtbot, tmp_path: Path, store: Path) -> MainWindow:
    settings = Settings(models_dir=str(store), num_ctx=NUM_CTX,
                        options={"temperature": 0.0, "num_predict": 4})
    window = MainWindow(settings, History(tmp_path / "h.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    load(qtbot, window, "slow:latest")
    return window


def load(qtbot, window: MainWindow, name: str) -> None:
    qtbot.waitUntil(lambda: window.models.row_of(name) >= 0, timeout=TIMEOUT_MS)
    window.models_controller.load(window.models.entry(window.models.row_of(name)))
    qtbot.waitUntil(lambda: window.controller.model is not None
                    and window.controller.model_name == name, timeout=TIMEOUT_MS)


def send(window: MainWindow, text: str) -> None:
    window.chat.input.editor.setPlainText(text)
    window.chat.input.submit()


def answered(qtbot, window: MainWindow, text: str, num_predict: int = 4):
    window.controller.settings.options["num_predict"] = num_predict
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        send(window, text)
    return done.args[0]


def start_long_answer(qtbot, window: MainWindow, tokens: int = 1500) -> int:
    """A new chat whose answer is streaming (seconds of tokens to go)."""
    window.new_chat()
    window.controller.settings.options["num_predict"] = tokens
    send(window, "Count")
    qtbot.waitUntil(lambda: len(window.chat.view.messages[-1].tokens) >= 3, timeout=TIMEOUT_MS)
    return window.controller.conversation_id


def details(window: MainWindow, conversation_id: int) -> str:
    model = window.conversations
    return model.data(model.index(model.row_of(conversation_id)),
                      ConversationListModel.DetailsRole)


def test_an_answer_goes_on_in_the_background_and_one_runs_at_a_time(qtbot, tmp_path, store):
    window = loaded_window(qtbot, tmp_path, store)
    answered(qtbot, window, "Hello")
    first = window.controller.conversation_id
    counting = start_long_answer(qtbot, window)

    window.open_conversation(first)
    shown = [(w.role, w.text) for w in window.chat.view.messages]
    assert window.controller.answer.conversation == counting and not window.controller.busy
    assert "answering" in details(window, counting) and "answering" not in details(window, first)
    assert window.chat.input.send_button.text() == "Send"
    so_far = window.history.messages(counting)[-1].content
    qtbot.waitUntil(lambda: len(window.history.messages(counting)[-1].content) > len(so_far),
                    timeout=TIMEOUT_MS)                       # still saved as it grows

    # sending here while it runs asks the user to wait or stop it; the message stays
    said = []
    window.chat.message.connect(lambda _level, text: said.append(text))
    send(window, "Another question")
    assert said and "another chat" in said[-1] and "Stop" in said[-1]
    assert window.chat.input.editor.toPlainText() == "Another question"
    assert [(w.role, w.text) for w in window.chat.view.messages] == shown

    # back on it: its bubble streams on, and the answer is saved whole and complete
    window.open_conversation(counting)
    bubble = window.chat.view.messages[-1]
    assert window.chat.answer is bubble and window.controller.busy
    assert bubble.status.text() == "writing…" and window.chat.input.send_button.text() == "Stop"
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        pass
    stored = window.history.messages(counting)[-1]
    assert stored.complete and bubble.text == stored.content == done.args[0].text
    assert len(stored.content) > len(so_far)
    assert bubble.status.text() == DONE_NOTES.get(done.args[0].done_reason, "")
    assert "answering" not in details(window, counting)

    # New chat while it answers: the same
    other = start_long_answer(qtbot, window, tokens=200)
    window.new_chat()
    assert window.controller.answer.conversation == other and not window.chat.view.messages
    qtbot.waitUntil(lambda: window.controller.answer.conversation is None, timeout=TIMEOUT_MS)
    assert window.history.messages(other)[-1].complete and not window.chat.view.messages


def test_a_model_switch_stops_the_answer_and_says_so_whole(qtbot, tmp_path, store):
    window = loaded_window(qtbot, tmp_path, store)
    window.resize(1000, 700)
    window.show()
    qtbot.waitExposed(window)
    counting = start_long_answer(qtbot, window)
    load(qtbot, window, "slow2:latest")
    bubble = window.chat.view.messages[-1]
    assert bubble.status.text() == MODEL_SWITCH_NOTE
    qtbot.wait(50)
    metrics = bubble.status.fontMetrics()
    assert bubble.status.width() >= metrics.horizontalAdvance(MODEL_SWITCH_NOTE)  # not cut
    stored = window.history.messages(counting)[-1]
    assert not stored.complete and stored.content == bubble.text != ""
    assert bubble.buttons["Continue"].isVisibleTo(bubble)


def test_a_background_answer_is_stopped_by_a_model_switch(qtbot, tmp_path, store):
    window = loaded_window(qtbot, tmp_path, store)
    counting = start_long_answer(qtbot, window)
    window.new_chat()
    load(qtbot, window, "slow2:latest")
    assert window.controller.answer.conversation is None
    stored = window.history.messages(counting)[-1]
    assert not stored.complete and stored.content
    window.open_conversation(counting)
    bubble = window.chat.view.messages[-1]
    assert bubble.status.text() == "interrupted" and bubble.buttons["Continue"].isVisibleTo(bubble)


def test_continue_goes_on_in_the_same_bubble_and_row(qtbot, tmp_path, store):
    window = loaded_window(qtbot, tmp_path, store)
    first = answered(qtbot, window, "Hello")
    bubble = window.chat.view.messages[-1]
    assert first.done_reason == "length" and bubble.status.text() == "cut off at the length limit"
    assert bubble.buttons["Continue"].isVisibleTo(bubble)
    assert not window.chat.view.messages[0].buttons["Edit"].isHidden()

    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        bubble.buttons["Continue"].click()
    more = done.args[0]
    assert more.eval_count == 4 and window.chat.view.messages[-1] is bubble
    assert bubble.text == first.text + more.text and len(bubble.tokens) == 8
    rows = window.history.messages(window.controller.conversation_id)
    assert [m.role for m in rows] == ["user", "assistant"]
    assert rows[-1].content == bubble.text and len(rows[-1].logprobs) == 8
    # the model went on from the answer so far: its prompt ends with it
    assert more.prompt_eval_count < len(window.controller.session.last_prompt)
    assert window.controller.session.messages[-1].content == bubble.text

    # stopped, then reopened: still offered, and it ends complete
    window.controller.settings.options["num_predict"] = 300
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        bubble.buttons["Continue"].click()
        qtbot.waitUntil(lambda: len(bubble.tokens) >= 10, timeout=TIMEOUT_MS)
        window.chat.input.send_button.click()                  # Stop
    assert bubble.status.text() == "stopped" and bubble.buttons["Continue"].isVisibleTo(bubble)
    conversation = window.controller.conversation_id
    window.new_chat()
    window.open_conversation(conversation)
    bubble = window.chat.view.messages[-1]
    assert bubble.status.text() == "stopped" and bubble.buttons["Continue"].isVisibleTo(bubble)
    window.controller.settings.options["num_predict"] = 2
    stopped = bubble.text
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        bubble.buttons["Continue"].click()
    assert bubble.text == stopped + done.args[0].text
    stored = window.history.messages(conversation)[-1]
    assert stored.complete and stored.content == bubble.text

    # cut at the length limit, then reopened: still offered
    window.new_chat()
    window.open_conversation(conversation)
    bubble = window.chat.view.messages[-1]
    assert bubble.status.text() == "cut off at the length limit"
    assert bubble.buttons["Continue"].isVisibleTo(bubble)

    # a structured answer's format would start again: said, and nothing changes
    said = []
    window.chat.message.connect(lambda _level, text: said.append(text))
    window.controller.set_conversation_format("json")
    bubble.buttons["Continue"].click()
    assert "structured answer cannot be continued" in said[-1] and not window.controller.busy


def test_regenerate_keeps_every_version_and_goes_on_from_the_one_shown(qtbot, tmp_path,
                                                                      store):
    window = loaded_window(qtbot, tmp_path, store)
    first = answered(qtbot, window, "Hello", num_predict=3)
    conversation = window.controller.conversation_id
    window.controller.settings.options["num_predict"] = 6
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        window.chat.view.messages[-1].buttons["Regenerate"].click()
    second = done.args[0]
    bubble = window.chat.view.messages[-1]
    assert bubble.version_label.text() == "2/2" and bubble.version_label.isVisibleTo(bubble)
    assert bubble.previous.isEnabled() and not bubble.next.isEnabled()
    rows = window.history.messages(conversation)
    assert [m.role for m in rows] == ["user", "assistant"]
    assert (rows[-1].content, rows[-1].version, rows[-1].versions) == (second.text, 2, 2)

    bubble.previous.click()                                       # ‹
    assert bubble.text == first.text and bubble.version_label.text() == "1/2"
    assert window.history.messages(conversation)[-1].content == first.text
    answered(qtbot, window, "And then?", num_predict=2)           # builds on version 1
    assert [m.content for m in window.controller.session.messages[:2]] == ["Hello", first.text]

    # reopened, the versions are all there, each whole
    window.new_chat()
    window.open_conversation(conversation)
    qtbot.waitUntil(lambda: len(window.chat.view.messages) == 4, timeout=TIMEOUT_MS)
    older = window.chat.view.messages[1]
    assert older.version_label.text() == "1/2" and older.text == first.text
    older.next.click()
    assert older.text == second.text and older.version_label.text() == "2/2"


def test_a_failed_regenerate_gives_the_earlier_version_back(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    chat = history.create("t", "m").id
    history.add(chat, "user", "Hi")
    answer = history.add(chat, "assistant", "Hello!", model="m")
    history.keep_version(answer, "m2")
    assert (history.message(answer).content, history.message(answer).versions) == ("", 2)
    assert history.drop_shown_version(answer)
    again = history.message(answer)
    assert (again.content, again.version, again.versions, again.model) == ("Hello!", 1, 1, "m")
    assert not history.drop_shown_version(answer)
    history.close()


def test_undo_of_a_delete_puts_every_version_back(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    chat = history.create("t", "m").id
    history.add(chat, "user", "Hi")
    answer = history.add(chat, "assistant", "one", model="m")
    history.keep_version(answer, "m")
    history.update(answer, "two", True)
    history.restore(history.delete(chat))
    history.show_version(answer, 1)
    assert (history.message(answer).content, history.message(answer).versions) == ("one", 2)
    history.close()


def test_an_older_database_gets_versions_and_loses_nothing(tmp_path):
    path = write_first_release_history(tmp_path / "old.sqlite3")
    history = History(path)
    user, answer = history.messages(1)
    assert (answer.content, answer.version, answer.versions) == ("Hello!", 1, 1)
    history.keep_version(answer.id, "qwen:0.5b")
    history.update(answer.id, "Hi there!", True)
    history.show_version(answer.id, 1)
    assert [m.content for m in history.messages(1)] == ["Hi", "Hello!"]
    assert history.message(answer.id).versions == 2
    history.close()
