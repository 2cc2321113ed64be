"""The llama.cpp tab's "Layer by layer" section in the window: on demand over the latest
context, a row per block equal to the engine's comparison, the verdict; cancel; refused
while an answer streams; without llama-cpp-python it says how to get it."""

from __future__ import annotations

from app.inspector.inspector import Inspector
from app.inspector.panel import DebugPanel
from app.settings.store import Settings
from app.workers import JobRunner
from engine.inspect.llama_layers import llama_layers
from engine.inspect.second_opinion import INSTALL_HINT
from tests.unit.app.inspector.test_app_check import (  # noqa: F401
    LAYERS,
    TIMEOUT_MS,
    loaded_window,
    send,
    tiny_store,
)


def test_layers_are_compared_on_demand_and_cancel(qtbot, tmp_path, tiny_store):  # noqa: F811
    window = loaded_window(qtbot, Settings(models_dir=str(tiny_store), options={
        "temperature": 0.0, "num_predict": 4}), tmp_path)
    send(qtbot, window, "Hello there")
    panel, inspector = window.panel, window.inspector
    panel.tabs.setCurrentWidget(panel.opinion)
    section = panel.opinion.layers

    section.button.click()                        # then cancelled before its result comes
    assert not section.progress.isHidden() and not section.button.isEnabled()
    section.cancel_button.click()
    assert section.status.text() == "Cancelled." and section.button.isEnabled()
    qtbot.waitUntil(lambda: not inspector.runner.busy(), timeout=TIMEOUT_MS)
    assert section.rows.records == [] and section.status.text() == "Cancelled."

    section.button.click()
    qtbot.waitUntil(lambda: inspector.layers_job is None, timeout=TIMEOUT_MS)
    assert section.progress.isHidden()
    rows = section.rows.records
    assert [r.delta.label for r in rows] == [f"layer {i + 1} (blk.{i})" for i in range(LAYERS)]
    gguf = window.controller.model.gguf
    direct = llama_layers(gguf.path, gguf, list(inspector.context.ids))
    assert [r.delta.relative for r in rows] == [r.delta.relative for r in direct.rows]
    assert section.status.text().startswith("AGREE: no layer is off")
    assert section.chart.count == LAYERS and section.marked is None

    # a new answer cancels a running comparison, and none starts while one streams
    section.button.click()
    refused = []

    def click_while_streaming(busy: bool) -> None:
        if busy:
            refused.append(section.status.text())
            section.button.click()
            refused.append((inspector.layers_job, section.status.text()))

    window.controller.busyChanged.connect(click_while_streaming)
    send(qtbot, window, "And again")
    assert refused[0] == "Cancelled."
    assert refused[1][0] is None and "no answer is streaming" in refused[1][1]


def test_layers_section_says_how_to_get_llama_cpp(qtbot, monkeypatch):
    monkeypatch.setattr("app.inspector.inspector.missing", lambda: INSTALL_HINT)
    panel = DebugPanel()
    qtbot.addWidget(panel)

    class Idle:          # a conversation with nothing loaded
        promptReady = token = busyChanged = panel.checkRequested
        model = session = None
        busy = False

    Inspector(panel, Idle(), JobRunner())
    assert not panel.opinion.layers.button.isEnabled()
    assert "pip install 'lantern[llama]'" in panel.opinion.layers.status.text()
