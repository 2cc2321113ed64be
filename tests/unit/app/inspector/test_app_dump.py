"""The Reference tab's "Your engine against Lantern": the latest context's layer dump
exported from the window and compared back names no layer; the same dump with one layer
perturbed names that layer in red with its suspects; a folder that is no dump, or a dump
of another model, says what is wrong and what to do; Cancel ends the worker; refused while
an answer streams; another conversation clears the results; a context with an image dumps
the picture's rows and compares clean, and an image encoder off is named at the
embeddings."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtWidgets import QFileDialog

from app.inspector.dump_section import IDLE
from app.inspector.table_model import BACKGROUND
from app.settings.store import Settings
from engine.inspect import image_grids
from engine.reference import forward
from engine.reference.dump import Dump, read_dump, write_dump
from tests.unit.app.chat.test_app_images import open_window, photo, vision_store  # noqa: F401
from tests.unit.app.chat.test_app_images import send as send_vl
from tests.unit.app.inspector.test_app_check import (  # noqa: F401
    LAYERS,
    TIMEOUT_MS,
    loaded_window,
    send,
    tiny_store,
)


@pytest.fixture
def window(qtbot, tmp_path, tiny_store):  # noqa: F811
    window = loaded_window(qtbot, Settings(models_dir=str(tiny_store), options={
        "temperature": 0.0, "num_predict": 4}), tmp_path)
    send(qtbot, window, "Hello there")
    window.panel.tabs.setCurrentIndex(4)
    return window


def choose(monkeypatch, folder) -> None:
    monkeypatch.setattr(QFileDialog, "getExistingDirectory",
                        staticmethod(lambda *args: str(folder)))


def run(qtbot, window, button) -> None:
    button.click()
    qtbot.waitUntil(lambda: window.inspector.dumps.job is None, timeout=TIMEOUT_MS)


def test_export_then_compare_names_no_layer_and_a_perturbed_one_is_named(
        qtbot, window, tmp_path, monkeypatch):
    section, inspector = window.panel.dump, window.inspector
    folder = tmp_path / "dump"
    folder.mkdir()
    choose(monkeypatch, folder)
    run(qtbot, window, section.export_button)
    assert section.status.text() == (f"Wrote {LAYERS + 1} hidden states of "
                                     f"{len(inspector.context.ids)} tokens and the logits "
                                     f"to {folder}.")
    dump = read_dump(folder)
    ids = np.asarray(inspector.context.ids)
    np.testing.assert_array_equal(dump.ids, ids)
    reference = forward(window.controller.model.gguf, ids)
    for ours, theirs in zip(dump.hidden_states, reference.hidden_states, strict=True):
        np.testing.assert_array_equal(ours, theirs)

    run(qtbot, window, section.compare_button)
    assert section.status.text().startswith("AGREE: no layer is off")
    assert [r.label for r in section.rows.records][-1] == "logits"
    assert len(section.rows.records) == LAYERS + 2 and section.marked is None
    assert all(r.max_abs == 0.0 for r in section.rows.records)
    assert section.chart.count == LAYERS + 2 and section.suspects.isHidden()

    state = np.load(folder / "hidden_002.npy")
    bump = 0.5 * np.abs(state).max()
    state[1:] += bump                              # position 0 right, later ones wrong
    np.save(folder / "hidden_002.npy", state)
    run(qtbot, window, section.compare_button)
    assert section.status.text().startswith("DIVERGE: layer 2 (blk.1) is the first off")
    assert section.marked is section.rows.records[2]
    assert section.rows.data(section.rows.index(2, 0), BACKGROUND) is not None   # red
    assert section.rows.data(section.rows.index(1, 0), BACKGROUND) is None
    assert section.rows.records[2].max_abs == pytest.approx(bump, rel=1e-6)
    assert section.chart.selected == 2
    assert not section.suspects.isHidden() and "RoPE style" in section.suspects.text()

    window.new_chat()                              # another conversation: nothing stays
    assert section.rows.records == [] and section.status.text() == IDLE
    assert section.chart.count == 0 and section.suspects.isHidden()


def test_a_folder_that_is_no_dump_or_another_models_says_so(qtbot, window, tmp_path,
                                                            monkeypatch):
    section = window.panel.dump
    choose(monkeypatch, tmp_path)
    run(qtbot, window, section.compare_button)
    assert f"{tmp_path} is not a dump: it has no manifest.json" in section.status.text()
    assert section.rows.records == [] and section.compare_button.isEnabled()

    other = tmp_path / "other"        # a model twice as wide, with one layer more
    states = [np.zeros((3, 128), np.float32)] * (LAYERS + 2)
    write_dump(other, Dump("big:7b", np.arange(3), states, None))
    choose(monkeypatch, other)
    run(qtbot, window, section.compare_button)
    text = section.status.text()
    assert f"holds {LAYERS + 2} hidden states of width 128 (its manifest names 'big:7b')" \
        in text
    assert f"has {LAYERS + 1} (the embeddings and one per block) of width 64" in text
    assert text.endswith("(load the model it was written for, or write one of this model "
                         "with Export layer dump…)")

    mine = tmp_path / "mine"           # the user's files: the export leaves them alone
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    choose(monkeypatch, mine)
    run(qtbot, window, section.export_button)
    assert "holds files that are not a dump's (notes.txt); a dump is written to an empty " \
        "or new folder" in section.status.text()
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_cancel_ends_the_worker_and_streaming_refuses(qtbot, window, tmp_path, monkeypatch):
    section, inspector = window.panel.dump, window.inspector
    choose(monkeypatch, tmp_path / "dump")
    section.export_button.click()
    assert not section.progress.isHidden() and not section.export_button.isEnabled()
    section.cancel_button.click()
    assert section.status.text() == "Cancelled." and section.export_button.isEnabled()
    assert inspector.dumps.job is None and section.cancel_button.isHidden()
    qtbot.waitUntil(lambda: not inspector.runner.busy(), timeout=TIMEOUT_MS)
    assert section.status.text() == "Cancelled."          # a late result is not shown

    refused = []

    def click_while_streaming(busy: bool) -> None:
        if busy:
            section.compare_button.click()
            refused.append((inspector.dumps.job, section.status.text()))

    window.controller.busyChanged.connect(click_while_streaming)
    send(qtbot, window, "And again")
    assert refused == [(None, "An answer is streaming: export or compare a layer dump "
                              "when it has ended.")]


def test_a_context_with_an_image_dumps_its_rows_and_compares_clean(
        qtbot, tmp_path, vision_store, photo, monkeypatch):  # noqa: F811
    window = open_window(qtbot, tmp_path / "h.sqlite3", vision_store)
    window.chat.input.attach([str(photo)])
    send_vl(qtbot, window, "What is in this picture?")
    section, context = window.panel.dump, window.inspector.context
    assert image_grids(context)
    folder = tmp_path / "dump"
    folder.mkdir()
    choose(monkeypatch, folder)
    run(qtbot, window, section.export_button)
    assert section.status.text().startswith("Wrote ")
    dump = read_dump(folder)
    np.testing.assert_array_equal(dump.ids, context.ids)
    np.testing.assert_allclose(dump.hidden_states[0][context.image_rows],
                               context.image_embeds, atol=1e-6)   # the picture's own rows
    run(qtbot, window, section.compare_button)
    assert section.status.text().startswith("AGREE: no layer is off")
    state = np.load(folder / "hidden_000.npy")
    state[context.image_rows] *= 1.5                # another engine's image encoder
    np.save(folder / "hidden_000.npy", state)
    run(qtbot, window, section.compare_button)
    assert section.status.text().startswith("DIVERGE: embeddings is the first off")
