"""`lantern run MODEL` without a prompt is an interactive chat, driven here through a
pseudo-terminal as a person would type: multi-line input, /set, /show, /clear, /bye."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.fixtures.synthetic_gguf import write_model


def read_until(fd: int, marker: bytes, timeout: float = 60.0) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout
    while marker not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {marker!r} in output: {data.decode(errors='replace')}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    return data


@contextmanager
def lantern_run_in_pty(*args: str) -> Iterator[tuple[int, subprocess.Popen]]:
    """`lantern run ARGS` on a pseudo-terminal: (its fd, the process); killed if left running."""
    main, child = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "engine.cli", "run", *args],
                               stdin=child, stdout=child, stderr=child, close_fds=True)
    os.close(child)
    try:
        yield main, process
    finally:
        if process.poll() is None:
            process.kill()
        os.close(main)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_interactive_session(tmp_path):
    model = write_model(tmp_path / "tiny.gguf", "qwen2", seed=5)
    with lantern_run_in_pty(str(model), "--num-predict", "3", "--temperature", "0") as (
            main, process):
        read_until(main, b">>> ")
        os.write(main, b"/set parameter num_predict 2\n")
        assert b"Set parameter 'num_predict' to '2'" in read_until(main, b">>> ")
        os.write(main, b"/set parameter bogus 1\n")
        assert b"unknown option 'bogus'" in read_until(main, b">>> ")
        os.write(main, b'"""Hello\nworld"""\n')
        read_until(main, b">>> ")
        os.write(main, b"/show info\n")
        info = read_until(main, b">>> ")
        assert b"architecture" in info and b"num_predict" in info
        os.write(main, b"/clear\n")
        assert b"Cleared" in read_until(main, b">>> ")
        os.write(main, b"/bye\n")
        assert process.wait(timeout=30) == 0


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_ctrl_c_stops_the_answer_not_the_program(tmp_path):
    import re
    import signal

    # greedy on this random model never samples an end-of-turn token: the answer would run
    # for 100k tokens unless Ctrl-C stops it
    model = write_model(tmp_path / "tiny.gguf", "qwen2", seed=6)
    with lantern_run_in_pty(str(model), "--num-predict", "100000", "--num-ctx", "100000",
                            "--temperature", "0", "--verbose") as (main, process):
        read_until(main, b">>> ")
        os.write(main, b"Hello\n")
        read_until(main, b"Hello\r\n")
        streamed = b""
        while len(streamed) < 200:               # the answer is streaming
            streamed += os.read(main, 4096)
        process.send_signal(signal.SIGINT)       # what Ctrl-C delivers
        after = read_until(main, b">>> ", timeout=30)
        assert process.poll() is None, "Ctrl-C ended the program"
        count = re.search(rb"eval count:\s+(\d+)", after)
        assert count and int(count[1]) < 100000, after[-400:]
        os.write(main, b"/bye\n")
        assert process.wait(timeout=30) == 0
