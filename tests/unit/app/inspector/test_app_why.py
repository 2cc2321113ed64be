"""Why this token, in the window: the contributions grid of an inspected reply step (its
head cells open that head's attention map) and occlusion attribution over the text, run
as a job with progress and cancel; over an image prompt the picture is tinted patch by
patch."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPoint, Qt

from app.settings.store import Settings
from engine.inspect.occlusion import fitting_patch_group, occlusion
from tests.unit.app.chat.test_app_images import open_window, photo, vision_store  # noqa: F401
from tests.unit.app.chat.test_app_images import send as send_vl
from tests.unit.app.inspector.test_app_check import TIMEOUT_MS, loaded_window, send, tiny_store  # noqa: F401
from tests.unit.app.inspector.test_app_inspect import inspected

N = 4


def test_contribution_grid_and_attribution(qtbot, tmp_path, tiny_store):  # noqa: F811
    window = loaded_window(qtbot, Settings(models_dir=str(tiny_store), options={
        "temperature": 0.0, "num_predict": N, "repeat_penalty": 1.3}), tmp_path)
    send(qtbot, window, "Hello there")
    panel, inspector = window.panel, window.inspector
    inside = panel.inside
    result = inspected(qtbot, window, lambda: inspector.select_reply(2))
    parts = result.contributions
    assert parts.token == inspector.events[2].id      # the token the step chose
    assert inside.contributions.split is parts.logit
    assert inside.split_box.currentText().startswith("logit of")
    assert "embedding" in inside.split_summary.text()
    inside.split_box.setCurrentIndex(1)
    assert inside.contributions.split is parts.margin

    # clicking layer 2, head 2 of the grid shows that head's attention map
    grid = inside.contributions
    grid.resize(400, grid.height())
    cell = grid._cell(1, 1).center().toPoint()
    qtbot.mouseClick(grid, Qt.LeftButton, pos=QPoint(cell.x(), cell.y()))
    assert (inside.layer_box.currentIndex(), inside.head_box.currentIndex()) == (2, 2)
    np.testing.assert_array_equal(inside.heat.weights, result.attention[1, 1])

    # attribution: a job over the same context, then the tinted text
    assert inside.attribute_button.isEnabled()
    inside.attribute_button.click()
    # its progress and Cancel beside its own button, far below the page's top
    strip = inside.attribute_strip
    assert inspector.job is not None and not strip.cancel_button.isHidden()
    assert inside.cancel_button.isHidden() and not inside.attribute_button.isEnabled()
    qtbot.waitUntil(lambda: inspector.job is None, timeout=TIMEOUT_MS)
    direct = occlusion(window.controller.model.gguf, inspector.context, result.position)
    np.testing.assert_allclose(inside.attribution.weights[:-1], direct.delta, atol=1e-6)
    assert np.abs(direct.delta).max() > 1e-4
    assert inside.attribution.weights[-1] == 0 and "log-probability of" in \
        inside.attribution_note.text()

    # cancelled, it leaves nothing half-drawn and says so
    inside.attribute_button.click()
    strip.cancel_button.click()
    assert inspector.job is None and inside.status.text() == "Cancelled."
    assert strip.cancel_button.isHidden()
    assert inside.attribute_button.isEnabled()


def test_attribution_over_an_image(qtbot, tmp_path, vision_store, photo):  # noqa: F811
    window = open_window(qtbot, tmp_path / "h.sqlite3", vision_store)
    window.chat.input.attach([str(photo)])
    send_vl(qtbot, window, "What is in this picture?")
    inside, inspector = window.panel.inside, window.inspector
    result = inspected(qtbot, window, inside.inspect_button.click)
    [grid] = result.images
    inside.attribute_button.click()
    qtbot.waitUntil(lambda: inspector.job is None, timeout=TIMEOUT_MS)
    label, heat = inside.attribution_images
    group = fitting_patch_group(inspector.context, result.position)
    assert group == 2 and grid.height * grid.width > 64       # patches hidden 2 x 2
    direct = occlusion(window.controller.model.gguf, inspector.context, result.position,
                       patch_group=group)
    np.testing.assert_allclose(inside.attribution.weights[:-1], direct.spread, atol=1e-6)
    np.testing.assert_array_equal(heat.grid, grid.lay_out(inside.attribution.weights))
    assert np.abs(heat.grid).max() > 0 and not heat.image.isNull()
    assert "2 × 2 blocks" in label.text()
    inside.inspect_button.click()                 # a new inspection drops the old pictures
    qtbot.waitUntil(lambda: inspector.job is None, timeout=TIMEOUT_MS)
    assert inside.attribution_images == [] and not len(inside.attribution.weights)
