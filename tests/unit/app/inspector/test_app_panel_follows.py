"""The debug panel follows the conversation on screen: after a switch, a new chat or an
import the Token tab shows the saved answer's tokens and every other tab is empty with a
reason (nothing of the previous conversation stays), the
reference check runs on a reopened conversation, and a verdict or its error goes with the
next answer."""

from pathlib import Path

import pytest

from app.conversations.transfer import export, import_json
from app.inspector.inside_page import PICK_A_POSITION
from app.inspector.opinion_page import IDLE
from app.inspector.prompt_page import EMPTY as PROMPT_EMPTY
from app.settings.store import Settings
from engine.catalog.importer import import_gguf
from engine.store import Store
from tests.fixtures.synthetic_gguf import write_model
from tests.unit.app.inspector.test_app_check import TIMEOUT_MS, loaded_window, send


@pytest.fixture
def tiny_store(tmp_path) -> Path:
    root = tmp_path / "models"
    # seed 3: this random model answers "Hello" with tokens (not a stop token at once)
    import_gguf(Store.open(root), write_model(tmp_path / "t.gguf", "qwen2", seed=3), "tiny")
    return root


def assert_saved_answer_shown(window) -> None:
    """A reopened chat: the Token tab shows its latest answer's saved tokens, the reply
    colours by them; every other tab is empty with its reason."""
    answer = window.chat.view.messages[-1]
    stored = window.history.messages(window.controller.conversation_id)[-1]
    assert answer.role == "assistant" and len(answer.tokens) == len(stored.logprobs) > 0
    assert "".join(t.text for t in answer.tokens) == answer.text
    panel = window.panel
    assert len(panel.reply) == len(answer.tokens) and panel.top_model.rowCount() > 0
    assert panel.token_title.text().startswith("<b>Latest token</b>")
    assert_tabs_empty(window)


def assert_panel_empty(window) -> None:
    panel = window.panel
    assert panel.top_model.rowCount() == 0 and panel.reply == []
    assert panel.token_title.text().startswith("Send a message")
    assert_tabs_empty(window)


def assert_tabs_empty(window) -> None:
    panel = window.panel
    prompt = panel.prompt
    assert prompt.prompt_model.rowCount() == 0 and prompt.prompt_label.text() == PROMPT_EMPTY
    assert panel.layers.stats_model.rowCount() == 0
    reference = panel.reference
    assert reference.verdict.text() == "" and reference.check_model.rowCount() == 0
    assert panel.reference.pair_model.rowCount() == 0
    assert panel.inside.title.text() == PICK_A_POSITION and panel.inside.inspection is None
    assert panel.opinion.pairs.rowCount() == 0
    assert panel.opinion.status.text() in (IDLE, "") or not panel.opinion.button.isEnabled()


def check(qtbot, window) -> None:
    with qtbot.waitSignal(window.checks.checkDone, timeout=TIMEOUT_MS):
        window.panel.reference.check_button.click()
    reference = window.panel.reference
    assert reference.verdict.text() and reference.check_model.rowCount() > 0


def test_tabs_follow_switches_new_chats_and_imports(qtbot, tmp_path, tiny_store):
    window = loaded_window(qtbot, Settings(models_dir=str(tiny_store),
                                           options={"temperature": 0.0, "num_predict": 4}),
                           tmp_path)
    send(qtbot, window, "Hello")
    first = window.controller.conversation_id
    assert window.panel.prompt.prompt_model.rowCount() > 0 and window.panel.top_model.rowCount() > 0
    check(qtbot, window)
    window.panel.inside.title.setText("Position 7 (clicked)")

    assert "tok/s" in window.status_speed.text()
    window.new_chat()
    assert_panel_empty(window)
    assert window.status_speed.text() == ""              # the speed was the other chat's

    send(qtbot, window, "Another")
    second = window.controller.conversation_id
    window.open_conversation(first)
    assert_saved_answer_shown(window)
    assert window.status_speed.text() == ""
    # the reopened conversation can be checked at once (no "send a message first")
    check(qtbot, window)
    assert "could not run" not in window.panel.reference.verdict.text()

    # a verdict (or its red error) is about the last answer: the next one clears it
    window.panel.reference.show_check_failed("the check went wrong")
    send(qtbot, window, "More")
    assert window.panel.reference.verdict.text() == ""

    window.open_conversation(second)
    assert_saved_answer_shown(window)

    path = tmp_path / "chat.json"
    export(window.history, first, path)
    imported = import_json(window.history, path)       # what File → Import does
    window.conversations.refresh()
    window.open_conversation(imported.id)
    assert_saved_answer_shown(window)
    check(qtbot, window)


def test_saved_tokens_of_older_histories_and_edited_answers():
    from app.chat.saved_tokens import saved_tokens
    from app.conversations.history import StoredMessage

    def answer(content: str, rows: list[dict]) -> StoredMessage:
        return StoredMessage(1, "assistant", content, (), True, "", 0, tuple(rows))

    older = [{"token": "Hi", "logprob": -0.1, "top": [["Hi", -0.1], ["Yo", -2.5]]},
             {"token": " there", "logprob": -0.7, "top": [[" there", -0.7]]}]
    events = saved_tokens(answer("Hi there", older))
    assert [e.text for e in events] == ["Hi", " there"]
    assert [t.piece for t in events[0].top] == ["Hi", "Yo"] and events[0].logit is None
    assert saved_tokens(answer("Hi you", older)) == []        # edited since: no colours
    thinking = [{"token": "hm", "text": "", "logprob": -1.0, "top": [], "thinking": True},
                {"token": "ok", "text": "ok", "logprob": -0.2, "top": []}]
    assert [e.thinking for e in saved_tokens(answer("ok", thinking))] == [True, False]
