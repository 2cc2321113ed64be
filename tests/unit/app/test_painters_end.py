"""A widget's painter ends inside its paint event, even when something keeps the paint
frame alive past it (a profiler, a stack sampler, a traceback): a QPainter left active
outlives the paint and is destroyed later on whichever thread drops the frame, which
crashed the window under the stall benchmark's stack sampler."""

import sys

import pytest
from PySide6.QtGui import QPainter

from app.chat.elided_label import ElidedLabel
from app.inspector.charts import LineChart
from app.inspector.lens_grid import LensGrid


def _painters_kept_while(grab) -> list[QPainter]:
    """Every QPainter local of a frame that returns while ``grab`` runs, frames kept."""
    kept = []

    def profile(frame, event, _arg):
        if event == "return":
            kept.extend(v for v in frame.f_locals.values() if isinstance(v, QPainter))

    sys.setprofile(profile)
    try:
        grab()
    finally:
        sys.setprofile(None)
    return kept


@pytest.mark.parametrize("make", [
    lambda: LineChart("loss"),
    LensGrid,
    lambda: ElidedLabel("a label far too long to fit the few pixels it is given here"),
])
def test_no_painter_is_left_active_after_a_paint(qtbot, make):
    widget = make()
    qtbot.addWidget(widget)
    widget.resize(40, 30)
    painters = _painters_kept_while(widget.grab)
    assert painters, "the paint event made no painter: the test no longer reaches it"
    active = [painter for painter in painters if painter.isActive()]
    for painter in active:  # the old way's leftover, ended here so the test can report it
        painter.end()
    assert active == []
