"""Start the desktop app: ``lantern-gui``, or ``lantern`` with no command."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from PySide6.QtWidgets import QApplication

from app import theme
from app.settings import Settings
from app.window import MainWindow


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lantern-gui", description="Lantern desktop app")
    parser.add_argument("--models-dir", metavar="DIR",
                        help="Ollama model store (remembered; default: $OLLAMA_MODELS or "
                             "~/.ollama/models)")
    parser.add_argument("--theme", choices=("auto", "light", "dark"), default="auto")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Lantern")
    app.setOrganizationName("Lantern")
    app.setApplicationDisplayName("Lantern")
    app.setDesktopFileName("lantern")
    theme.apply(app, None if args.theme == "auto" else args.theme == "dark")

    settings = Settings.load()
    if args.models_dir:
        settings = replace(settings, models_dir=args.models_dir)
        settings.save()
    window = MainWindow(settings)
    window.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
