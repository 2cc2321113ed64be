"""A Gemma 2 model in the window: listed as runnable, loaded, answering; the Reference tab's
check passes and the Inside tab shows a sliding layer's attention cut to its window, the
same record the engine computes directly."""

from pathlib import Path

import numpy as np
import pytest

from app.settings.store import Settings
from engine.catalog.importer import import_gguf
from engine.inspect import inspect_context
from engine.store import Store
from tests.fixtures.synthetic_gguf import TextSpec, write_model
from tests.unit.app.inspector.test_app_check import TIMEOUT_MS, loaded_window, send

LAYERS, WINDOW, N = 4, 4, 4  # the synthetic gemma2 file's window (tests/fixtures)


@pytest.fixture(scope="module")
def gemma2_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("gemma2") / "models"
    gguf = write_model(root.parent / "g.gguf", "gemma2",
                       TextSpec(layers=LAYERS, tie_embeddings=True), seed=3)
    import_gguf(Store.open(root), gguf, "tiny")
    return root


def test_gemma2_answers_passes_the_check_and_shows_its_window(qtbot, tmp_path, gemma2_store):
    window = loaded_window(qtbot, Settings(models_dir=str(gemma2_store), options={
        "temperature": 0.0, "num_predict": N}), tmp_path)
    entry = window.models.entry(window.models.row_of("tiny:latest"))
    assert entry.runnable and entry.family == "gemma2"
    done = send(qtbot, window, "Hello there, how are you?")
    assert done.eval_count == N and window.chat.view.messages[-1].text == done.text

    with qtbot.waitSignal(window.checks.checkDone, timeout=TIMEOUT_MS) as checked:
        window.panel.reference.check_button.click()
    report = checked.args[0]
    assert report.ok and len(report.rows) == LAYERS + 1

    inspector = window.inspector
    last = len(inspector.prompt) - 1
    inspector.select_row(last, "test")
    qtbot.waitUntil(lambda: inspector.job is None and inspector.inspection is not None
                    and inspector.inspection.position == last, timeout=TIMEOUT_MS)
    result = inspector.inspection
    assert last > 2 * WINDOW
    assert np.all(result.attention[0, :, : last - WINDOW + 1] == 0)  # layer 0 slides
    assert np.all(result.attention[1, :, 0] > 0)                      # layer 1 is global
    assert len(window.panel.inside.lens.rows) == LAYERS + 1
    # the capped logits are split before the cap, and the panel says so
    cap = window.controller.model.gguf.config.text.final_logit_softcap
    assert cap and result.contributions.softcap == cap
    assert window.panel.inside.split_box.itemText(0).endswith(f"before the cap at {cap:g}")
    direct = inspect_context(window.controller.model.gguf, inspector.context, str, last)
    np.testing.assert_array_equal(direct.attention, result.attention)
