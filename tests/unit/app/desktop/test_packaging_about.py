"""Help > About Lantern names the versions a bug report needs and where the files live."""

import platform

import onnxruntime
import PySide6
from PySide6.QtCore import qVersion

from app.conversations.history import History
from app.desktop.about import AboutDialog, about_facts
from app.desktop.logging_setup import log_file
from app.settings.store import Settings
from app.window import MainWindow
from engine import __version__
from engine.cpu import cpu_info
from engine.native import custom_ops
from engine.paths import cache_dir


def test_about_box_shows_versions_and_places(qtbot, tmp_path):
    store, history = tmp_path / "models", tmp_path / "history.sqlite3"
    dialog = AboutDialog(about_facts(store, history))
    qtbot.addWidget(dialog)
    text = dialog.label.text()
    for expected in (__version__, onnxruntime.__version__, "cpu", cpu_info().model, "kernels: int8",
                     qVersion(),
                     PySide6.__version__, platform.python_version(), str(store),
                     str(cache_dir()), str(Settings.path()), str(history), str(log_file())):
        assert expected in text, expected
    # which matmul multiplies by the weights, and why when it is not Lantern's own
    assert custom_ops().describe() in dialog.facts.plain_text()
    plain = dialog.facts.plain_text()
    assert f"Lantern: {__version__}" in plain and f"Log: {log_file()}" in plain


def test_help_menu_opens_the_about_box(qtbot, tmp_path, monkeypatch):
    window = MainWindow(Settings(models_dir=str(tmp_path / "models")),
                        History(tmp_path / "history.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    shown: list[str] = []
    monkeypatch.setattr(AboutDialog, "exec", lambda self: shown.append(self.label.text()))
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    about = next(a for a in help_menu.actions() if a.text() == "About Lantern")
    about.trigger()
    assert len(shown) == 1 and str(tmp_path / "models") in shown[0]
