"""The Compare tab over a conversation with an image: a tiny random-weight Qwen2.5-VL (A)
against the same weights quantized (B). The rows are engine.inspect.model_compare's (itself
equal to HF transformers in tests/unit/inspect/test_model_compare_images.py), the image is
one labelled, tinted row without numbers, and a text-only model of the same vocabulary is
greyed with its reason once the context holds an image."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

from app.inspector.widgets import IMAGE_COLOUR
from engine.catalog.importer import import_gguf
from engine.inspect.compare_images import picture_inputs
from engine.inspect.model_compare import compare_with
from engine.store import Store
from tests.fixtures.hf_vision import TYPES
from tests.fixtures.synthetic_gguf import write_model
from tests.unit.app.chat.test_app_images import NAME, TEMPLATE, TIMEOUT_MS, open_window, photo  # noqa: F401
from tests.unit.app.chat.test_app_images import send as send_vl


@pytest.fixture(scope="module")
def vl_pair_store(tmp_path_factory) -> Path:
    """tiny-vl (A), tiny-vl-q8 (its weights quantized) and words (text only)."""
    root = tmp_path_factory.mktemp("compare-vl") / "models"
    store, template = Store.open(root), TEMPLATE.read_text(encoding="utf-8")
    for name, arch, types in ((NAME, "qwen25vl", {}), ("tiny-vl-q8", "qwen25vl", TYPES),
                              ("words", "qwen2", {})):
        gguf = write_model(root.parent / f"{name.split(':')[0]}.gguf", arch, seed=7,
                           types=types)
        import_gguf(store, gguf, name, template=template)
    return root


def candidate(page, name: str):
    return next(c for c in page.candidates if c.name.startswith(name))


def test_the_tab_compares_a_conversation_with_an_image(qtbot, tmp_path, vl_pair_store,
                                                       photo):  # noqa: F811
    window = open_window(qtbot, tmp_path / "h.sqlite3", vl_pair_store)
    page = window.panel.compare
    window.show()
    window.panel.show()
    window.panel.tabs.setCurrentWidget(page)
    qtbot.waitUntil(lambda: len(page.candidates) == 2, timeout=TIMEOUT_MS)
    assert candidate(page, "words").reason == ""          # text: any vocabulary twin
    window.chat.input.attach([str(photo)])
    send_vl(qtbot, window, "What is in this picture?")
    qtbot.waitUntil(lambda: "no vision tower" in candidate(page, "words").reason,
                    timeout=TIMEOUT_MS)
    words, other = candidate(page, "words"), candidate(page, "tiny-vl-q8")
    assert not page.models.model().item(page.candidates.index(words)).isEnabled()
    assert page.models.currentIndex() == page.candidates.index(other)

    page.button.click()
    qtbot.waitUntil(lambda: window.comparer.job is None and bool(page.rows.records),
                    timeout=TIMEOUT_MS)
    inspector = window.inspector
    context, first = inspector.context, len(inspector.prompt)
    pictures = picture_inputs([i for m in window.controller.session.messages for i in m.images])
    expected = compare_with(window.controller.model.gguf, "a", other, context, str, pictures,
                            marked_from=first)
    [grid] = expected.images
    rows = page.rows.records
    [image] = [r for r in rows if r.image]
    assert image.position == grid.start and image.image.startswith(
        f"image 1: {grid.height} × {grid.width} patches")
    assert len(rows) == 1 + int(expected.text.sum()) and grid.height * grid.width > 1
    text_rows = [r for r in rows if not r.image]
    compared = np.flatnonzero(expected.text)
    np.testing.assert_array_equal([r.a for r in text_rows], expected.logprobs[0, compared])
    np.testing.assert_array_equal([r.b for r in text_rows], expected.logprobs[1, compared])
    assert np.abs(expected.delta[compared]).max() > 1e-4        # the quantization shows
    assert [r.position for r in page.largest.records] == list(expected.marked)
    row = rows.index(image)
    assert page.rows.index(row, 0).data(Qt.BackgroundRole) == IMAGE_COLOUR
    assert page.rows.index(row, 2).data(Qt.DisplayRole) == ""    # no numbers for it
    assert "1 image(s), whose rows are not compared" in page.status.text()

    page.chart.pointClicked.emit(row)                # the image's point: its row selected
    [selected] = page.table.selectionModel().selectedRows()
    assert selected.row() == row

    window.comparer.compare(words)                   # refused, running nothing
    assert window.comparer.job is None and "no vision tower" in page.status.text()
