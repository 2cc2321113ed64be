"""A remote model in the window, served by the loopback stand-in for Ollama's API
(tests/fixtures/fake_servers.py: Ollama's request/response shapes, not a real Ollama):
it is listed beside the local models with its host, chats like a local one (stream,
panel of the server's log-probabilities, stop, regenerate, history), the views that need
local weights say why they are unavailable, and a cut stream keeps its partial answer.
"""

import threading

import pytest

from app.conversations.history import History
from app.settings.connections import ConnectionsDialog
from app.settings.store import Settings
from app.window import MainWindow
from engine.remote.session import RemoteModel
from tests.fixtures.fake_servers import FakeOllama

TIMEOUT_MS = 20_000


@pytest.fixture
def ollama():
    with FakeOllama() as fake:
        yield fake


@pytest.fixture
def window(qtbot, tmp_path, ollama):
    (tmp_path / "models").mkdir()
    settings = Settings(models_dir=str(tmp_path / "models"), options={"temperature": 0.0},
                        connections=[{"url": ollama.url, "kind": "auto", "api_key": ""}])
    window = MainWindow(settings, History(tmp_path / "h.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    name = f"tiny:latest @ {ollama.url[len('http://'):]}"
    qtbot.waitUntil(lambda: window.models.row_of(name) >= 0, timeout=TIMEOUT_MS)
    window.models_controller.load(window.models.entry(window.models.row_of(name)))
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=TIMEOUT_MS)
    return window


def send(qtbot, window, text: str, signal: str = "answerDone"):
    with qtbot.waitSignal(getattr(window.controller, signal), timeout=TIMEOUT_MS) as caught:
        window.chat.input.editor.setPlainText(text)
        window.chat.input.submit()
    return caught.args[0]


def cell(model, row: int, column: int) -> str:
    return model.data(model.index(row, column))


def test_remote_model_is_listed_with_its_host_and_chats(qtbot, window, ollama):
    host = ollama.url[len("http://"):]
    entry = window.models_controller.entry
    assert isinstance(window.controller.model, RemoteModel)
    assert entry.details == f"on {host} · 494M · qwen2 · Q4_K_M"
    assert window.models_view.status_provider.text() == f"remote · {host} (ollama)"
    done = send(qtbot, window, "Hello?")
    assert done.text == "Hello, world!" and done.eval_count == 4
    [user, answer] = window.chat.view.messages
    assert answer.text == "Hello, world!" and len(answer.tokens) == 4
    # the panel: the server's top candidates for the latest token, no invented logits
    top = window.panel.top_model
    assert top.rowCount() == 5 and ollama.requests[-1][2]["top_logprobs"] == 5
    assert [cell(top, r, 0) for r in range(2)] == ["!", "alt0"]
    assert {cell(top, r, 1) for r in range(5)} == {"—"}
    assert {cell(top, r, 2) for r in range(5)} == {"—"}
    assert cell(top, 0, 3) == "99.00%"
    assert "entropy —" in window.panel.entropy_label.text()
    # no sampler reasons and no entropy from a server: said, not drawn empty
    assert window.panel.reasons_table.isHidden()
    assert "only log-probabilities are known" in window.panel.reasons_label.text()
    assert [s.name for s in window.panel.reply_chart.series] == ["p"]
    assert "entropy" not in window.panel.reply_chart.title
    # views that need the weights are disabled and say why
    assert [window.panel.tabs.isTabEnabled(i) for i in range(7)] == [True] + [False] * 6
    assert [b.isEnabled() for b in window.panel.page_buttons.buttons()] == [True] + [False] * 7
    assert window.panel.page_buttons.buttons()[6].toolTip() == \
        window.panel.tabs.tabToolTip(6) != ""                   # why it is not, on the button
    assert window.panel.compare.candidates == []       # no server model is compared
    assert not window.panel.unavailable.isHidden()
    assert f"It runs on the server {host}" in window.panel.unavailable.text()
    window._check()
    assert "Not available for tiny:latest" in window.panel.reference.verdict.text()
    # history and regenerate
    [conversation] = window.history.conversations()
    assert [(m.role, m.content, m.complete) for m in window.history.messages(
        conversation.id)] == [("user", "Hello?", True), ("assistant", "Hello, world!", True)]
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        answer.buttons["Regenerate"].click()
    assert [m["content"] for m in ollama.requests[-1][2]["messages"]] == ["Hello?"]
    assert len(window.history.messages(conversation.id)) == 2


def test_stop_closes_the_request_and_keeps_the_answer(qtbot, window, ollama):
    ollama.mode = "slow"
    with qtbot.waitSignal(window.controller.token, timeout=TIMEOUT_MS):
        window.chat.input.editor.setPlainText("Hello?")
        window.chat.input.submit()
    with qtbot.waitSignal(window.controller.answerDone, timeout=2000) as done:
        window.controller.answer.stop()
    assert done.args[0].done_reason == "cancel"
    [conversation] = window.history.conversations()
    answer = window.history.messages(conversation.id)[-1]
    assert answer.content.startswith("Hello") and not answer.complete
    # Continue is offered, and says why a server's answer cannot go on
    said = []
    window.chat.message.connect(lambda _level, text: said.append(text))
    bubble = window.chat.view.messages[-1]
    bubble.buttons["Continue"].click()
    assert "Continue needs a model on this computer" in said[-1] and "Regenerate" in said[-1]
    assert not window.controller.busy and bubble.text == answer.content


def test_cut_stream_is_a_message_and_the_partial_answer_stays(qtbot, window, ollama):
    ollama.mode = "cut"
    message = send(qtbot, window, "Hello?", "answerFailed")
    assert "cut off after 2 token(s)" in message and "marked incomplete" in message
    [conversation] = window.history.conversations()
    answer = window.history.messages(conversation.id)[-1]
    assert (answer.content, answer.complete) == ("Hello,", False)
    ollama.mode = "ok"                               # the conversation goes on
    assert send(qtbot, window, "Again").text == "Hello, world!"
    assert [m["content"] for m in ollama.requests[-1][2]["messages"]] == [
        "Hello?", "Hello,", "Again"]


def test_unreachable_server_is_listed_with_the_reason(qtbot, tmp_path):
    from tests.unit.remote.test_remote_clients import closed_port

    (tmp_path / "models").mkdir()
    url = f"http://127.0.0.1:{closed_port()}"
    window = MainWindow(Settings(models_dir=str(tmp_path / "models"),
                                 connections=[{"url": url, "kind": "auto", "api_key": ""}]),
                        History(tmp_path / "h.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.models.rowCount() == 1, timeout=TIMEOUT_MS)
    entry = window.models.entry(0)
    assert not entry.runnable and "connection refused" in entry.problem


def test_connections_dialog_asks_before_plain_http(qtbot, tmp_path, monkeypatch):
    from app.workers import JobRunner

    dialog = ConnectionsDialog([], JobRunner())
    qtbot.addWidget(dialog)
    asked = []
    monkeypatch.setattr(dialog, "confirm_plain_http",
                        lambda warning: asked.append(warning) or False)
    dialog.url.setText("http://gpu.example:8000")
    dialog.add()
    assert dialog.records == [] and "unencrypted" in asked[0]
    monkeypatch.setattr(dialog, "confirm_plain_http", lambda warning: True)
    dialog.add()
    dialog.url.setText("https://secure.example/v1")
    dialog.api_key.setText("k-123")
    dialog.add()
    assert dialog.records == [
        {"url": "http://gpu.example:8000", "kind": "auto", "api_key": ""},
        {"url": "https://secure.example/v1", "kind": "auto", "api_key": "k-123"}]
    assert "k-123" not in dialog.list.item(1).text()      # masked: "API key set"


def test_connections_test_button_lists_the_models(qtbot, ollama):
    from app.workers import JobRunner

    dialog = ConnectionsDialog([], JobRunner())
    qtbot.addWidget(dialog)
    said_on = []                      # the verdict is widget work: the GUI thread's alone
    say = dialog._say
    dialog._say = lambda text, ok: (said_on.append(threading.current_thread()), say(text, ok))
    dialog.url.setText(ollama.url)
    dialog.test()
    qtbot.waitUntil(lambda: "model(s)" in dialog.status.text(), timeout=TIMEOUT_MS)
    assert "answers as Ollama (native API): 1 model(s): tiny:latest" in dialog.status.text()
    dialog.url.setText("http://127.0.0.1:9")         # nothing listens there: a failure
    dialog.test()
    qtbot.waitUntil(lambda: dialog.status.property("ok") == "no", timeout=TIMEOUT_MS)
    assert set(said_on) == {threading.main_thread()}


def test_a_schema_and_a_document_go_to_the_server(qtbot, window, ollama, tmp_path):
    """Structured output and documents through a remote engine: the conversation's schema
    is the request's `format` (Ollama enforces it), the document is in the message with an
    estimated count (no tokenizer here), and the history keeps its name and text."""
    import json

    from engine.chat.documents import read_document, split

    schema = {"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]}},
              "required": ["mood"]}
    window.controller.set_conversation_format(json.dumps(schema))
    notes = tmp_path / "notes.md"
    notes.write_text("# Decisions\n\nShip on Friday.\n")
    window.chat.input.attach([str(notes)])
    [chip] = window.chat.input.documents.chips()
    assert chip.label.text().startswith("notes.md · ≈")       # estimated: said so
    send(qtbot, window, "What was decided?")
    body = ollama.requests[-1][2]
    assert body["format"] == schema
    assert split(body["messages"][-1]["content"]) == ([read_document(notes)],
                                                      "What was decided?")
    stored = window.history.messages(window.controller.conversation_id)[0]
    assert stored.content == body["messages"][-1]["content"]
    window.controller.set_conversation_format("json")
    send(qtbot, window, "Again")
    assert ollama.requests[-1][2]["format"] == "json"
