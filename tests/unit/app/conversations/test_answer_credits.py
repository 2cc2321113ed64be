"""Each answer keeps the model that wrote it (issue 38, item 1): switched and regenerated,
an answer was labelled with the new model until the conversation was reopened, then with
the old one (the history kept one model per conversation). Now every message keeps its
model, weights digest, options and engine; databases from before are moved forward with
nothing lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.chat.elided_label import ElidedLabel
from app.conversations.history import History
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.importer import import_gguf
from engine.store import Store
from tests.fixtures.old_history import write_first_release_history
from tests.fixtures.synthetic_gguf import TextSpec, write_model

TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def two_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("credits") / "models"
    store = Store.open(root)
    for name, seed in (("first", 3), ("second", 4)):
        import_gguf(store, write_model(root.parent / f"{name}.gguf", "qwen2",
                                       TextSpec(layers=2), seed=seed), name)
    return root


def load(qtbot, window: MainWindow, name: str) -> None:
    window.models_controller.load(window.models.entry(window.models.row_of(name)))
    qtbot.waitUntil(lambda: window.controller.model is not None
                    and window.controller.model_name == name, timeout=TIMEOUT_MS)


def test_a_regenerated_answer_keeps_the_model_that_wrote_it(qtbot, tmp_path, two_store):
    history = History(tmp_path / "h.sqlite3")
    window = MainWindow(Settings(models_dir=str(two_store), options={
        "temperature": 0.0, "num_predict": 3}), history, auto_load=False)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.models.row_of("second:latest") >= 0, timeout=TIMEOUT_MS)
    load(qtbot, window, "first:latest")
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        window.chat.input.editor.setPlainText("Hello")
        window.chat.input.submit()
    chat = window.controller.conversation_id
    load(qtbot, window, "second:latest")
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        window.controller.regenerate()

    answer = history.messages(chat)[-1]
    assert answer.role == "assistant" and answer.model == "second:latest"
    blob = Store.open(two_store).get("second").model_path.name
    assert answer.produced_by["weights"] == "sha256:" + blob.removeprefix("sha256-")
    assert answer.produced_by["engine"] == "fast"
    assert answer.produced_by["options"]["num_predict"] == 3
    assert history.conversation(chat).model == "second:latest"   # the sidebar's line

    window.new_chat()
    window.open_conversation(chat)
    qtbot.waitUntil(lambda: len(window.chat.view.messages) == 2, timeout=TIMEOUT_MS)
    title = window.chat.view.messages[-1].findChild(ElidedLabel, "messageRole")
    assert title is not None and title.text() == "second:latest"


def test_an_older_database_keeps_every_message_and_credits_its_answers(tmp_path):
    path = write_first_release_history(tmp_path / "old.sqlite3")
    history = History(path)
    user, answer = history.messages(1)
    assert (user.content, user.model) == ("Hi", "")
    assert (answer.content, answer.model, answer.produced_by) == ("Hello!", "qwen:0.5b", {})
    history.close()
