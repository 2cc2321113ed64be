"""Conversation history in SQLite under the user data dir.

Every change is committed at once (WAL journal), and an answer being streamed is
saved as it grows, so quitting or crashing mid-answer keeps what was shown.

Databases from earlier releases are moved forward on open: missing columns are added
with defaults and the search index is built from the messages already there; nothing
is ever dropped. Search uses SQLite's FTS5 when the library has it, else LIKE.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from app.conversations import log_copier

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    model TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    images TEXT NOT NULL DEFAULT '[]',
    complete INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation, id);
CREATE TABLE IF NOT EXISTS answer_versions (
    message INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    number INTEGER NOT NULL,
    content TEXT NOT NULL,
    thinking TEXT NOT NULL,
    thinking_ms INTEGER NOT NULL,
    logprobs TEXT NOT NULL,
    steering TEXT NOT NULL,
    model TEXT NOT NULL,
    produced_by TEXT NOT NULL,
    complete INTEGER NOT NULL,
    done_reason TEXT NOT NULL,
    PRIMARY KEY (message, number)
);
"""

# columns added since the first release: (table, column, declaration)
ADDED_COLUMNS = (
    ("conversations", "pinned", "INTEGER NOT NULL DEFAULT 0"),
    ("conversations", "system", "TEXT NOT NULL DEFAULT ''"),
    ("conversations", "options", "TEXT NOT NULL DEFAULT '{}'"),
    ("conversations", "format", "TEXT NOT NULL DEFAULT ''"),
    ("messages", "thinking", "TEXT NOT NULL DEFAULT ''"),
    ("messages", "thinking_ms", "INTEGER NOT NULL DEFAULT 0"),
    ("messages", "logprobs", "TEXT NOT NULL DEFAULT '[]'"),
    ("messages", "steering", "TEXT NOT NULL DEFAULT ''"),
    ("conversations", "control_vectors", "TEXT NOT NULL DEFAULT '[]'"),
    ("messages", "model", "TEXT NOT NULL DEFAULT ''"),
    ("messages", "produced_by", "TEXT NOT NULL DEFAULT '{}'"),
    ("messages", "version", "INTEGER NOT NULL DEFAULT 1"),
    ("messages", "done_reason", "TEXT NOT NULL DEFAULT ''"),
)

FTS_SCHEMA = """
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, thinking, content='messages', content_rowid='id');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, thinking)
    VALUES (new.id, new.content, new.thinking);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, thinking)
    VALUES ('delete', old.id, old.content, old.thinking);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, thinking ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, thinking)
    VALUES ('delete', old.id, old.content, old.thinking);
    INSERT INTO messages_fts(rowid, content, thinking)
    VALUES (new.id, new.content, new.thinking);
END;
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
"""

CONVERSATION_COLUMNS = "id, title, model, updated, pinned, system, options, created, format"
MESSAGE_COLUMNS = ("id, role, content, images, complete, thinking, thinking_ms, logprobs, "
                   "steering, model, produced_by, version, 1 + (SELECT COUNT(*) FROM "
                   "answer_versions WHERE message = messages.id), done_reason")
# an answer's own columns, kept whole for each of its versions (regenerate keeps them)
VERSION_COLUMNS = ("content, thinking, thinking_ms, logprobs, steering, model, produced_by, "
                   "complete, done_reason")
NO_LOGPROBS = MESSAGE_COLUMNS.replace("logprobs", "'[]'")   # the same, the rows left unread


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    model: str
    updated: float
    pinned: bool = False
    system: str = ""                # empty: the app's (or the model's) system prompt
    options: dict = field(default_factory=dict, compare=False)  # Ollama option overrides
    created: float = 0.0
    snippet: str = ""               # search results: the text around the match
    format: str = ""                # structured output: "", "json" or a JSON schema's text


