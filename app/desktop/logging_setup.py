"""The app's log: ``engine.paths.log_dir()/lantern.log``, rotated, with uncaught
exceptions (main thread, worker threads, Qt slots) and Qt's own warnings in it, so a
user of a double-clicked bundle — who has no terminal — still leaves a trace to report.
"""

from __future__ import annotations

import logging
import sys
import threading
from logging.handlers import RotatingFileHandler
from pathlib import Path

from PySide6.QtCore import QtMsgType, qInstallMessageHandler

from engine.paths import log_dir

LOG_NAME = "lantern.log"
MAX_BYTES = 1_000_000
BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_QT_LEVELS = {
    QtMsgType.QtDebugMsg: logging.DEBUG, QtMsgType.QtInfoMsg: logging.INFO,
    QtMsgType.QtWarningMsg: logging.WARNING, QtMsgType.QtCriticalMsg: logging.ERROR,
    QtMsgType.QtFatalMsg: logging.CRITICAL,
}

log = logging.getLogger("lantern")


def log_file() -> Path:
    return log_dir() / LOG_NAME


def _log_uncaught(kind, value, traceback) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, traceback)
        return
    log.critical("uncaught exception", exc_info=(kind, value, traceback))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    log.critical("uncaught exception in thread %s", args.thread.name if args.thread else "?",
                 exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


def _log_qt_message(kind: QtMsgType, context, message: str) -> None:
    logging.getLogger("qt").log(_QT_LEVELS.get(kind, logging.WARNING), message)


def setup_logging(path: Path | None = None, max_bytes: int = MAX_BYTES,
                  backups: int = BACKUPS) -> RotatingFileHandler:
    """Send the root logger (INFO and up) to the rotating file and stderr, and route
    uncaught exceptions and Qt messages to it. Returns the file handler."""
    path = path or log_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups,
                                  encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    if sys.stderr is not None:                  # a windowed Windows build has none
        console = logging.StreamHandler()
        console.setLevel(logging.WARNING)
        console.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(console)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread
    qInstallMessageHandler(_log_qt_message)
    return handler
