"""A cancel flag that also stops the work running at the moment it is set.

Checking a ``threading.Event`` between steps is not enough: a prefill of a long prompt, a
reference forward or an inspection is one long ONNX Runtime run. Whoever runs such a call
registers a stop hook for its duration (``while_running``); ``set()`` calls every hook.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from engine.errors import LanternError


class Cancelled(LanternError):
    """The work was cancelled by the user (not an error to show)."""


class CancelEvent(threading.Event):
    """``threading.Event`` whose ``set()`` also calls the stop hooks of what runs now."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], None]] = []

    def set(self) -> None:
        with self._lock:
            super().set()
            hooks = list(self._hooks)
        for stop in hooks:
            stop()

    @contextmanager
    def while_running(self, stop: Callable[[], None]) -> Iterator[None]:
        """Call ``stop`` if the event is set while the block runs (or already was)."""
        with self._lock:
            self._hooks.append(stop)
            already = self.is_set()
        try:
            if already:
                stop()
            yield
        finally:
            with self._lock:
                self._hooks.remove(stop)


@contextmanager
def stop_hook(cancel: threading.Event | None, stop: Callable[[], None]) -> Iterator[None]:
    """``cancel.while_running(stop)`` for a CancelEvent; a plain Event is only checked
    before the block starts."""
    if isinstance(cancel, CancelEvent):
        with cancel.while_running(stop):
            yield
        return
    if cancel is not None and cancel.is_set():
        stop()
    yield
