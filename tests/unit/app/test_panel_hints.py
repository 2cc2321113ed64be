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
