"""Conversation history in SQLite under the user data dir.

Every change is committed at once (WAL journal), and an answer being streamed is
saved as it grows, so quitting or crashing mid-answer keeps what was shown.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

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
"""


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    model: str
    updated: float


@dataclass(frozen=True)
class StoredMessage:
    id: int
    role: str
    content: str
    images: tuple[str, ...]     # paths of the image files as the user gave them
    complete: bool              # False: the answer was interrupted


class History:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    # -- conversations ------------------------------------------------------------------

    def create(self, title: str, model: str) -> Conversation:
        now = time.time()
        cursor = self._db.execute(
            "INSERT INTO conversations (title, model, created, updated) VALUES (?, ?, ?, ?)",
            (title, model, now, now),
        )
        return Conversation(int(cursor.lastrowid), title, model, now)

    def conversations(self) -> list[Conversation]:
        rows = self._db.execute(
            "SELECT id, title, model, updated FROM conversations ORDER BY updated DESC, id DESC"
        )
        return [Conversation(*row) for row in rows]

    def rename(self, conversation: int, title: str) -> None:
        self._db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation))

    def delete(self, conversation: int) -> None:
        self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation,))

    # -- messages -----------------------------------------------------------------------

    def add(self, conversation: int, role: str, content: str,
            images: tuple[str, ...] = (), complete: bool = True) -> int:
        cursor = self._db.execute(
            "INSERT INTO messages (conversation, role, content, images, complete) "
            "VALUES (?, ?, ?, ?, ?)",
            (conversation, role, content, json.dumps(list(images)), int(complete)),
        )
        self._touch(conversation)
        return int(cursor.lastrowid)

    def update(self, message: int, content: str, complete: bool) -> None:
        """Save a streaming answer as far as it got."""
        self._db.execute(
            "UPDATE messages SET content = ?, complete = ? WHERE id = ?",
            (content, int(complete), message),
        )

    def truncate_from(self, conversation: int, message: int) -> None:
        """Drop a message and everything after it (edit / regenerate)."""
        self._db.execute(
            "DELETE FROM messages WHERE conversation = ? AND id >= ?", (conversation, message)
        )
        self._touch(conversation)

    def messages(self, conversation: int) -> list[StoredMessage]:
        rows = self._db.execute(
            "SELECT id, role, content, images, complete FROM messages "
            "WHERE conversation = ? ORDER BY id",
            (conversation,),
        )
        return [
            StoredMessage(row[0], row[1], row[2], tuple(json.loads(row[3])), bool(row[4]))
            for row in rows
        ]

    def _touch(self, conversation: int) -> None:
        self._db.execute(
            "UPDATE conversations SET updated = ? WHERE id = ?", (time.time(), conversation)
        )
