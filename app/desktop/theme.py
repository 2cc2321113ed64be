"""Colours and the style sheet: resources/style.qss names colours as ``@name`` and is
filled from the light or the dark scheme, following the desktop's colour scheme.
"""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPalette
from PySide6.QtWidgets import QApplication

from app.desktop.resources import resources_dir

RESOURCES = resources_dir()
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)

LIGHT = {
    "window": "#f6f6f8", "surface": "#ffffff", "sidebar": "#eeeef2", "border": "#e0e0e6",
    "text": "#1d1d22", "muted": "#6c6c78", "accent": "#d9822b", "accent_hover": "#c4711f",
    "accent_text": "#ffffff", "accent_soft": "#fbe7cf", "user": "#fff3e3",
    "user_border": "#f3dcbd", "code": "#f3f3f6", "hover": "#e4e4ea",
    "info_bg": "#e7f0fc", "info_fg": "#174a8c", "warning_bg": "#fff3d2",
    "warning_fg": "#7a5200", "error_bg": "#fde8e6", "error_fg": "#a3261c",
    "ok": "#1e7b3c", "bad": "#b3261e", "alternate": "#f8f8fa",
}
DARK = {
    "window": "#1d1e22", "surface": "#25262b", "sidebar": "#18191c", "border": "#35363c",
    "text": "#e7e7ea", "muted": "#9b9ba6", "accent": "#e8953a", "accent_hover": "#f2a552",
    "accent_text": "#1d1e22", "accent_soft": "#4a3420", "user": "#33291f",
    "user_border": "#4a3a28", "code": "#1a1b1e", "hover": "#2e2f35",
    "info_bg": "#1b3150", "info_fg": "#b4d0ff", "warning_bg": "#43361a",
    "warning_fg": "#ffdc8f", "error_bg": "#4a1f1c", "error_fg": "#ffb4ab",
    "ok": "#7fd49a", "bad": "#ff8a80", "alternate": "#222328",
}


def prefers_dark() -> bool:
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


def stylesheet(colours: dict[str, str], source: Path = RESOURCES / "style.qss") -> str:
    """The style sheet with every ``@name`` replaced; an unknown name is an error."""
    text = source.read_text(encoding="utf-8")

    def colour(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in colours:
            raise KeyError(f"{source}: unknown colour @{name}; known: {', '.join(colours)}")
        return colours[name]

    return re.sub(r"@([a-z_]+)", colour, text)


def palette(colours: dict[str, str]) -> QPalette:
    """A Fusion palette matching the style sheet (widgets it does not style use it)."""
    p = QPalette()
    for role, name in ((QPalette.Window, "window"), (QPalette.Base, "surface"),
                       (QPalette.AlternateBase, "alternate"), (QPalette.Text, "text"),
                       (QPalette.WindowText, "text"), (QPalette.ButtonText, "text"),
                       (QPalette.Button, "surface"), (QPalette.Highlight, "accent"),
                       (QPalette.HighlightedText, "accent_text"),
                       (QPalette.PlaceholderText, "muted"), (QPalette.ToolTipBase, "surface"),
                       (QPalette.ToolTipText, "text"), (QPalette.Link, "accent")):
        p.setColor(role, QColor(colours[name]))
    p.setColor(QPalette.Disabled, QPalette.Text, QColor(colours["muted"]))
    p.setColor(QPalette.Disabled, QPalette.ButtonText, QColor(colours["muted"]))
    return p


def app_icon() -> QIcon:
    icon = QIcon()
    for size in ICON_SIZES:
        path = RESOURCES / "icons" / f"lantern-{size}.png"
        if path.is_file():
            icon.addFile(str(path))
    return icon


def apply(app: QApplication, dark: bool | None = None) -> None:
    colours = DARK if (prefers_dark() if dark is None else dark) else LIGHT
    app.setStyle("Fusion")
    app.setPalette(palette(colours))
    app.setStyleSheet(stylesheet(colours))
    app.setWindowIcon(app_icon())
