"""The panel says what to do where it has nothing to show (issue 38, item 10): the Layers
chart names the tick box and the next answer, and an answer reopened from the history is
not blamed on a server."""

import math

from app.inspector.panel import STATS_NEXT, STATS_OFF, DebugPanel
from engine.chat.events import TokenEvent


def test_the_layers_chart_says_how_to_fill_it(qtbot):
    panel = DebugPanel()
    qtbot.addWidget(panel)
    assert panel.stats_chart.empty == STATS_OFF and "Record per-layer" in STATS_OFF
    panel.stats_toggle.setChecked(True)
    assert panel.stats_chart.empty == STATS_NEXT and "regenerate" in STATS_NEXT
    panel.stats_toggle.setChecked(False)
    assert panel.stats_chart.empty == STATS_OFF


def test_a_token_from_the_history_is_not_called_a_servers(qtbot):
    panel = DebugPanel()
    qtbot.addWidget(panel)
    # what the history keeps of a local answer: the best candidates, no entropy
    event = TokenEvent(0, 7, "hi", "hi", 1.5, -0.2, math.inf, (), 0)
    panel.show_token(event, latest=True)
    text = panel.entropy_label.text()
    assert "history" in text and "the server reports" not in text


def test_the_progress_strip_tells_the_time_left_and_fits_its_text(qtbot, monkeypatch):
    # tracing a 10-token text took ~7 minutes with no word of how long; a 6-pixel bar cut
    # its own text in half
    from PySide6.QtWidgets import QPushButton

    from app.inspector import progress_strip
    from app.inspector.progress_strip import ProgressStrip

    clock = [100.0]
    monkeypatch.setattr(progress_strip.time, "monotonic", lambda: clock[0])
    button = QPushButton("Trace")
    strip = ProgressStrip(button, lambda: None)
    qtbot.addWidget(strip)
    strip.show()
    strip.start("Tracing…")
    assert not button.isEnabled() and strip.busy and not strip.progress.isTextVisible()
    clock[0] += 60
    strip.advance("position 2 of 10", 0.2)        # a minute for a fifth: four to go
    assert strip.stage.text() == "position 2 of 10 · about 4 min left"
    strip.still()
    assert button.isEnabled() and not strip.busy and strip.stage.isHidden()


def test_llama_cpps_opinion_and_the_reference_check_have_progress_and_cancel(qtbot):
    # the llama.cpp second opinion had neither; the check's "running" line scrolled away
    panel = DebugPanel()
    qtbot.addWidget(panel)
    page = panel.opinion
    page.show_running()
    assert page.strip.busy and not page.button.isEnabled()
    with qtbot.waitSignal(page.cancelRequested):
        page.strip.cancel_button.click()
    page.show_failed("Cancelled.")
    assert not page.strip.busy and page.button.isEnabled()
    panel.show_check_running()
    assert panel.check_strip.busy and not panel.check_button.isEnabled()
    with qtbot.waitSignal(panel.checkCancelRequested):
        panel.check_strip.cancel_button.click()
    panel.show_check_cancelled()
    assert not panel.check_strip.busy and panel.check_button.isEnabled()
