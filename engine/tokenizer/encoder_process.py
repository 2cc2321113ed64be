"""Encoding in a child process, so that no long ``tokenizers`` call holds this process's GIL.

Building a ``tokenizers`` BPE model is one Rust call that keeps the GIL for the whole
vocabulary, and serializing it another; while they run, every other thread of the process
(the window's included) waits. So each loaded tokenizer builds its pipeline in a child
process of its own (a fresh interpreter running engine/tokenizer/encoder_child.py, safe
beside Qt's and ONNX Runtime's threads, and blind to the caller's main module), from its
cache entry or, the first time, from the GGUF file itself, and encodes there; a request
and its answer are one message each over a pipe. The child ends when its
``EncoderProcess`` is closed or dropped, when this process exits, or when it finds the
pipe closed (this process died).
"""

import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from engine.errors import LanternError
from engine.tokenizer.encoder_child import FROZEN_FLAG, REASONS, Channel

_EXIT_WAIT_S = 1.0
_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds the engine package


class EncoderGone(LanternError):
    """The child process that encodes text for a tokenizer ended or failed."""


class EncoderFailed(EncoderGone):
    """The child answered that it could not do what was asked (a damaged cache entry among
    others); unlike a child that ended, this says something about the request."""


class EncoderProcess:
    """One tokenizer's child process: ``load`` its cache entry (or ``build`` from the GGUF
    file), then ``encode``."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            _child_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
            env=_child_env(), creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
        self._channel = Channel(self._process.stdout, self._process.stdin)
        self._lock = threading.Lock()
        self._answered = False           # a child that never answered did not start right
        self.close = weakref.finalize(self, _stop, self._process, self._channel)

    def load(self, entry: Path) -> None:
        """The child reads the cache entry and builds its pipeline, while this process goes
        on (reading the entry's tables); ``loaded`` waits for it."""
        with self._lock:
            self._send(("entry", str(entry.resolve())))

    def loaded(self) -> None:
        """Waits until the child has built its pipeline from the entry (EncoderFailed with
        its reason when it cannot)."""
        with self._lock:
            self._answer()

    def build(self, gguf_path: str) -> list[bytes]:
        """The child reads the file's vocabulary and builds its pipeline; returns the cache
        entry's lines. What the file is refused for (UnsupportedModel, CorruptModel, OSError)
        is raised here as the child raised it."""
        with self._lock:
            return self._exchange(("gguf", os.path.abspath(gguf_path)))

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text (control-token strings stay text), no special tokens added."""
        return self._request("encode", text)

    def pipeline(self) -> str:
        """The child's ``tokenizers`` pipeline, serialized (``Tokenizer.to_str``)."""
        return self._request("pipeline", None)

    def _request(self, kind: str, argument: object) -> Any:
        with self._lock:
            return self._exchange((kind, argument))

    def _exchange(self, request: tuple[str, object]) -> Any:
        """Send a request and receive its answer."""
        self._send(request)
        return self._answer()

    def _send(self, request: tuple[str, object]) -> None:
        with self._ended():
            self._channel.send(request)

    def _answer(self) -> Any:
        with self._ended():
            ok, value = self._channel.recv()
        self._answered = True
        if not ok:
            if isinstance(value, REASONS):
                raise value
            raise EncoderFailed(f"the tokenizer's process failed: {value}")
        return value

    @contextmanager
    def _ended(self) -> Iterator[None]:
        """A pipe that breaks means the child ended: EncoderGone, with its exit code."""
        try:
            yield
        except (EOFError, OSError, ValueError):  # ValueError: a pipe this side closed
            if self.close.alive:  # the child closed its end: it is exiting, or has
                with suppress(subprocess.TimeoutExpired):
                    self._process.wait(_EXIT_WAIT_S)
            code = self._process.returncode
            self.close()
            how = "" if code is None else f" (exit code {code})"
            if not self._answered:
                raise EncoderGone(f"the tokenizer's process ended before it answered{how}; "
                                  "its error output says why") from None
            raise EncoderGone(f"the tokenizer's process ended{how}; "
                              "the model has to be loaded again") from None


def _child_command() -> list[str]:
    """This interpreter running the child's module; a frozen bundle (no interpreter of its
    own) runs its program again, which turns into the child on FROZEN_FLAG."""
    if getattr(sys, "frozen", False):
        return [sys.executable, FROZEN_FLAG]
    # -P: the caller's working folder is not put in front of the engine's own modules
    return [sys.executable, "-P", "-m", "engine.tokenizer.encoder_child"]


def _child_env() -> dict[str, str]:
    """The child finds the engine where this process found it, however that was."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(_ROOT), env.get("PYTHONPATH"))))
    return env


def _stop(process: subprocess.Popen, channel: Channel) -> None:
    """Ends the child at once and reaps it on a thread of its own: the window's thread may
    be the one that drops a tokenizer, and freeing a large pipeline takes a while."""
    process.terminate()
    channel.close()
    threading.Thread(target=process.wait, name="lantern-tokenizer-reaper", daemon=True).start()
