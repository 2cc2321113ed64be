"""Settings fits the screen it opens on: its groups scroll, OK and Cancel stay in view."""

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