@dataclass(frozen=True)
class StoredMessage:
    id: int
    role: str
    content: str
    images: tuple[str, ...]     # paths of the image files as the user gave them
    complete: bool              # False: the answer was interrupted
    thinking: str = ""          # a thinking model's thinking section
    thinking_ms: int = 0        # how long it thought
    logprobs: tuple = ()        # per token: {"token", "logprob", "top": [[token, logprob]]}
    steering: str = ""          # the control vectors that steered the answer ("" none)
    model: str = ""             # an answer: the model that wrote it
    produced_by: dict = field(default_factory=dict, compare=False)  # its weights, options, engine
    version: int = 1            # an answer: which of its versions this is (regenerate adds one)
    versions: int = 1           # ...of how many
    done_reason: str = ""       # how the answer ended: "stop", "length", "cancel" ("" not yet)


@dataclass(frozen=True)
class Snapshot:
    """A deleted conversation, whole, so that Undo can put it back as it was."""

    conversation: Conversation
    messages: list[StoredMessage]
    versions: list[tuple] = field(default_factory=list)   # answer_versions rows


class History:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # a commit is written to the log without waiting for the disk: it survives the
        # process dying (kill -9), and the streaming answer's update per token stays cheap
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        # the log is copied into the database by log_copier's thread, never in a commit
        self._db.execute("PRAGMA wal_autocheckpoint=0")
        self._db.executescript(SCHEMA)
        self._migrate()
        self.full_text = self._has_fts()
        self._copier = sqlite3.connect(str(path), isolation_level=None,
                                       check_same_thread=False)
        self._copying = threading.Lock()
        log_copier.watch(self)

    def close(self) -> None:
        log_copier.forget(self)
        with self._copying:
            self._copier.close()
        self._db.close()

    def copy_log(self) -> None:
        """Copy the write-ahead log into the database as far as no reader needs it
        (SQLite's passive checkpoint: it never waits for the writer)."""
        with self._copying:
            self._copier.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _migrate(self) -> None:
        for table, column, declaration in ADDED_COLUMNS:
            present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in present:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                if (table, column) == ("messages", "model"):
                    # answers from before answers kept their model: the conversation's
                    # model is the best record there is of who wrote them
                    self._db.execute(
                        "UPDATE messages SET model = (SELECT model FROM conversations "
                        "WHERE conversations.id = messages.conversation) "
                        "WHERE role = 'assistant'")

    def _has_fts(self) -> bool:
        """The search index exists (built now from existing messages if it did not)."""
        if self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages_fts'").fetchone():
            return True
        try:
            self._db.executescript("BEGIN;" + FTS_SCHEMA + "COMMIT;")
        except sqlite3.OperationalError:          # SQLite built without FTS5
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            return False
        return True

    # -- conversations ------------------------------------------------------------------

    def create(self, title: str, model: str, system: str = "",
               options: dict | None = None, answer_format: str = "") -> Conversation:
        now = time.time()
        cursor = self._db.execute(
            "INSERT INTO conversations (title, model, created, updated, system, options, format) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (title, model, now, now, system, json.dumps(options or {}), answer_format),
        )
        return self.conversation(int(cursor.lastrowid))

    def conversation(self, conversation: int) -> Conversation | None:
        row = self._db.execute(f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?",
                               (conversation,)).fetchone()
        return None if row is None else _conversation(row)

    def conversations(self) -> list[Conversation]:
        """Pinned first, then the most recently updated."""
        rows = self._db.execute(f"SELECT {CONVERSATION_COLUMNS} FROM conversations "
                                "ORDER BY pinned DESC, updated DESC, id DESC")
        return [_conversation(row) for row in rows]

    def rename(self, conversation: int, title: str) -> None:
        self._db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation))

    def set_pinned(self, conversation: int, pinned: bool) -> None:
        self._db.execute("UPDATE conversations SET pinned = ? WHERE id = ?",
                         (int(pinned), conversation))

    def set_settings(self, conversation: int, system: str, options: dict) -> None:
        """The conversation's own system prompt and sampling options."""
        self._db.execute("UPDATE conversations SET system = ?, options = ? WHERE id = ?",
                         (system, json.dumps(options), conversation))

    def control_vectors(self, conversation: int) -> list[tuple[str, float]]:
        """The control vectors this conversation steers with: (file, strength) each."""
        row = self._db.execute("SELECT control_vectors FROM conversations WHERE id = ?",
                               (conversation,)).fetchone()
        return [(str(path), float(strength)) for path, strength in json.loads(row[0])] \
            if row else []

    def set_control_vectors(self, conversation: int, vectors: list[tuple[str, float]]) -> None:
        self._db.execute("UPDATE conversations SET control_vectors = ? WHERE id = ?",
                         (json.dumps([list(v) for v in vectors]), conversation))

    def set_format(self, conversation: int, answer_format: str) -> None:
        """The conversation's structured output ("", "json" or a schema's text)."""
        self._db.execute("UPDATE conversations SET format = ? WHERE id = ?",
                         (answer_format, conversation))

    def delete(self, conversation: int) -> Snapshot | None:
        """Delete a conversation; returns it whole for `restore` (Undo)."""
        found = self.conversation(conversation)
        if found is None:
            return None
        snapshot = Snapshot(found, self.messages(conversation), self._db.execute(
            "SELECT * FROM answer_versions WHERE message IN "
            "(SELECT id FROM messages WHERE conversation = ?)", (conversation,)).fetchall())
        self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation,))
        return snapshot

    def restore(self, snapshot: Snapshot) -> None:
        """Put a deleted conversation back, with its ids, as it was."""
        c = snapshot.conversation
        self._db.execute("BEGIN")
        try:
            self._db.execute(
                "INSERT INTO conversations (id, title, model, created, updated, pinned, "
                "system, options, format) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (c.id, c.title, c.model, c.created, c.updated, int(c.pinned), c.system,
                 json.dumps(c.options), c.format))
            for m in snapshot.messages:
                self._insert_message(c.id, m, message_id=m.id)
                self._db.execute("UPDATE messages SET version = ? WHERE id = ?",
                                 (m.version, m.id))
            for row in snapshot.versions:
                self._db.execute(f"INSERT INTO answer_versions VALUES "
                                 f"({', '.join('?' * len(row))})", row)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def search(self, text: str, limit: int = 50) -> list[Conversation]:
        """Conversations whose title or messages (both sides, thinking too) contain every
        word of `text`, best first; each with a snippet around the match."""
        words = text.split()
        if not words:
            return []
        found: dict[int, str] = {}
        if self.full_text:
            query = " ".join('"' + w.replace('"', '""') + '"*' for w in words)
            rows = self._db.execute(
                "SELECT m.conversation, snippet(messages_fts, -1, '\x02', '\x03', '…', 10) "
                "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
                "WHERE messages_fts MATCH ? ORDER BY rank", (query,))
        else:
            where = " AND ".join("(content LIKE ? ESCAPE '\\' OR thinking LIKE ? ESCAPE '\\')"
                                 for _ in words)
            args = [p for w in words for p in (_like(w), _like(w))]
            rows = ((cid, _around(content, words[0])) for cid, content in self._db.execute(
                f"SELECT conversation, content FROM messages WHERE {where} ORDER BY id DESC",
                args))
        for conversation, snippet in rows:
            found.setdefault(conversation, _lead_with_match(snippet))
        titled = self._db.execute(
            "SELECT id FROM conversations WHERE " + " AND ".join(
                "title LIKE ? ESCAPE '\\'" for _ in words), [_like(w) for w in words])
        for (conversation,) in titled:
            found.setdefault(conversation, "")
        out = []
        for conversation, snippet in list(found.items())[:limit]:
            c = self.conversation(conversation)
            if c is not None:
                out.append(_with_snippet(c, snippet))
        return out

    # -- messages -----------------------------------------------------------------------

    def add(self, conversation: int, role: str, content: str,
            images: tuple[str, ...] = (), complete: bool = True, model: str = "",
            produced_by: dict | None = None) -> int:
        """A message; an answer names the model that writes it (which also becomes the
        conversation's current model) and what it ran with."""
        cursor = self._db.execute(
            "INSERT INTO messages (conversation, role, content, images, complete, model, "
            "produced_by) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (conversation, role, content, json.dumps(list(images)), int(complete), model,
             json.dumps(produced_by or {}, ensure_ascii=False)),
        )
        if model:
            self._db.execute("UPDATE conversations SET model = ? WHERE id = ?",
                             (model, conversation))
        self._touch(conversation)
        return int(cursor.lastrowid)

    def add_message(self, conversation: int, message: StoredMessage) -> int:
        """Add a whole message (import): thinking and log-probabilities included."""
        message_id = self._insert_message(conversation, message)
        self._touch(conversation)
        return message_id

    def update(self, message: int, content: str, complete: bool, thinking: str = "",
               thinking_ms: int = 0, logprobs: list | None = None, steering: str = "") -> None:
        """Save a streaming answer as far as it got (log-probabilities: once, at the end)."""
        self._db.execute(
            "UPDATE messages SET content = ?, complete = ?, thinking = ?, thinking_ms = ?, "
            "steering = ? WHERE id = ?",
            (content, int(complete), thinking, thinking_ms, steering, message))
        if logprobs is not None:
            self._db.execute("UPDATE messages SET logprobs = ? WHERE id = ?",
                             (json.dumps(logprobs, ensure_ascii=False), message))

    def set_done_reason(self, message: int, reason: str) -> None:
        """How the answer ended ("length", "cancel"...; "" while it is being written): a
        reopened one cut short offers to go on."""
        self._db.execute("UPDATE messages SET done_reason = ? WHERE id = ?", (reason, message))

    def set_produced_by(self, message: int, produced_by: dict) -> None:
        """What an answer ran with (known once its session is open)."""
        self._db.execute("UPDATE messages SET produced_by = ? WHERE id = ?",
                         (json.dumps(produced_by, ensure_ascii=False), message))

    def truncate_from(self, conversation: int, message: int) -> None:
        """Drop a message and everything after it (edit / regenerate)."""
        self._db.execute(
            "DELETE FROM messages WHERE conversation = ? AND id >= ?", (conversation, message)
        )
        self._touch(conversation)

    def messages(self, conversation: int, *, logprobs: bool = True) -> list[StoredMessage]:
        """The conversation's messages in order; ``logprobs=False`` leaves every message's
        token rows unread (a long chat's take most of the reading: `logprobs` reads one
        message's when it is needed)."""
        columns = MESSAGE_COLUMNS if logprobs else NO_LOGPROBS
        rows = self._db.execute(
            f"SELECT {columns} FROM messages WHERE conversation = ? ORDER BY id",
            (conversation,),
        )
        return [_stored(row) for row in rows]

    def logprobs(self, message: int) -> tuple:
        """One message's token rows (() for none, or a message no longer there)."""
        row = self._db.execute("SELECT logprobs FROM messages WHERE id = ?",
                               (message,)).fetchone()
        return () if row is None else tuple(json.loads(row[0]))

    def last_message(self, conversation: int, role: str) -> StoredMessage | None:
        """The conversation's latest message from ``role`` (a long chat's others unread)."""
        row = self._db.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation = ? AND role = ? "
            "ORDER BY id DESC LIMIT 1", (conversation, role)).fetchone()
        return None if row is None else _stored(row)

    def message(self, message: int) -> StoredMessage | None:
        """One message (token rows left unread)."""
        row = self._db.execute(f"SELECT {NO_LOGPROBS} FROM messages WHERE id = ?",
                               (message,)).fetchone()
        return None if row is None else _stored(row)

    # -- an answer's versions: the row holds the one shown, answer_versions the others ------

    def keep_version(self, message: int, model: str) -> None:
        """Regenerate: the answer shown is kept as a version and the row, emptied, becomes
        its newest version, which ``model`` writes."""
        self._transaction(
            (f"INSERT INTO answer_versions (message, number, {VERSION_COLUMNS}) "
             f"SELECT id, version, {VERSION_COLUMNS} FROM messages WHERE id = ?", (message,)),
            ("UPDATE messages SET content = '', thinking = '', thinking_ms = 0, "
             "logprobs = '[]', steering = '', complete = 0, done_reason = '', model = ?, "
             "version = 1 + "
             "(SELECT COUNT(*) FROM answer_versions WHERE message = ?) WHERE id = ?",
             (model, message, message)),
            ("UPDATE conversations SET model = ?, updated = ? WHERE id = "
             "(SELECT conversation FROM messages WHERE id = ?)", (model, time.time(), message)))

    def show_version(self, message: int, number: int) -> None:
        """Show version ``number`` of an answer (the one the conversation goes on from):
        it takes the row, and the one shown so far is kept among the others."""
        stored = self.message(message)
        if stored is None or stored.version == number:
            return
        self._transaction(
            (f"INSERT INTO answer_versions (message, number, {VERSION_COLUMNS}) "
             f"SELECT id, version, {VERSION_COLUMNS} FROM messages WHERE id = ?", (message,)),
            *self._take_version(message, number))

    def drop_shown_version(self, message: int) -> bool:
        """An answer that came to nothing gives way to its newest other version; False
        when it has none (the row is then the caller's to remove)."""
        row = self._db.execute("SELECT MAX(number) FROM answer_versions WHERE message = ?",
                               (message,)).fetchone()
        if row[0] is None:
            return False
        self._transaction(*self._take_version(message, row[0]))
        return True

    def _take_version(self, message: int, number: int) -> tuple[tuple[str, tuple], ...]:
        """The statements that move a kept version into its answer's row."""
        columns = VERSION_COLUMNS.split(", ")
        assigned = ", ".join(f"{c} = v.{c}" for c in columns)
        return ((f"UPDATE messages SET {assigned}, version = v.number FROM "
                 "(SELECT * FROM answer_versions WHERE message = ? AND number = ?) AS v "
                 "WHERE messages.id = v.message", (message, number)),
                ("DELETE FROM answer_versions WHERE message = ? AND number = ?",
                 (message, number)))

    def _transaction(self, *statements: tuple[str, tuple]) -> None:
        self._db.execute("BEGIN")
        try:
            for sql, arguments in statements:
                self._db.execute(sql, arguments)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _insert_message(self, conversation: int, m: StoredMessage,
                        message_id: int | None = None) -> int:
        cursor = self._db.execute(
            "INSERT INTO messages (id, conversation, role, content, images, complete, "
            "thinking, thinking_ms, logprobs, steering, model, produced_by, done_reason) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (message_id, conversation, m.role, m.content, json.dumps(list(m.images)),
             int(m.complete), m.thinking, m.thinking_ms,
             json.dumps(list(m.logprobs), ensure_ascii=False), m.steering, m.model,
             json.dumps(m.produced_by, ensure_ascii=False), m.done_reason))
        return int(cursor.lastrowid)

    def _touch(self, conversation: int) -> None:
        self._db.execute(
            "UPDATE conversations SET updated = ? WHERE id = ?", (time.time(), conversation)
        )


