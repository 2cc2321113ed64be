"""The wheel scrolls the Settings page; a value control under the pointer changes only when
it has focus (app/wheel_focus.py). Before, scrolling the dialog moved num_ctx from 4096 to
256 without a click."""

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QComboBox, QSpinBox

from app import wheel_focus
from app.settings.dialog import SettingsDialog
from app.settings.store import Settings


@pytest.fixture
def dialog(qtbot, qapp, tmp_path):
    wheel = wheel_focus.install(qapp)
    dialog = SettingsDialog(Settings(models_dir=str(tmp_path), num_ctx=4096))
    qtbot.addWidget(dialog)
    dialog.resize(600, 400)                 # shorter than its groups: the page scrolls
    dialog.show()
    qtbot.waitExposed(dialog)
    yield dialog
    qapp.removeEventFilter(wheel)


def turn_wheel(widget, notches: int = -3) -> None:
    """``notches`` wheel notches (negative: towards the user) with the pointer over ``widget``."""
    centre = QPointF(widget.rect().center())
    event = QWheelEvent(centre, QPointF(widget.mapToGlobal(QPoint(0, 0))) + centre,
                        QPoint(0, 0), QPoint(0, 120 * notches), Qt.NoButton, Qt.NoModifier,
                        Qt.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def test_the_wheel_over_an_unfocused_value_scrolls_the_page(dialog):
    bar = dialog.scroll.verticalScrollBar()
    assert bar.maximum() > 0, "the dialog's page must be taller than its view"
    dialog.num_ctx.clearFocus()
    turn_wheel(dialog.num_ctx)
    turn_wheel(dialog.num_ctx.lineEdit())
    assert dialog.num_ctx.value() == 4096
    assert bar.value() > 0                  # the page moved instead


def test_every_value_control_waits_for_focus(dialog):
    for control in dialog.findChildren(QSpinBox) + dialog.findChildren(QComboBox):
        assert control.focusPolicy() != Qt.WheelFocus, control.objectName()


def test_a_focused_control_takes_the_wheel(dialog, qtbot):
    dialog.num_ctx.setFocus()
    qtbot.waitUntil(dialog.num_ctx.hasFocus)
    turn_wheel(dialog.num_ctx)
    assert dialog.num_ctx.value() != 4096
