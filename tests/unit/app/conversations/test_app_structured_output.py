"""Structured output in the window: the per-chat schema editor validates as it is typed
and refuses to save an invalid schema; the choice is stored with the conversation (and
its export); the answer then parses and validates, and the panel's reasons say what the
schema removed."""

from __future__ import annotations

import json
import sqlite3

import jsonschema
import pytest

from app.conversations.history import History
from app.conversations.settings_dialog import ConversationSettingsDialog
from app.conversations.transfer import import_json, to_json
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.importer import import_gguf
from engine.chat.options import Options
from engine.store import Store
from tests.unit.app.test_app_daily import one_model, send, start  # noqa: F401 (fixture)

SCHEMA = {"type": "object", "properties": {
    "mood": {"enum": ["happy", "sad"]}, "score": {"type": "integer", "minimum": 0,
                                                  "maximum": 9}},
    "required": ["mood", "score"], "additionalProperties": False}


def dialog_for(qtbot, answer_format: str = "") -> ConversationSettingsDialog:
    dialog = ConversationSettingsDialog("Soup", "", {}, Options.resolve({}), "",
                                        answer_format=answer_format)
    qtbot.addWidget(dialog)
    return dialog


def test_the_schema_editor_checks_as_it_is_typed_and_refuses_an_invalid_schema(qtbot):
    dialog = dialog_for(qtbot)
    editor = dialog.format_editor
    assert dialog.answer_format() == "" and not editor.schema.isVisibleTo(dialog)
    editor.mode.setCurrentIndex(1)
    assert dialog.answer_format() == "json"
    editor.mode.setCurrentIndex(2)
    assert editor.schema.isVisibleTo(dialog)
    assert "Type a JSON schema" in editor.status.text()
    editor.schema.setPlainText('{"type": "object", "properties": {')
    assert "not valid JSON" in editor.status.text() and "Fix it" in editor.status.text()
    assert not dialog.ok_button.isEnabled()
    dialog.accept()
    assert dialog.result() != dialog.DialogCode.Accepted
    assert "structured output: The schema is not valid JSON" in dialog.error.text()
    editor.schema.setPlainText('{"type": "wrong"}')
    assert "cannot be enforced" in editor.status.text()
    editor.schema.setPlainText(json.dumps(SCHEMA))
    assert editor.status.text() == "The schema is valid." and dialog.ok_button.isEnabled()
    dialog.accept()
    assert dialog.result() == dialog.DialogCode.Accepted
    assert json.loads(dialog.answer_format()) == SCHEMA
    again = dialog_for(qtbot, dialog.answer_format())
    assert again.format_editor.mode.currentData() == "schema"
    assert json.loads(again.answer_format()) == SCHEMA
    assert dialog_for(qtbot, "json").format_editor.mode.currentData() == "json"


def test_the_format_is_stored_with_the_conversation_and_its_export(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    made = history.create("Soup", "tiny", answer_format="json")
    assert history.conversation(made.id).format == "json"
    history.set_format(made.id, json.dumps(SCHEMA))
    stored = history.conversation(made.id)
    assert json.loads(stored.format) == SCHEMA
    export = tmp_path / "soup.json"
    export.write_text(to_json(stored, []))
    assert import_json(history, export).format == stored.format
    snapshot = history.delete(made.id)
    history.restore(snapshot)
    assert history.conversation(made.id).format == stored.format
    history.close()


def test_an_older_history_gains_the_format_column(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                     "title TEXT NOT NULL, model TEXT NOT NULL, created REAL NOT NULL, "
                     "updated REAL NOT NULL);"
                     "INSERT INTO conversations (title, model, created, updated) "
                     "VALUES ('old', 'm', 0, 0);")
    db.commit()
    db.close()
    history = History(path)
    assert history.conversation(1).format == ""
    history.close()


def test_a_chat_with_a_schema_answers_valid_json_and_the_panel_says_why(
        qtbot, tmp_path, one_model):  # noqa: F811
    window = start(qtbot, tmp_path, one_model, options={"num_predict": 100})
    window.controller.set_conversation_format(json.dumps(SCHEMA))
    window.controller.set_conversation_settings("", {"temperature": 0.0})
    assert "JSON schema" in window.chat.header.details.text()
    done = send(qtbot, window, "How do you feel?")
    assert done.done_reason == "stop"
    jsonschema.validate(json.loads(done.text), SCHEMA)
    stored = window.history.conversation(window.controller.conversation_id)
    assert json.loads(stored.format) == SCHEMA
    qtbot.waitUntil(lambda: "the schema removed" in window.panel.reasons_label.text(),
                    timeout=10_000)
    # the token under the mouse: a random model's top-1 is one the schema removed
    forced = [t for t in window.chat.view.messages[-1].tokens if t.reasons.schema_forced]
    assert forced, "the schema forced no token: the test checks nothing"
    window.chat.tokenHovered.emit(forced[0])
    assert "Token under the mouse" in window.panel.token_title.text()
    assert "forced by the schema" in window.panel.token_title.text()
    assert "forced by the schema" in window.panel.reasons_label.text()


CITY = {"type": "object", "properties": {
    "city": {"type": "string"}, "country": {"type": "string"},
    "population": {"type": "integer", "minimum": 0},
    "landmarks": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "kind": {"enum": ["capital", "city", "town"]}},
    "required": ["city", "country", "population", "landmarks", "kind"],
    "additionalProperties": False}


@pytest.mark.slow  # the demo models, asked for by name
@pytest.mark.parametrize("size", ["05b", "15b"])
def test_the_demo_models_answer_valid_json_in_the_window(request, qtbot, tmp_path, size):
    root = tmp_path / "models"
    import_gguf(Store.open(root), request.getfixturevalue(f"demo_{size}"), "demo")
    window = MainWindow(Settings(models_dir=str(root), speculate="off",
                                 options={"num_predict": 300, "temperature": 0.0}),
                        History(tmp_path / "h.sqlite3"))
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=240_000)
    window.controller.set_conversation_format(json.dumps(CITY))
    with qtbot.waitSignal(window.controller.answerDone, timeout=600_000) as caught:
        window.chat.input.editor.setPlainText("Tell me about Lisbon.")
        window.chat.input.submit()
    done = caught.args[0]
    assert done.done_reason == "stop", done.text
    jsonschema.validate(json.loads(done.text), CITY)
    tokens = window.chat.view.messages[-1].tokens
    assert all(t.reasons.schema_removed > 0 for t in tokens)
