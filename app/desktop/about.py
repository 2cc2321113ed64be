"""Help > About Lantern: the versions a bug report needs (Lantern, ONNX Runtime and the
providers this build can run, the CPU's features and fast mode's kernel choices for it, which
matmul multiplies by the weights (Lantern's in place, or MatMulNBits and why),
Qt/PySide6, Python) and where Lantern keeps its files."""

from __future__ import annotations

import html
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

import PySide6
from PySide6.QtCore import Qt, qVersion
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from app.desktop.logging_setup import log_file
from app.settings.store import Settings
from engine import __version__
from engine.paths import cache_dir
from engine.runtime.providers import (
    available_providers,
    cpu_kernels,
    cpu_matmul,
    runtime_version,
)

MAX_WIDTH = 720


@dataclass(frozen=True)
class AboutFacts:
    versions: tuple[tuple[str, str], ...]
    places: tuple[tuple[str, Path], ...]

    def plain_text(self) -> str:
        """The facts as lines of ``label: value`` (what a user pastes into a report)."""
        return "\n".join(f"{label}: {value}" for label, value in (*self.versions, *self.places))


def about_facts(store_root: Path, history: Path) -> AboutFacts:
    build = "bundle" if getattr(sys, "frozen", False) else "Python install"
    versions = (
        ("Lantern", f"{__version__} ({build})"),
        ("ONNX Runtime", f"{runtime_version()}, providers: {', '.join(available_providers())}"),
        ("CPU", cpu_kernels()),
        ("Weights", cpu_matmul()),
        ("Qt", f"{qVersion()} (PySide6 {PySide6.__version__})"),
        ("Python", f"{platform.python_version()} on {platform.platform()}"),
    )
    places = (
        ("Model store", store_root),
        ("Cache", cache_dir()),
        ("Settings", Settings.path()),
        ("History", history),
        ("Log", log_file()),
    )
    return AboutFacts(versions, places)


class AboutDialog(QDialog):
    def __init__(self, facts: AboutFacts, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About Lantern")
        self.facts = facts
        rows = "".join(
            f"<tr><td><b>{html.escape(label)}</b>&nbsp;&nbsp;</td>"
            f"<td>{html.escape(str(value))}</td></tr>"
            for label, value in (*facts.versions, ("", ""), *facts.places))
        self.label = QLabel(
            "<h3>Lantern</h3><p>Chat with, and see inside, the models in your Ollama "
            f"store.</p><table>{rows}</table>")
        self.label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.label.setWordWrap(True)        # a long CPU line wraps: the dialog fits 1280 px
        self.setMaximumWidth(MAX_WIDTH)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok)
        buttons.accepted.connect(self.accept)
        layout = QVBoxLayout(self)
        layout.addWidget(self.label)
        layout.addWidget(buttons)
