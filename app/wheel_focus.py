"""The mouse wheel scrolls the page; a value control changes only when it has focus.

Qt gives spin boxes, combo boxes and sliders the wheel whenever the pointer is over them,
so scrolling a settings page moved whatever value passed under the pointer (num_ctx from
4096 to 256 without a click). One filter on the application: such a control takes focus
only by a click or Tab, and a wheel turn over it while it lacks focus scrolls the nearest
scroll area instead.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QScrollBar,
    QWidget,
)


def _value_control(obj: QObject) -> QWidget | None:
    """The spin box, combo box or slider that ``obj`` is or belongs to (a spin box's line
    edit), or None. Scroll bars are the page's own wheel targets, not value controls."""
    for widget in (obj, obj.parent()):
        if isinstance(widget, QScrollBar):
            return None
        if isinstance(widget, QAbstractSpinBox | QComboBox | QAbstractSlider):
            return widget
    return None


def _scroll_area(widget: QWidget) -> QAbstractScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None and not isinstance(parent, QAbstractScrollArea):
        parent = parent.parentWidget()
    return parent


class WheelNeedsFocus(QObject):
    """The application-wide event filter (``install``)."""

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        kind = event.type()
        if kind not in (QEvent.Type.Wheel, QEvent.Type.Polish):
            return False
        control = _value_control(obj)
        if control is None:
            return False
        if kind == QEvent.Type.Polish:
            if control.focusPolicy() == Qt.FocusPolicy.WheelFocus:
                control.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            return False
        if control.hasFocus():
            return False
        area = _scroll_area(control)
        if area is not None and isinstance(event, QWheelEvent):
            QCoreApplication.sendEvent(area.verticalScrollBar(), event.clone())
        return True


def install(app: QApplication) -> WheelNeedsFocus:
    """Filter every widget's wheel events from now on (the filter is the app's child)."""
    wheel = WheelNeedsFocus(app)
    app.installEventFilter(wheel)
    return wheel
