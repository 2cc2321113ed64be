"""Start the desktop app: ``lantern-gui [FILE.gguf ...]``, or ``lantern`` with no command.

One Lantern per user: when one is running, a new start hands it the files and exits.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app import wheel_focus
from app.desktop import preflight, self_test, theme
from app.desktop.logging_setup import setup_logging
from app.desktop.memory import freeze_startup_objects, merge_freed_blocks
from app.desktop.single_instance import (
    FileOpenEvents,
    InstanceServer,
    bring_to_front,
    send_to_running,
    server_name,
)
from app.settings.store import Settings
from app.window import MainWindow
from app.workers import wait_for_all
from engine import __version__

log = logging.getLogger(__name__)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lantern-gui", description="Lantern desktop app")
    parser.add_argument("files", nargs="*", metavar="FILE.gguf",
                        help="GGUF files to offer to import into the store")
    parser.add_argument("--models-dir", metavar="DIR",
                        help="Ollama model store (remembered; default: $OLLAMA_MODELS or "
                             "~/.ollama/models)")
    parser.add_argument("--theme", choices=("auto", "light", "dark"), default="auto")
    parser.add_argument("--self-test", action="store_true",
                        help="open the window, print the store's models once listed, and quit")
    parser.add_argument("--screenshot", metavar="PNG",
                        help="with --self-test: save the window as PNG before quitting")
    return parser.parse_args(argv)


def offer_imports(window: MainWindow, paths: list[str]) -> None:
    """Bring the window forward and ask, one file at a time, to import each GGUF."""
    bring_to_front(window)
    for path in paths:
        window.models_view.import_gguf(path)


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(sys.argv[1:] if argv is None else argv)
    problem = preflight.problem()          # before Qt, which would abort instead
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    files = [str(Path(f).resolve()) for f in args.files]
    setup_logging()
    name = server_name()
    if not args.self_test and send_to_running(name, files):
        log.info("Lantern is already running: handed it %s", files or "the window")
        return 0
    log.info("Lantern %s starting (%s)", __version__, " ".join(sys.argv))
    merge_freed_blocks()

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Lantern")
    app.setOrganizationName("Lantern")
    app.setApplicationDisplayName("Lantern")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("lantern")
    theme.apply(app, None if args.theme == "auto" else args.theme == "dark")
    wheel_focus.install(app)            # the wheel scrolls pages, not values under it

    settings = Settings.load()
    if args.models_dir:
        settings = replace(settings, models_dir=args.models_dir)
        if not args.self_test:          # a check leaves the user's choice alone
            settings.save()
    window = MainWindow(settings)
    server = InstanceServer(name, window)
    if not args.self_test:
        server.listen()
    server.requested.connect(lambda paths: offer_imports(window, paths))
    file_events = FileOpenEvents(window)
    file_events.opened.connect(lambda path: offer_imports(window, [path]))
    app.installEventFilter(file_events)
    freeze_startup_objects()
    window.show()
    if files:
        QTimer.singleShot(0, lambda: offer_imports(window, files))
    if args.self_test:
        self_test.run(app, window, started, args.screenshot)
    status = app.exec()
    server.close()
    wait_for_all()
    return status


if __name__ == "__main__":
    sys.exit(main())
