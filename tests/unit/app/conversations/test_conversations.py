"""History worth keeping: an old database moves forward without losing a row; search
finds both sides' text (FTS5 and the LIKE fallback); pin, rename, delete + undo; a JSON
export comes back in as the same conversation; Markdown reads as the chat."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import pytest

from app.conversations.history import History, StoredMessage
from app.conversations.transfer import NotAConversation, export, import_json, to_markdown

OLD_SCHEMA = """
CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL,
    model TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL, content TEXT NOT NULL, images TEXT NOT NULL DEFAULT '[]',
    complete INTEGER NOT NULL DEFAULT 1);
CREATE INDEX messages_by_conversation ON messages(conversation, id);
INSERT INTO conversations VALUES (1, 'Primes', 'qwen2.5-coder:0.5b', 100.0, 200.0);
INSERT INTO messages VALUES (1, 1, 'user', 'Is 7 a prime number?', '["/tmp/a.png"]', 1);
INSERT INTO messages VALUES (2, 1, 'assistant', 'Yes, seven is prime.', '[]', 0);
"""


def test_a_database_of_the_previous_release_is_migrated_and_searchable(tmp_path):
    db = tmp_path / "history.sqlite3"
    old = sqlite3.connect(db)
    old.executescript(OLD_SCHEMA)
    old.close()
    history = History(db)
    [conversation] = history.conversations()
    assert (conversation.title, conversation.model, conversation.pinned) == \
        ("Primes", "qwen2.5-coder:0.5b", False)
    user, answer = history.messages(1)
    assert user.content == "Is 7 a prime number?" and user.images == ("/tmp/a.png",)
    assert answer.content == "Yes, seven is prime." and not answer.complete
    assert answer.thinking == "" and answer.logprobs == ()
    assert [c.id for c in history.search("seven")] == [1]     # indexed on migration
    history.close()
    assert [c.id for c in History(db).search("prime")] == [1]  # and reopened as is


@pytest.fixture(params=["fts5", "like"])
def history(request, tmp_path):
    history = History(tmp_path / "h.sqlite3")
    history.full_text = request.param == "fts5"
    if request.param == "fts5":
        assert history.full_text, "this SQLite has no FTS5"
    yield history
    history.close()


def test_search_finds_both_sides_and_titles(history):
    a = history.create("Rust lifetimes", "m")
    history.add(a.id, "user", "Why does the borrow checker complain?")
    b = history.create("Soup", "m")
    history.add(b.id, "user", "A recipe please")
    answer = history.add(b.id, "assistant", "")
    history.update(answer, "Chop the leeks, then simmer.", True, thinking="Leek soup is easy")
    assert [c.id for c in history.search("borrow")] == [a.id]          # a question
    assert [c.id for c in history.search("simmer")] == [b.id]          # an answer
    assert [c.id for c in history.search("lifetimes")] == [a.id]       # a title
    assert [c.id for c in history.search("chop leeks")] == [b.id]      # every word
    assert history.search("chop borrow") == []
    assert "simmer" in history.search("simmer")[0].snippet
    assert history.search("50%_") == []                                # no wildcards


def test_pin_rename_delete_and_undo(history):
    a = history.create("first", "m")
    b = history.create("second", "m")
    history.add(a.id, "user", "hello")
    history.set_pinned(b.id, True)
    assert [c.id for c in history.conversations()] == [b.id, a.id]
    history.rename(a.id, "renamed")
    assert history.conversation(a.id).title == "renamed"
    snapshot = history.delete(a.id)
    assert [c.id for c in history.conversations()] == [b.id] and history.messages(a.id) == []
    assert history.search("hello") == []
    history.restore(snapshot)
    assert history.conversation(a.id).title == "renamed"
    assert [m.content for m in history.messages(a.id)] == ["hello"]
    assert [c.id for c in history.search("hello")] == [a.id]


def sample(history: History) -> int:
    chat = history.create("Counting", "qwen3:0.6b", system="Answer briefly.",
                          options={"temperature": 0.2, "seed": 7})
    history.add(chat.id, "user", "How many r in strawberry?", images=("/tmp/s.png",))
    answer = history.add(chat.id, "assistant", "")
    history.update(answer, "There are **3**.", True, thinking="s-t-r-a-w: one r, b-e-r-r-y",
                   thinking_ms=1200,
                   logprobs=[{"token": "There", "logprob": -0.1, "top": [["There", -0.1]]}])
    return chat.id


def test_json_export_imports_back_as_the_same_conversation(history, tmp_path):
    original = sample(history)
    first = tmp_path / "chat.json"
    export(history, original, first)
    imported = import_json(history, first)
    assert imported.id != original
    second = tmp_path / "again.json"
    export(history, imported.id, second)
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    for data in (a, b):
        data.pop("created"), data.pop("updated")
    assert a == b
    assert a["messages"][1]["logprobs"][0]["logprob"] == -0.1
    assert history.messages(imported.id)[1].thinking == "s-t-r-a-w: one r, b-e-r-r-y"
    assert history.conversation(imported.id).options == {"temperature": 0.2, "seed": 7}


def test_markdown_export_reads_as_the_chat(history):
    chat = sample(history)
    text = to_markdown(history.conversation(chat), history.messages(chat))
    assert text.startswith("# Counting\n")
    assert "**System:** Answer briefly." in text
    assert "## You\n\n![image](/tmp/s.png)\nHow many r in strawberry?" in text
    assert "<details><summary>Thinking</summary>\n\ns-t-r-a-w" in text
    assert text.rstrip().endswith("There are **3**.")


@pytest.mark.parametrize("content, says", [
    ("not json", "cannot be read as JSON"),
    ('{"title": "x"}', "is not a Lantern conversation export"),
    ('{"format": "lantern-conversation", "messages": [{"role": "bot", "content": "x"}]}',
     "message 1 needs a role"),
    ('{"format": "lantern-conversation", "messages": [{"role": "user", "content": "x", '
     '"images": "a.png"}]}', "are not lists"),
])
def test_a_bad_import_says_what_is_wrong_and_adds_nothing(history, tmp_path, content, says):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(NotAConversation, match=says):
        import_json(history, path)
    assert history.conversations() == []


def test_without_fts5_history_opens_and_searches_with_like(tmp_path, monkeypatch):
    import app.conversations.history as module

    monkeypatch.setattr(module, "FTS_SCHEMA", module.FTS_SCHEMA.replace("fts5(", "no_such(", 1))
    history = History(tmp_path / "h.sqlite3")
    assert history.full_text is False
    chat = history.create("t", "m")
    history.add(chat.id, "user", "find the needle here")
    assert [c.id for c in history.search("needle")] == [chat.id]
    assert "needle" in history.search("needle")[0].snippet


@pytest.mark.parametrize("cut", ["```python\nprint(1)\n", "~~~~\nx\n```\n", "  ```\ncode"])
def test_markdown_export_closes_a_code_block_an_answer_left_open(history, cut):
    from PySide6.QtGui import QTextDocument

    chat = history.create("Code", "m").id
    history.add(chat, "user", "Write code")
    history.add(chat, "assistant", cut, complete=False)
    history.add(chat, "user", "Go on")
    text = to_markdown(history.conversation(chat), history.messages(chat))
    document = QTextDocument()
    document.setMarkdown(text)
    shown = document.toPlainText()
    # a heading swallowed by the code block would show its hashes
    assert "Go on" in shown and "## You" not in shown


def test_markdown_export_leaves_closed_code_blocks_alone(history):
    chat = history.create("Code", "m").id
    answer = "```\na\n```\n\n````md\n```\nb\n````"
    history.add(chat, "assistant", answer)
    assert answer + "\n" in to_markdown(history.conversation(chat), history.messages(chat))


def test_a_search_snippet_starts_just_before_the_match(history):
    chat = history.create("t", "m")
    history.add(chat.id, "user", "one two three four five six seven eight nine ten eleven "
                                 "twelve thirteen fourteen lanterns glow")
    snippet = history.search("lanterns")[0].snippet
    assert "lanterns" in snippet and snippet.index("lanterns") <= 20, snippet


def test_the_last_message_of_a_role_is_read_alone(history):
    chat = history.create("c", "m").id
    other = history.create("d", "m").id
    for n in range(3):
        history.add(chat, "user", f"q{n}")
        history.add(chat, "assistant", f"a{n}", complete=n < 2)
    history.add(other, "user", "elsewhere")
    messages = history.messages(chat)
    assert history.last_message(chat, "user") == messages[-2]
    assert history.last_message(chat, "assistant") == messages[-1]
    assert not history.last_message(chat, "assistant").complete
    assert history.last_message(other, "assistant") is None
    assert history.last_message(other, "user").content == "elsewhere"


def test_messages_without_token_rows_and_one_messages_rows(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    chat = history.create("t", "").id
    history.add(chat, "user", "hi")
    rows = ({"token": "Hel", "text": "Hel", "logprob": -0.5, "top": [["Hel", -0.5]]},
            {"token": "lo", "text": "lo", "logprob": -0.25, "top": [["lo", -0.25]]})
    history.add_message(chat, StoredMessage(0, "assistant", "Hello", (), True, logprobs=rows))
    full = history.messages(chat)
    light = history.messages(chat, logprobs=False)
    assert [m.logprobs for m in light] == [(), ()]
    assert [replace(m, logprobs=()) for m in full] == light
    assert history.logprobs(full[1].id) == rows == full[1].logprobs
    assert history.logprobs(full[1].id + 1) == ()
