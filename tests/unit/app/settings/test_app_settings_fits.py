"""Settings, About and the window fit small screens: groups and the Token tab scroll, long
lines wrap, OK and Cancel stay in view."""

from PySide6.QtWidgets import QDialogButtonBox

from app.settings.dialog import SettingsDialog
from app.settings.store import Settings


def test_settings_is_never_taller_than_the_screen(qtbot, tmp_path):
    dialog = SettingsDialog(Settings(models_dir=str(tmp_path)))
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    screen = dialog.screen().availableGeometry()
    content = dialog.scroll.widget()
    assert content.sizeHint().height() > screen.height()      # the premise: it must scroll
    assert dialog.frameGeometry().height() <= screen.height()
    assert dialog.scroll.verticalScrollBar().maximum() > 0
    buttons = dialog.findChild(QDialogButtonBox)
    bottom = buttons.mapTo(dialog, buttons.rect().bottomLeft()).y()
    assert buttons.isVisible() and bottom <= dialog.height()


def test_the_window_fits_a_1280x720_screen(qtbot, tmp_path):
    # the panel's Token tab scrolls: its fixed-height tables made the window taller
    from app.conversations.history import History
    from app.window import MainWindow

    window = MainWindow(Settings(models_dir=str(tmp_path)), History(tmp_path / "h.sqlite3"),
                        auto_load=False)
    qtbot.addWidget(window)
    smallest = window.minimumSizeHint()
    assert smallest.width() <= 1280 and smallest.height() <= 720 - 40   # a task bar's room


def test_about_wraps_a_long_line_within_a_small_screen(qtbot, tmp_path):
    from app.desktop.about import AboutDialog, AboutFacts

    cpu = "CPU AMD EPYC (AVX2); kernels: " + "a long list of kernel choices, " * 8
    dialog = AboutDialog(AboutFacts((("CPU", cpu),), (("Log", str(tmp_path)),)))
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.width() <= 1280 and cpu.split(";")[0] in dialog.label.text()


def test_system_and_sampling_keeps_ok_in_view_with_a_schema(qtbot, monkeypatch):
    # the schema editor grew the dialog to 747 px on a 720-px screen: OK, Cancel and the
    # validation message fell off
    from PySide6.QtCore import QRect
    from PySide6.QtGui import QScreen

    from app.conversations.settings_dialog import ConversationSettingsDialog
    from engine.chat.options import Options

    monkeypatch.setattr(QScreen, "availableGeometry", lambda _: QRect(0, 0, 1280, 720))

    dialog = ConversationSettingsDialog("Soup", "", {}, Options.resolve({}), "",
                                        answer_format='{"type": "object", "oops"}')
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    screen = dialog.screen().availableGeometry()
    assert dialog.scroll.content.sizeHint().height() > screen.height() - 60  # it must scroll
    assert dialog.frameGeometry().height() <= screen.height()
    buttons = dialog.findChild(QDialogButtonBox)
    bottom = buttons.mapTo(dialog, buttons.rect().bottomLeft()).y()
    assert buttons.isVisible() and bottom <= dialog.height()
    dialog.accept()
    assert dialog.error.isVisible() and dialog.error.text().startswith("structured output")
