"""Where resources/ (style sheet, icons, desktop entry) lives, however Lantern was installed:
inside the bundle when frozen by PyInstaller, next to the sources in a checkout or an
editable install, under ``<prefix>/share/lantern`` when installed from a wheel (the
pyproject's data-files put it there, since resources/ sits outside the packages).
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

MARKER = "style.qss"          # every copy of resources/ has it


def _frozen() -> Path | None:
    bundle = getattr(sys, "_MEIPASS", None)
    return Path(bundle) / "resources" if bundle else None


def _installed() -> Path | None:
    try:
        files = metadata.distribution("lantern").files or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.parts[-3:] == ("share", "lantern", MARKER):
            return Path(file.locate()).resolve().parent
    return None


def resources_dir() -> Path:
    """The first copy of resources/ that exists; the checkout's path when none does (so a
    missing file is reported under the path a developer expects)."""
    source = Path(__file__).resolve().parents[2] / "resources"
    for candidate in (_frozen(), source):
        if candidate is not None and (candidate / MARKER).is_file():
            return candidate
    return _installed() or source
