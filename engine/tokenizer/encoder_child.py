"""The tokenizer's child process: ``python -m engine.tokenizer.encoder_child``.

A program of its own, not multiprocessing's ``spawn``: spawn re-imports the parent's main
module in the child, so a plain script without an ``if __name__ == "__main__":`` guard
ran its top level twice and failed. Parent and child talk over the child's stdin and
stdout, one message a frame (length, then a pickle); the child points its own stdout at
stderr first, so nothing a library prints can break a frame. Imports are made where they
are needed, to keep what the child loads small.
"""

import os
import pickle
import signal
import struct
from contextlib import suppress
from typing import IO, Any

from engine.errors import LanternError

REASONS = (LanternError, OSError)  # what a build raises for the file: passed on as it is
FROZEN_FLAG = "--lantern-tokenizer-child"  # how a frozen bundle's program is told to be one
_HEADER = struct.Struct("!Q")


class Channel:
    """Framed pickles over a pair of binary pipes (EOFError once the other end is gone).
    Unbuffered streams suit it best: a closing thread then never waits for a reading one."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes]) -> None:
        self._reader, self._writer = reader, writer

    def send(self, message: object) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        for part in (_HEADER.pack(len(data)), data):   # no copy of a large entry to join them
            view = memoryview(part)
            while view:
                view = view[self._writer.write(view):]
        self._writer.flush()

    def recv(self) -> Any:
        (size,) = _HEADER.unpack(self._read(_HEADER.size))
        return pickle.loads(self._read(size))

    def _read(self, size: int) -> bytearray:
        data = bytearray(size)
        view, got = memoryview(data), 0
        while got < size:
            count = self._reader.readinto(view[got:])
            if not count:
                raise EOFError("the other end of the tokenizer's pipe closed")
            got += count
        return data

    def close(self) -> None:
        for stream in (self._writer, self._reader):
            with suppress(OSError):  # the other end is gone: nothing left to flush
                stream.close()


def main() -> None:
    """The child's program: frames arrive on stdin and leave on a copy of stdout."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's; it ends the child
    # file descriptors, not sys.stdout: a windowed program may have no sys.stdout object
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    try:
        os.dup2(2, 1)
    except OSError:  # no error output either
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    # EOF or a broken pipe: the parent closed its end (its tokenizer was dropped, or it exited)
    with suppress(BrokenPipeError, EOFError):
        serve(Channel(os.fdopen(0, "rb", buffering=0), answers))


def serve(channel: Channel) -> None:
    """Build the pipeline (from the cache entry or the GGUF file; the lines of a fresh
    build go back to the parent), then answer until the pipe closes."""
    try:
        source, argument = channel.recv()
        if source == "entry":
            from engine.tokenizer.entry import pipeline

            with open(argument, "rb") as entry:
                backend, written = pipeline(entry.read().split(b"\n")), []
        else:
            backend, written = _built(argument)
        backend.encode_special_tokens = True  # control tokens are the parent's business
    except EOFError:
        return
    except REASONS as error:  # the file's fault: the parent raises it as it is
        channel.send((False, error))
        return
    except Exception as error:  # a damaged entry: the parent rebuilds it
        channel.send((False, f"{type(error).__name__}: {error}"))
        return
    channel.send((True, written))
    del written
    answers = {
        "encode": lambda text: backend.encode(text, add_special_tokens=False).ids,
        "pipeline": lambda _: backend.to_str(),
    }
    while True:
        kind, argument = channel.recv()
        try:
            channel.send((True, answers[kind](argument)))
        except Exception as error:
            channel.send((False, f"{type(error).__name__}: {error}"))


def _built(gguf_path: str) -> tuple[Any, list[bytes]]:
    """A GGUF file's pipeline, built from its vocabulary, and its cache entry's lines."""
    from engine.gguf.reader import read_gguf
    from engine.tokenizer.build import build_tokenizer
    from engine.tokenizer.entry import entry_lines
    from engine.tokenizer.vocab import read_vocabulary

    backend, info = build_tokenizer(read_vocabulary(read_gguf(gguf_path).metadata, gguf_path))
    return backend, entry_lines(backend, info)


if __name__ == "__main__":
    main()
