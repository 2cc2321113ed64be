"""Encoding in a child process, so that no long ``tokenizers`` call holds this process's GIL.

Building a ``tokenizers`` BPE model is one Rust call that keeps the GIL for the whole
vocabulary, and serializing it another; while they run, every other thread of the process
(the window's included) waits. So each loaded tokenizer builds its pipeline in a child
process of its own (``spawn``: a fresh interpreter, safe beside Qt's and ONNX Runtime's
threads), from its cache entry or, the first time, from the GGUF file itself, and encodes
there; a request and its answer are a short message each over a pipe. The child ends when
its ``EncoderProcess`` is closed or dropped, when this process exits, or when it finds the
pipe closed (this process died).
"""

import multiprocessing
import threading
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from engine.errors import LanternError

_REASONS = (LanternError, OSError)  # what a build raises for the file: passed on as it is

_SPAWN = multiprocessing.get_context("spawn")
_EXIT_WAIT_S = 1.0


class EncoderGone(LanternError):
    """The child process that encodes text for a tokenizer ended or failed."""


class EncoderProcess:
    """One tokenizer's child process: ``load`` its cache entry's lines (or ``build`` from
    the GGUF file), then ``encode``."""

    def __init__(self) -> None:
        here, there = _SPAWN.Pipe()
        self._process = _SPAWN.Process(target=_serve, args=(there,), daemon=True,
                                       name="lantern-tokenizer")
        self._process.start()
        there.close()
        self._pipe = here
        self._lock = threading.Lock()
        self.close = weakref.finalize(self, _stop, self._process, here)

    def load(self, lines: list[bytes]) -> None:
        """Sends the entry and waits until the child has built its pipeline (EncoderGone
        with the child's reason when it cannot)."""
        def send() -> None:
            self._pipe.send(("lines", len(lines)))
            for line in lines:
                self._pipe.send_bytes(line)

        with self._lock:
            self._exchange(send)

    def build(self, gguf_path: str) -> list[bytes]:
        """The child reads the file's vocabulary and builds its pipeline; returns the cache
        entry's lines. What the file is refused for (UnsupportedModel, CorruptModel, OSError)
        is raised here as the child raised it."""
        def lines(count: int) -> list[bytes]:
            return [self._pipe.recv_bytes() for _ in range(count)]

        with self._lock:
            return self._exchange(lambda: self._pipe.send(("gguf", gguf_path)), lines)

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text (control-token strings stay text), no special tokens added."""
        return self._request("encode", text)

    def pipeline(self) -> str:
        """The child's ``tokenizers`` pipeline, serialized (``Tokenizer.to_str``)."""
        return self._request("pipeline", None)

    def _request(self, kind: str, argument: object) -> Any:
        with self._lock:
            return self._exchange(lambda: self._pipe.send((kind, argument)))

    def _exchange(self, send: Callable[[], None],
                  more: Callable[[Any], Any] | None = None) -> Any:
        """Send a request and receive its answer (``more`` receives what follows an answer
        that is a count of lines)."""
        try:
            send()
            ok, value = self._pipe.recv()
            if ok and more is not None:
                value = more(value)
        except (EOFError, OSError):
            if self.close.alive:  # the child closed its end: it is exiting, or has
                self._process.join(_EXIT_WAIT_S)
            how = "" if self._process.exitcode is None else f" (exit code {self._process.exitcode})"
            self.close()
            raise EncoderGone(
                f"the tokenizer's process ended{how}; the model has to be loaded again"
            ) from None
        if not ok:
            if isinstance(value, _REASONS):
                raise value
            raise EncoderGone(f"the tokenizer's process failed: {value}")
        return value


def _stop(process: BaseProcess, pipe: Connection) -> None:
    """Ends the child at once and reaps it on a thread of its own: the window's thread may
    be the one that drops a tokenizer, and freeing a large pipeline takes a while."""
    pipe.close()
    process.terminate()
    threading.Thread(target=process.join, name="lantern-tokenizer-reaper", daemon=True).start()


def _serve(pipe: Connection) -> None:
    """The child: build the pipeline (from the entry's lines or the GGUF file; the lines of
    a fresh build go back to the parent), then answer until the pipe closes. Imports here
    keep what the spawned interpreter loads small."""
    try:
        source, argument = pipe.recv()
        if source == "lines":
            from engine.tokenizer.entry import pipeline

            backend, written = pipeline([pipe.recv_bytes() for _ in range(argument)]), []
        else:
            backend, written = _built(argument)
        backend.encode_special_tokens = True  # control tokens are the parent's business
    except EOFError:
        return
    except _REASONS as error:  # the file's fault: the parent raises it as it is
        pipe.send((False, error))
        return
    except Exception as error:  # a damaged entry: the parent rebuilds it
        pipe.send((False, f"{type(error).__name__}: {error}"))
        return
    pipe.send((True, len(written)))
    for line in written:
        pipe.send_bytes(line)
    del written
    answers = {
        "encode": lambda text: backend.encode(text, add_special_tokens=False).ids,
        "pipeline": lambda _: backend.to_str(),
    }
    while True:
        try:
            kind, argument = pipe.recv()
        except EOFError:
            return
        try:
            pipe.send((True, answers[kind](argument)))
        except Exception as error:
            pipe.send((False, f"{type(error).__name__}: {error}"))


def _built(gguf_path: str) -> tuple[Any, list[bytes]]:
    """A GGUF file's pipeline, built from its vocabulary, and its cache entry's lines."""
    from engine.gguf.reader import read_gguf
    from engine.tokenizer.build import build_tokenizer
    from engine.tokenizer.entry import entry_lines
    from engine.tokenizer.vocab import read_vocabulary

    backend, info = build_tokenizer(read_vocabulary(read_gguf(gguf_path).metadata, gguf_path))
    return backend, entry_lines(backend, info)
