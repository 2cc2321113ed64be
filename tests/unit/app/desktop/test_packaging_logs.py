"""The app's log: under engine.paths.log_dir(), rotated, and holding what would otherwise
vanish with a double-clicked bundle's missing terminal (uncaught exceptions, Qt warnings)."""

import logging
import sys
import threading

import pytest
from PySide6.QtCore import qInstallMessageHandler, qWarning

from app.desktop.logging_setup import LOG_NAME, log_file, setup_logging
from engine.paths import log_dir


@pytest.fixture
def logging_restored(monkeypatch):
    """setup_logging changes process-wide hooks: put every one of them back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    yield
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)
    qInstallMessageHandler(None)


def test_the_log_lives_in_the_log_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("LANTERN_LOG_DIR", str(tmp_path / "logs"))
    assert log_dir() == tmp_path / "logs"
    assert log_file() == tmp_path / "logs" / LOG_NAME


def test_the_log_rotates_and_keeps_a_few_old_files(tmp_path, logging_restored):
    path = tmp_path / "logs" / LOG_NAME
    setup_logging(path, max_bytes=2_000, backups=2)
    for i in range(200):
        logging.getLogger("lantern.test").info("line %03d of a long session", i)
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == [LOG_NAME, f"{LOG_NAME}.1", f"{LOG_NAME}.2"]
    assert all(p.stat().st_size <= 2_000 for p in path.parent.iterdir())
    assert "line 199" in path.read_text()


def test_uncaught_exceptions_and_qt_warnings_are_logged(tmp_path, logging_restored):
    path = tmp_path / LOG_NAME
    setup_logging(path)
    try:
        raise ValueError("boom in a slot")
    except ValueError:
        sys.excepthook(*sys.exc_info())

    def worker() -> None:
        raise RuntimeError("boom in a worker")

    thread = threading.Thread(target=worker, name="loader")
    thread.start()
    thread.join()
    qWarning("a Qt warning")

    text = path.read_text()
    assert "CRITICAL" in text and "ValueError: boom in a slot" in text
    assert "thread loader" in text and "RuntimeError: boom in a worker" in text
    assert "WARNING qt: a Qt warning" in text
