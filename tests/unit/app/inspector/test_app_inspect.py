"""The panel's inspection views in the window: the sampler's reasons and the reply's
chart ride on each token; clicking a chart point, a reply token or a prompt row inspects
that position (lens grid, attention over tokens, over the image for image prompts), with
cancel; the llama.cpp tab says how to get llama-cpp-python when it is missing."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt

from app.inspector.inspector import FAST_NOTE, Inspector
from app.inspector.panel import DebugPanel
from app.settings.store import Settings
from app.workers import JobRunner
from engine.inspect import inspect_context
from engine.inspect.second_opinion import INSTALL_HINT
from engine.vision.preprocess import pixels, preprocess
from tests.unit.app.chat.test_app_images import MAX_PIXELS, open_window, photo, vision_store  # noqa: F401
from tests.unit.app.chat.test_app_images import send as send_vl
from tests.unit.app.inspector.test_app_check import (  # noqa: F401
    LAYERS,
    TIMEOUT_MS,
    loaded_window,
    send,
    tiny_store,
)

N = 6


def inspected(qtbot, window, start) -> object:
    inspector = window.inspector
    start()
    qtbot.waitUntil(lambda: inspector.job is None and inspector.inspection is not None,
                    timeout=TIMEOUT_MS)
    return inspector.inspection


def test_reasons_chart_and_clicks_inspect_positions(qtbot, tmp_path, tiny_store):  # noqa: F811
    window = loaded_window(qtbot, Settings(models_dir=str(tiny_store), options={
        "temperature": 0.0, "num_predict": N, "repeat_penalty": 1.3}), tmp_path)
    done = send(qtbot, window, "Hello there")
    panel, inspector = window.panel, window.inspector
    events = inspector.events
    assert len(events) == done.eval_count == N
    # the sampler's reasons of the latest token, the chosen one first and highlighted
    reasons = panel.reasons_model.records
    assert reasons[0].id == events[-1].id and reasons[0].chosen
    assert "greedy" in panel.reasons_label.text()
    assert all(e.reasons is not None and e.reasons.chosen == e.id for e in events)
    # the chart along the reply: probability and entropy of every token
    chart = panel.reply_chart
    assert chart.count == N
    np.testing.assert_allclose(chart.series[0].values, [np.exp(e.logprob) for e in events])

    # clicking the third point inspects the step that chose the third token
    chart.resize(400, 130)
    x = int(chart._x(2, chart._plot()))
    result = inspected(qtbot, window, lambda: qtbot.mouseClick(chart, Qt.LeftButton,
                                                               pos=QPoint(x, 60)))
    prompt = inspector.prompt
    assert result.position == len(prompt) + 1
    assert result.ids == tuple(prompt.ids.tolist()) + (events[0].id, events[1].id)
    assert result.lens[-1].top[0].id == events[2].reasons.raw_top.id   # the model's own top-1
    assert panel.inside.lens.rows == result.lens and len(result.lens) == LAYERS + 1
    assert "reply token #3" in panel.inside.title.text() and FAST_NOTE in panel.inside.status.text()
    np.testing.assert_allclose(panel.inside.weights(), result.attention.mean(axis=(0, 1)),
                               rtol=1e-6)
    panel.inside.layer_box.setCurrentIndex(2)
    panel.inside.head_box.setCurrentIndex(1)
    np.testing.assert_array_equal(panel.inside.weights(), result.attention[1, 0])
    np.testing.assert_array_equal(panel.inside.heat.weights, result.attention[1, 0])
    # the same record the engine computes directly (as `lantern inspect --json` prints)
    direct = inspect_context(window.controller.model.gguf, inspector.context, str, result.position)
    np.testing.assert_array_equal(direct.attention, result.attention)

    # a prompt row, then a token clicked in the reply (colour mode shows token spans)
    panel.promptRowClicked.emit(3)
    qtbot.waitUntil(lambda: inspector.job is None and inspector.inspection.position == 3,
                    timeout=TIMEOUT_MS)
    assert "prompt token" in panel.inside.title.text()
    window.chat.tokenClicked.emit(events[0])
    qtbot.waitUntil(lambda: inspector.job is None and
                    inspector.inspection.position == len(prompt) - 1, timeout=TIMEOUT_MS)

    # cancel: the job ends without a result, the page says so
    inspector.select_row(len(prompt), "test")
    assert inspector.job is not None and not panel.inside.cancel_button.isHidden()
    panel.inside.cancel_button.click()
    assert inspector.job is None and panel.inside.status.text() == "Cancelled."
    assert inspector.inspection.position == len(prompt) - 1     # the last result stays


def test_attention_over_an_image(qtbot, tmp_path, vision_store, photo):  # noqa: F811
    window = open_window(qtbot, tmp_path / "h.sqlite3", vision_store)
    window.chat.input.attach([str(photo)])
    send_vl(qtbot, window, "What is in this picture?")
    result = inspected(qtbot, window, window.panel.inside.inspect_button.click)
    [grid] = result.images
    image = preprocess(photo, max_pixels=MAX_PIXELS)
    assert (grid.height, grid.width) == (image.grid[1] // 2, image.grid[2] // 2)
    [(label, heat)] = window.panel.inside.image_heats
    assert heat.grid.shape == (grid.height, grid.width)
    np.testing.assert_allclose(heat.grid, grid.lay_out(window.panel.inside.weights()))
    assert heat.image.width() == pixels(image).shape[1] and not heat.image.isNull()
    assert "merged patches" in label.text() and "%" in label.text()


def test_llama_tab_says_how_to_get_it_when_missing(qtbot, monkeypatch):
    monkeypatch.setattr("app.inspector.inspector.missing", lambda: INSTALL_HINT)
    panel = DebugPanel()
    qtbot.addWidget(panel)

    class Idle:          # a conversation with nothing loaded
        promptReady = token = busyChanged = panel.checkRequested
        model = session = None
        busy = False

    Inspector(panel, Idle(), JobRunner())
    assert not panel.opinion.button.isEnabled()
    assert "pip install 'lantern[llama]'" in panel.opinion.status.text()


@pytest.mark.parametrize("kept, text, tip", [
    ((True,) * 4, "", "kept by every filter (top_k, typical_p, top_p, min_p)"),
    ((), "greedy", "greedy decoding: no filters, the most likely token is taken"),
    ((True, False, True, False), "typical_p, min_p",
     "cut by typical_p, min_p; kept by top_k, top_p"),
    ((False,) * 4, "top_k, typical_p, top_p, min_p", "cut by top_k, typical_p, top_p, min_p")])
def test_cut_by_text(kept, text, tip):
    from app.inspector.rows import cut_by_text, cut_by_tip

    class Row:
        pass
    row = Row()
    row.kept = kept
    assert (cut_by_text(row), cut_by_tip(row)) == (text, tip)
