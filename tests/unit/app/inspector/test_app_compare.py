"""The Compare tab: the conversation's latest context under the loaded model and a second
tiny model of the store with the same vocabulary; its numbers are those of
engine.inspect.model_compare (itself checked against HF transformers in
tests/unit/cli/test_compare_models.py). A model of another vocabulary is listed disabled
and refused with the reason, running nothing; Cancel ends the job; another conversation
or a new answer clears the tab."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

from app.inspector.compare_page import IDLE, LISTING, SAME_FAMILY, ComparePage
from app.inspector.tables import table_view
from app.settings.store import Settings
from engine.catalog.importer import import_gguf
from engine.gguf.model import open_model
from engine.inspect.inspection import InspectionCancelled
from engine.inspect.model_compare import Candidate, compare_models
from engine.store import Store
from tests.fixtures.synthetic_gguf import TextSpec, vocabulary, write_model
from tests.unit.app.inspector.test_app_check import TIMEOUT_MS, loaded_window, send

LAYERS = 3


@pytest.fixture(scope="module")
def pair_store(tmp_path_factory) -> Path:
    """tiny (A), other (same vocabulary, other weights) and wide (a longer token list)."""
    root = tmp_path_factory.mktemp("compare") / "models"
    store = Store.open(root)
    wide = TextSpec(layers=LAYERS, vocab=len(vocabulary().tokens) + 8)
    for name, seed, spec in (("tiny", 3, TextSpec(layers=LAYERS)),
                             ("other", 4, TextSpec(layers=LAYERS)), ("wide", 5, wide)):
        path = write_model(root.parent / f"{name}.gguf", "qwen2", spec, std=0.2, seed=seed)
        import_gguf(store, path, name)
    return root


def compared_window(qtbot, tmp_path, pair_store):
    window = loaded_window(qtbot, Settings(models_dir=str(pair_store), options={
        "temperature": 0.0, "num_predict": 5}), tmp_path)
    page = window.panel.compare
    assert window.comparer.list_job is None and page.candidates == []  # not read unseen
    window.show()
    window.panel.show()
    window.panel.tabs.setCurrentWidget(page)      # the tab in view: the store is read now
    assert page.status.text() == LISTING          # not "the store holds no other model"
    qtbot.waitUntil(lambda: len(page.candidates) == 2, timeout=TIMEOUT_MS)
    send(qtbot, window, "Hello world")
    return window, page


def candidate(page, name: str):
    return next(c for c in page.candidates if c.name.startswith(name))


def test_the_view_shows_the_engines_comparison_and_clears(qtbot, tmp_path, pair_store):
    window, page = compared_window(qtbot, tmp_path, pair_store)
    other, wide = candidate(page, "other"), candidate(page, "wide")
    assert other.reason == "" and "vocabulary differs" in wide.reason
    items = page.models.model()
    assert items.item(page.candidates.index(wide)).isEnabled() is False
    assert SAME_FAMILY in items.item(page.candidates.index(wide)).toolTip()
    assert page.models.currentIndex() == page.candidates.index(other)

    page.button.click()
    assert not page.cancel_button.isHidden()
    qtbot.waitUntil(lambda: window.comparer.job is None and bool(page.rows.records),
                    timeout=TIMEOUT_MS)
    context = window.inspector.context
    ids = context.ids.tolist()
    answer = [e.id for e in window.inspector.events]
    assert answer and ids == window.inspector.prompt.ids.tolist() + answer   # prompt, answer
    first = len(window.inspector.prompt)                   # the answer's first token
    expected = compare_models(window.controller.model.gguf, open_model(other.path), ids,
                              [str(i) for i in ids], ("a", "b"), marked_from=first)
    assert min(expected.marked) >= first and "in the answer" in page.largest_title.text()
    rows = page.rows.records
    np.testing.assert_array_equal([r.a for r in rows], expected.logprobs[0])
    np.testing.assert_array_equal([r.b for r in rows], expected.logprobs[1])
    assert [r.position for r in page.largest.records] == list(expected.marked)
    assert [r.position for r in rows if r.marked] == sorted(expected.marked)
    assert np.abs(expected.delta).max() > 0.01             # two models that do differ
    mean, answer_mean = np.abs(expected.delta).mean(), np.abs(expected.delta[first - 1:]).mean()
    assert f"mean |Δ| {mean:.3f} nats ({answer_mean:.3f} over the answer" in page.status.text()
    assert page.rows.index(expected.marked[0] - 1, 0).data(Qt.BackgroundRole) is not None

    # a largest disagreement clicked: its row is selected in the full table
    page.largest_table.clicked.emit(page.largest.index(1, 0))
    [selected] = page.table.selectionModel().selectedRows()
    assert selected.row() == expected.marked[1] - 1

    listed, set_candidates = [], page.set_candidates
    page.set_candidates = lambda found: (listed.append(found), set_candidates(found))
    window.models_controller.rescan()       # the store listed again: the result and pick stay
    qtbot.waitUntil(lambda: bool(listed), timeout=TIMEOUT_MS)
    assert listed[0] == page.candidates
    assert len(page.rows.records) == len(rows) and "mean |Δ|" in page.status.text()
    assert page.models.currentIndex() == page.candidates.index(other)

    window.new_chat()                                      # another conversation
    assert page.rows.records == [] and page.largest.records == []
    assert page.status.text() == IDLE


def test_another_vocabulary_is_refused_and_cancel_ends_the_job(qtbot, tmp_path, pair_store):
    window, page = compared_window(qtbot, tmp_path, pair_store)
    window.comparer.compare(candidate(page, "wide"))
    assert window.comparer.job is None and page.progress.isHidden()
    assert "vocabulary differs" in page.status.text() and SAME_FAMILY in page.status.text()

    page.button.click()
    job = window.comparer.job
    page.cancel_button.click()
    assert window.comparer.job is None and page.status.text() == "Cancelled."
    qtbot.waitUntil(job.ended.is_set, timeout=5_000)
    qtbot.wait(50)                           # a late result, if any, is dropped
    assert page.rows.records == [] and page.status.text() == "Cancelled."

    page.button.click()
    qtbot.waitUntil(lambda: bool(page.rows.records), timeout=TIMEOUT_MS)
    send(qtbot, window, "and again")                      # a new answer: other text
    assert page.rows.records == [] and page.status.text() == IDLE


def test_a_store_without_a_model_to_compare_says_so(qtbot):
    page = ComparePage(table_view)
    qtbot.addWidget(page)
    page.set_candidates([])
    assert not page.button.isEnabled() and "no other model" in page.status.text()
    page.set_candidates([Candidate("wide", Path("w.gguf"), "its vocabulary differs")])
    assert not page.button.isEnabled() and "hover one for why" in page.status.text()


def test_marks_are_chosen_from_the_given_token_on(pair_store):
    store = Store.open(pair_store)
    a, b = (open_model(store.get(name).model_path) for name in ("tiny", "other"))
    ids = list(range(1, 13))
    whole = compare_models(a, b, ids, [str(i) for i in ids], ("a", "b"), marked=12)
    late = compare_models(a, b, ids, [str(i) for i in ids], ("a", "b"), marked=3,
                          marked_from=8)
    np.testing.assert_array_equal(whole.logprobs, late.logprobs)
    assert late.marked == tuple(p for p in whole.marked if p >= 8)[:3]
    assert late.marked_from == 8 and whole.marked_from == 1


def test_cancel_stops_the_comparison_after_the_block_it_is_in(pair_store):
    store = Store.open(pair_store)
    a, b = (open_model(store.get(name).model_path) for name in ("tiny", "other"))
    cancel, stages = threading.Event(), []

    def progress(stage: str, fraction: float) -> None:
        stages.append(stage)
        cancel.set()

    with pytest.raises(InspectionCancelled):
        compare_models(a, b, [1, 2, 3, 4], list("abcd"), ("a", "b"), progress=progress,
                       cancel=cancel)
    assert stages == ["a: block 1 of 3"]
