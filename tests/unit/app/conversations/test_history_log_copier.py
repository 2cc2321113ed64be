"""The history's write-ahead log is copied into the database by a thread of its own, not
inside the window's commits (a streamed answer's save would wait for the disk)."""

import sqlite3
import time

from app.conversations import log_copier
from app.conversations.history import History


def test_commits_never_copy_the_log_and_the_thread_does(tmp_path, monkeypatch):
    monkeypatch.setattr(log_copier, "COPY_EVERY_S", 0.05)
    history = History(tmp_path / "h.sqlite3")
    assert history._db.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    log_copier.forget(history)              # the thread leaves it alone for now
    time.sleep(0.2)
    conversation = history.create("long", "m").id
    answer = history.add(conversation, "assistant", "", complete=False)
    text = ""
    for n in range(150):                    # a streamed answer: far past SQLite's 1000 pages
        text += "".join(f" word{n}x{k}" for k in range(100))
        history.update(answer, text, False)
    database, log = (tmp_path / "h.sqlite3").stat().st_size, \
        (tmp_path / "h.sqlite3-wal").stat().st_size
    assert log > 1000 * 4096 and database < 200_000        # nothing copied by a commit

    log_copier.watch(history)
    deadline = time.monotonic() + 10
    while (tmp_path / "h.sqlite3").stat().st_size < 200_000 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "h.sqlite3").stat().st_size > 200_000          # the thread copied it
    log_copier.forget(history)
    time.sleep(0.3)             # its round in flight ends: no checkpoint beside the reader's
    reader = sqlite3.connect(tmp_path / "h.sqlite3")
    busy, frames, copied = reader.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert busy == 0 and frames == copied
    assert [m.content for m in history.messages(conversation)] == [text]
    history.close()


def test_a_closed_history_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(log_copier, "COPY_EVERY_S", 0.02)
    history = History(tmp_path / "h.sqlite3")
    history.add(history.create("t", "m").id, "user", "hello")
    history.close()
    time.sleep(0.1)                         # the thread goes on without it, no error
    assert history not in set(log_copier._watched)
    reopened = History(tmp_path / "h.sqlite3")
    assert [m.content for c in reopened.conversations()
            for m in reopened.messages(c.id)] == ["hello"]
    reopened.close()
