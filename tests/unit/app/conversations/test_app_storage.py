"""History survives a restart and keeps an interrupted answer; settings round-trip."""

import json

from app.conversations.history import History
from app.settings.store import Settings


def test_history_survives_reopen_and_keeps_partial_answer(tmp_path):
    db = tmp_path / "history.sqlite3"
    history = History(db)
    chat = history.create("Primes", "qwen2.5-coder:0.5b")
    history.add(chat.id, "user", "Is 7 prime?", images=("/tmp/a.png",))
    answer = history.add(chat.id, "assistant", "", complete=False)
    history.update(answer, "Yes, 7 is", complete=False)
    history.close()  # the app quits mid-answer

    reopened = History(db)
    [conversation] = reopened.conversations()
    assert conversation.title == "Primes"
    messages = reopened.messages(conversation.id)
    assert [(m.role, m.content, m.complete) for m in messages] == [
        ("user", "Is 7 prime?", True),
        ("assistant", "Yes, 7 is", False),
    ]
    assert messages[0].images == ("/tmp/a.png",)


def test_truncate_from_drops_the_message_and_everything_after(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    chat = history.create("t", "m")
    first = history.add(chat.id, "user", "one")
    second = history.add(chat.id, "assistant", "two")
    history.add(chat.id, "user", "three")
    history.truncate_from(chat.id, second)
    assert [m.id for m in history.messages(chat.id)] == [first]


def test_deleting_a_conversation_deletes_its_messages(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    a, b = history.create("a", "m"), history.create("b", "m")
    history.add(a.id, "user", "x")
    history.add(b.id, "user", "y")
    history.delete(a.id)
    assert [c.id for c in history.conversations()] == [b.id]
    assert history.messages(a.id) == []


def test_settings_round_trip_and_damaged_file(tmp_path, monkeypatch):
    monkeypatch.setenv("LANTERN_CONFIG_DIR", str(tmp_path))
    settings = Settings(models_dir="/models", options={"temperature": 0.2}, num_ctx=8192)
    settings.save()
    loaded = Settings.load()
    assert loaded.models_dir == "/models"
    assert loaded.options == {"temperature": 0.2}
    assert loaded.num_ctx == 8192

    Settings.path().write_text(json.dumps({"num_ctx": "big", "exact": True, "bogus": 1}))
    loaded = Settings.load()
    assert loaded.num_ctx == 4096 and loaded.exact is True

    Settings.path().write_text("{not json")
    assert Settings.load() == Settings()
