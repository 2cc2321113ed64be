"""The model a server keeps loaded: loaded on demand through engine.launch, kept for a
keep-alive period after its last request, then dropped. One model at a time: asking for
another unloads the first before loading it, so two never hold memory together."""

from __future__ import annotations

import gc
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from engine.errors import LanternError
from engine.launch import EngineChoices, load_local
from engine.runtime.loaded_model import LoadedModel
from engine.store import LocalModel

DEFAULT_KEEP_ALIVE_S = 300.0        # Ollama's default: five minutes
KEEP_ALIVE_ENV = "LANTERN_KEEP_ALIVE"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


class BadKeepAlive(LanternError):
    """A keep_alive value that is neither a number of seconds nor a duration."""


def parse_keep_alive(value: object) -> float | None:
    """Seconds to keep a model after a request; None: forever. Ollama's forms: a number of
    seconds, a Go duration ("5m", "1h30m"), a negative value for forever, 0 to unload."""
    if isinstance(value, bool):
        raise BadKeepAlive(f"keep_alive must be seconds or a duration such as 5m, not {value}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip()
        sign = -1.0 if text.startswith("-") else 1.0
        body = text.lstrip("+-")
        try:
            seconds = sign * float(body)
        except ValueError:
            parts = _DURATION.findall(body)
            if not parts or "".join(n + u for n, u in parts) != body:
                raise BadKeepAlive(f"keep_alive {text!r} is not a duration: write seconds "
                                   "or e.g. 5m, 1h30m, -1 (forever)") from None
            seconds = sign * sum(float(n) * _UNIT_S[u] for n, u in parts)
    return None if seconds < 0 else seconds


@dataclass(frozen=True)
class Resident:
    """What is loaded now, and until when (None: forever)."""

    key: tuple[str, int]            # (model name, num_ctx): another num_ctx needs a reload
    model: LoadedModel
    source: LocalModel
    expires_at: float | None        # time.time() seconds


class ModelKeeper:
    """Loads models on demand and keeps one loaded; ``use`` holds it for one request, during
    which it never expires. ``loads`` counts the loads since start."""

    def __init__(self, choices: EngineChoices,
                 keep_alive: float | None = DEFAULT_KEEP_ALIVE_S) -> None:
        self.choices, self.keep_alive = choices, keep_alive
        self.loads = 0
        self.resident: Resident | None = None
        self._busy = threading.Lock()        # one request on the model at a time
        self._state = threading.Lock()       # guards resident and the timer
        self._timer: threading.Timer | None = None

    @contextmanager
    def use(self, source: LocalModel, num_ctx: int,
            keep_alive: float | None | str = "default") -> Iterator[tuple[LoadedModel, int]]:
        """The loaded model for ``source`` and the ns spent loading it for this request (0
        when it was resident); the keep-alive period starts again when the request ends."""
        with self._busy:
            key = (source.name.display, num_ctx)
            with self._state:
                self._cancel_timer()
                resident = self.resident
                if resident is not None and resident.key == key:
                    # a new record: a timer already firing finds it changed and keeps it
                    self.resident = resident = replace(resident, expires_at=None)
                else:
                    resident = None
            load_ns = 0
            if resident is None:
                self.unload()
                start = time.perf_counter_ns()
                model = load_local(source, self.choices, num_ctx)
                load_ns = time.perf_counter_ns() - start
                with self._state:
                    self.loads += 1
                    self.resident = resident = Resident(key, model, source, None)
            try:
                yield resident.model, load_ns
            finally:
                self._schedule(self.keep_alive if keep_alive == "default" else keep_alive)

    def unload(self) -> None:
        """Drop the resident model (its memory is freed once no request holds it)."""
        with self._state:
            self._cancel_timer()
            self.resident = None
        gc.collect()

    def _schedule(self, seconds: float | None) -> None:
        with self._state:
            if self.resident is None:
                return
            if seconds is not None and seconds <= 0:
                self.resident = None
                return
            expires = None if seconds is None else time.time() + seconds
            self.resident = replace(self.resident, expires_at=expires)
            if seconds is not None:
                self._timer = threading.Timer(seconds, self._expire, (self.resident,))
                self._timer.daemon = True
                self._timer.start()

    def _expire(self, resident: Resident) -> None:
        with self._state:
            if self.resident is not resident:
                return      # used again, or replaced, since this timer was set
            self.resident = None
        gc.collect()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
