"""``lantern pull``'s progress: a bar with bytes, speed and ETA on a terminal, plain status
lines (Ollama's words) when the output is not a terminal."""

import io
import os
import pty
import signal
import subprocess
import sys
import time

import pytest

from engine.catalog.importer import import_gguf
from engine.cli.pull_commands import ProgressPrinter
from engine.store import Store
from engine.store.pull import PullProgress, pull_model
from tests.fixtures.registry_front import RegistryFront
from tests.fixtures.synthetic_gguf import write_model


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_shows_bytes_speed_and_eta():
    printer = ProgressPrinter(FakeTerminal())
    printer.started = time.monotonic() - 9.99
    bar = printer.bar(PullProgress("pulling 0e769075cd16", 2_000_000, 500_000, 400_000))
    assert bar == ("pulling 0e769075cd16  25% ▕██████                  ▏ "
                   "500 KB of 2 MB · 40 KB/s · 37s left")


def test_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    printer = ProgressPrinter(out)
    for status, blob in (("pulling manifest", 0), ("pulling 0e769075cd16", 460_000),
                         ("pulling 0e769075cd16", 460_000), ("verifying sha256 digest", 0),
                         ("writing manifest", 0), ("success", 0)):
        printer(PullProgress(status, 460_100, 0, 0, blob))
    assert out.getvalue() == ("pulling manifest\npulling 0e769075cd16 460 KB\n"
                              "verifying sha256 digest\nwriting manifest\nsuccess\n")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_a_terminal_gets_the_bar(tmp_path, registry):
    scratch = Store.open(tmp_path / "scratch")
    import_gguf(scratch, write_model(tmp_path / "tty.gguf", "qwen2", seed=11), "tty")
    registry.push_model(scratch, "tty", "library/tty", "latest")
    main, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "pull", f"{registry.host}/library/tty",
         "--insecure", "--models-dir", str(tmp_path / "models")],
        stdin=child, stdout=child, stderr=child, close_fds=True)
    os.close(child)
    output = b""
    try:
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:          # the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(main)
    text = output.decode()
    assert "\rpulling " in text and "▕" in text and "%" in text and " of 460 KB" in text
    assert "verifying sha256 digest" in text and "success" in text
    assert f"pulled {registry.host}/library/tty:latest" in text


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_keeps_the_download_and_the_next_pull_resumes(tmp_path, registry, demo_05b):
    scratch = Store.open(tmp_path / "scratch")
    model = import_gguf(scratch, demo_05b, "demo")
    registry.push_model(scratch, "demo", "library/demo", "0.5b")
    models = tmp_path / "models"
    # blobs at a link's pace (8 MB/s a range): the pull is still running when Ctrl-C comes,
    # however busy this machine is
    front = RegistryFront(registry.port, rate=8e6)
    command = [sys.executable, "-m", "engine.cli", "pull", f"{front.host}/library/demo:0.5b",
               "--insecure", "--models-dir", str(models)]
    # a shell's background job inherits SIGINT ignored, and Python then never raises
    # KeyboardInterrupt: give the child Ctrl-C's default, as a terminal would
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        gguf = model.model_path.name[7:]
        for line in process.stderr:                      # plain status lines (not a TTY)
            if line.decode().startswith(f"pulling {gguf[:12]}"):
                break
        partial = models / "blobs" / f"lantern-partial-sha256-{gguf}"
        deadline = time.monotonic() + 60
        while not (partial.exists() and partial.with_name(partial.name + ".ranges").exists()
                   and (partial.stat().st_blocks * 512 > 20_000_000)):
            if process.poll() is not None:
                pytest.fail(f"the pull ended ({process.returncode}) before Ctrl-C: "
                            f"{process.stderr.read().decode()}")
            assert time.monotonic() < deadline, "the pull wrote under 20 MB in 60 s"
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 130
        err = process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
        front.stop()
    assert "pull interrupted; what was downloaded is kept" in err
    assert not (models / "manifests" / front.host).exists()
    assert not (models / "blobs" / f"sha256-{gguf}").exists()

    # the same blob from the registry itself: the kept bytes are reused (same digest)
    result = pull_model(Store.open(models), f"{registry.host}/library/demo:0.5b",
                        insecure=True)
    assert result.resumed > 20_000_000 and result.downloaded < model.size - 20_000_000
    assert (models / "blobs" / f"sha256-{gguf}").read_bytes() == demo_05b.read_bytes()
