"""One Lantern per user: a second start hands its .gguf to the first, which comes to the
front and offers to import it; with nobody listening the second start runs itself."""

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from app.conversations.history import History
from app.desktop.single_instance import InstanceServer, send_to_running, server_name
from app.main import offer_imports
from app.settings.store import Settings
from app.window import MainWindow

TIMEOUT_MS = 10_000
ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture
def server(qtbot):
    server = InstanceServer(f"lantern-test-{uuid.uuid4().hex[:12]}")
    assert server.listen()
    yield server
    server.close()


def second_start(name: str, paths: list[str]) -> subprocess.Popen:
    """A later Lantern is another process: it only runs the hand-off, then says if taken."""
    code = ("import sys; from app.desktop.single_instance import send_to_running; "
            f"sys.exit(0 if send_to_running({name!r}, {paths!r}) else 3)")
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)


def test_second_start_hands_its_file_to_the_first(qtbot, server, tmp_path):
    window = MainWindow(Settings(models_dir=str(tmp_path / "models")),
                        History(tmp_path / "history.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    offered: list[str] = []
    window.models_view.import_gguf = offered.append   # the dialog itself is tested elsewhere
    server.requested.connect(lambda paths: offer_imports(window, paths))
    window.showMinimized()

    with qtbot.waitSignal(server.requested, timeout=TIMEOUT_MS) as signal:
        second = second_start(server.name, ["/models/tiny.gguf"])
    qtbot.waitUntil(lambda: second.poll() is not None, timeout=TIMEOUT_MS)  # answered it

    assert signal.args == [["/models/tiny.gguf"]]
    assert second.returncode == 0
    assert offered == ["/models/tiny.gguf"]
    assert window.isVisible() and not window.isMinimized()


def test_a_bare_second_start_only_raises_the_window(qtbot, server):
    with qtbot.waitSignal(server.requested, timeout=TIMEOUT_MS) as signal:
        second = second_start(server.name, [])
    qtbot.waitUntil(lambda: second.poll() is not None, timeout=TIMEOUT_MS)
    assert signal.args == [[]] and second.returncode == 0


def test_nobody_listening_means_start_normally(qapp):
    assert send_to_running(f"lantern-test-{uuid.uuid4().hex[:12]}", ["x.gguf"], 500) is False


def test_the_name_follows_the_config_dir(monkeypatch, tmp_path):
    first = server_name()
    monkeypatch.setenv("LANTERN_CONFIG_DIR", str(tmp_path))
    assert server_name() != first and server_name().startswith("lantern-")