def _conversation(row: tuple) -> Conversation:
    cid, title, model, updated, pinned, system, options, created, answer_format = row
    return Conversation(cid, title, model, updated, bool(pinned), system, json.loads(options),
                        created, format=answer_format)


def _with_snippet(c: Conversation, snippet: str) -> Conversation:
    return Conversation(c.id, c.title, c.model, c.updated, c.pinned, c.system, c.options,
                        c.created, " ".join(snippet.split()), c.format)


def _like(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


SNIPPET_LEAD = 16   # characters kept before the match: the sidebar's one line shows it


def _around(text: str, word: str, width: int = SNIPPET_LEAD) -> str:
    at = text.lower().find(word.lower())
    start = max(0, at - width)
    return ("…" if start else "") + text[start:at + len(word) + 40] + "…"


def _lead_with_match(snippet: str) -> str:
    """FTS's snippet (match marked by \\x02 … \\x03) cut to start just before the match,
    so the sidebar's elided line shows the matched word, not only what precedes it."""
    at = snippet.find("\x02")
    plain = snippet.replace("\x02", "").replace("\x03", "")
    if at <= SNIPPET_LEAD:
        return plain
    start = plain.rfind(" ", 0, at - SNIPPET_LEAD) + 1 or at - SNIPPET_LEAD
    return "…" + plain[start:].lstrip("…")


def _stored(row: tuple) -> StoredMessage:
    return StoredMessage(row[0], row[1], row[2], _listed(row[3]), bool(row[4]), row[5],
                         row[6], _listed(row[7]), row[8], row[9],
                         {} if row[10] == "{}" else json.loads(row[10]), row[11], row[12],
                         row[13])


def _listed(text: str) -> tuple:
    """A JSON list column as a tuple (most are empty: no parse for those)."""
    return () if text == "[]" else tuple(json.loads(text))
