"""The history's write-ahead log is copied into its database on a thread of its own.

SQLite in WAL mode otherwise copies the log back (a checkpoint) inside whichever commit
fills it to a thousand pages, and syncs the database to disk there. The history's writer is
the window's thread, saving a streamed answer a batch of tokens at a time: that commit,
every few answers, would stop the window for as long as the copy and the disk take (on a
slow or nearly full disk, long). Here one thread serves every open History: each second it
asks for SQLite's passive checkpoint, which copies what no reader still needs and never
waits for a writer.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import weakref
from typing import Protocol

COPY_EVERY_S = 1.0


class CopiesItsLog(Protocol):
    def copy_log(self) -> None: ...


_watched: weakref.WeakSet[CopiesItsLog] = weakref.WeakSet()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def watch(history: CopiesItsLog) -> None:
    """Copy ``history``'s log from now on, as long as it lives (or until ``forget``)."""
    global _thread
    with _lock:
        _watched.add(history)
        if _thread is None:
            _thread = threading.Thread(target=_copy_forever, name="lantern-history-log",
                                       daemon=True)
            _thread.start()


def forget(history: CopiesItsLog) -> None:
    with _lock:
        _watched.discard(history)


def _copy_forever() -> None:
    while True:
        time.sleep(COPY_EVERY_S)
        with _lock:
            histories = list(_watched)
        for history in histories:
            # closed meanwhile, or the disk refused: the next round tries again
            with contextlib.suppress(sqlite3.Error):
                history.copy_log()
        del histories        # no strong reference while asleep: a dropped History can go
