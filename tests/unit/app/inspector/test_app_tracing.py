"""The Tracing tab in the window: the latest message is the clean text; a corrupted copy
of another token count is refused with the counts named and nothing runs; a trace on a
tiny model shows exactly engine.inspect.tracing's numbers (answer, rival, differences,
the map and its hover); cancel ends the job; an answer that starts cancels it; another
conversation empties the tab; the token counts wait for the tab to be on show (each is
an exchange with the tokenizer's process); an image message traces with its image in both
prompts, its patch groups as labelled columns, exactly as the engine does; the panel's tab
names, the Tracing tab's among them, are whole at the panel's opening width."""

from __future__ import annotations

import numpy as np
import pytest

from app.inspector.panel import DebugPanel
from app.inspector.trace_heat import LABEL_WIDTH, ROW_HEIGHT, SCALE_HEIGHT
from app.settings.store import Settings
from app.window import PANEL_WIDTH
from engine.chat.messages import Message
from engine.inspect.occlusion import fitting_patch_group
from engine.inspect.tracing import IMAGE_COLUMNS, noised, trace
from tests.unit.app.chat.test_app_images import open_window, photo, vision_store  # noqa: F401
from tests.unit.app.chat.test_app_images import send as send_vl
from tests.unit.app.inspector.test_app_check import (  # noqa: F401
    LAYERS,
    TIMEOUT_MS,
    loaded_window,
    send,
    tiny_store,
)

CLEAN = "Hello world the thing"


def same_length_corruption(model, text: str) -> str:
    """``text`` with one word replaced by another of the same token count."""
    words = text.split()

    def count(t: str) -> int:
        return len(model.tokenize_chat([Message("user", t)]).ids)

    for i, candidate in ((i, c) for i in range(len(words)) for c in ("the", "a", "cat", "one")):
        changed = " ".join(words[:i] + [candidate] + words[i + 1:])
        if changed != text and count(changed) == count(text):
            return changed
    raise AssertionError("no same-length corruption of the test text")


@pytest.fixture
def window(qtbot, tmp_path, tiny_store):  # noqa: F811
    window = loaded_window(qtbot, Settings(models_dir=str(tiny_store), options={
        "temperature": 0.0, "num_predict": 3}), tmp_path)
    send(qtbot, window, CLEAN)
    window.panel.tabs.setCurrentWidget(window.panel.tracing)
    return window


def ids(window, text: str) -> list[int]:
    return list(window.controller.model.tokenize_chat([Message("user", text)]).ids)


def test_a_longer_corruption_is_refused_with_the_counts(qtbot, window):
    page, tracer = window.panel.tracing, window.inspector.tracer
    assert page.clean.toPlainText() == CLEAN and page.corrupt_text() == CLEAN
    assert "Change one word" in page.counts.text() and not page.button.isEnabled()
    page.corrupt.setPlainText(CLEAN + " and more words here")
    clean, longer = len(ids(window, CLEAN)), len(ids(window, page.corrupt_text()))
    assert longer != clean
    assert page.counts.text().startswith(f"The corrupted text has {longer} tokens, the clean "
                                         f"one {clean}: change one word")
    assert not page.button.isEnabled()
    page.traceRequested.emit()              # even if asked: nothing runs
    assert tracer.job is None and page.progress.isHidden()


def test_the_trace_shows_the_engines_numbers(qtbot, window):
    page, tracer = window.panel.tracing, window.inspector.tracer
    corrupt = same_length_corruption(window.controller.model, CLEAN)
    page.corrupt.setPlainText(corrupt)
    assert page.counts.text().startswith("Both texts have") and page.button.isEnabled()
    page.button.click()
    qtbot.waitUntil(lambda: tracer.job is None and page.trace is not None, timeout=TIMEOUT_MS)
    model = window.controller.model
    direct = trace(model.gguf, ids(window, CLEAN), ids(window, corrupt))
    shown = page.trace
    assert (shown.answer, shown.rival) == (direct.answer, direct.rival)
    assert shown.clean_diff == direct.clean_diff and shown.corrupt_diff == direct.corrupt_diff
    np.testing.assert_array_equal(page.heat.restored, direct.restored)
    assert page.heat.restored.shape == (LAYERS + 1, len(direct.clean))
    piece = model.tokenizer.id_to_piece
    summary = page.summary.text()
    assert f"{direct.clean_diff:+.3f} clean" in summary
    assert f"{direct.corrupt_diff:+.3f} corrupted" in summary
    assert "rival" in summary and piece(direct.rival).strip() in summary
    changed = np.flatnonzero(np.array(direct.clean) != np.array(direct.corrupt)).tolist()
    assert [i for i, c in enumerate(page.heat.changed) if c] == changed
    assert "/" in page.heat.tokens[changed[0]]
    # hovering the changed position's cell at block 1 names it and its value
    page.heat.resize(600, page.heat.height())
    x = LABEL_WIDTH + (changed[0] + 0.5) * page.heat._column_width()
    where = page.heat.at(x, SCALE_HEIGHT + 1.5 * ROW_HEIGHT)
    assert where == (1, changed[0])
    assert page.heat.tip(*where).startswith(f"block 1 (L1), position {changed[0]} ")
    assert page.heat.tip(*where).endswith(f"{direct.restored[1, changed[0]]:.1%} of the "
                                          "difference restored")


def test_cancel_an_answer_and_another_conversation(qtbot, window):
    page, tracer = window.panel.tracing, window.inspector.tracer
    page.corrupt.setPlainText(same_length_corruption(window.controller.model, CLEAN))
    page.button.click()
    job = tracer.job
    assert job is not None and not page.cancel_button.isHidden()
    page.cancel_button.click()
    assert tracer.job is None and page.status.text() == "Cancelled." and page.button.isEnabled()
    qtbot.waitUntil(lambda: job.ended.is_set(), timeout=TIMEOUT_MS)
    assert page.trace is None

    page.button.click()                      # an answer that starts cancels the trace
    send(qtbot, window, CLEAN)
    assert tracer.job is None and "answer is streaming" in page.status.text()
    assert page.corrupt_text() != CLEAN      # the same message: the user's edit stays

    send(qtbot, window, "Another message")   # a new message is the new clean text
    assert page.clean.toPlainText() == page.corrupt_text() == "Another message"

    page.corrupt.setPlainText("Another thing")
    window.new_chat()                        # another conversation: the tab empties
    assert page.clean.toPlainText() == "" and page.corrupt.isReadOnly()
    assert "Send a message first" in page.status.text() and not page.button.isEnabled()
    assert page.summary.text() == "" and page.heat.restored.size == 0


def test_an_image_message_traces_as_the_engine_does(qtbot, tmp_path, vision_store,  # noqa: F811
                                                    photo):  # noqa: F811
    window = open_window(qtbot, tmp_path / "h.sqlite3", vision_store)
    window.chat.input.attach([str(photo)])
    send_vl(qtbot, window, "What is in this picture?")
    page, tracer = window.panel.tracing, window.inspector.tracer
    window.panel.tabs.setCurrentWidget(page)
    assert page.clean.toPlainText() == "What is in this picture?" and not page.corrupt.isReadOnly()
    assert "image goes with both texts" in page.image_note.text()
    page.plain.setChecked(True)                      # no template: no place for the image
    assert "Plain text cannot carry" in page.counts.text() and not page.button.isEnabled()
    page.plain.setChecked(False)
    page.corrupt.setPlainText("What is in that picture?")
    assert "tokens besides the image: ready" in page.counts.text() and page.button.isEnabled()
    page.button.click()
    qtbot.waitUntil(lambda: tracer.job is None and page.trace is not None, timeout=TIMEOUT_MS)
    model = window.controller.model
    image = model.prepare_image(str(photo), window.controller.settings.max_pixels)
    clean, corrupt = (model.tokenize_chat([Message("user", t, (image,))])
                      for t in ("What is in this picture?", "What is in that picture?"))
    group = fitting_patch_group(clean, len(clean), IMAGE_COLUMNS)
    direct = trace(model.gguf, clean, corrupt, patch_group=group)
    shown = page.trace
    assert (shown.answer, shown.rival, shown.units) == (direct.answer, direct.rival, direct.units)
    np.testing.assert_array_equal(page.heat.restored, direct.restored)
    assert group > 1 and len(direct.units) < len(clean)     # patch groups, a column each
    [grid] = direct.images
    columns = [n for n in range(len(direct.units)) if direct.patch_block(n) is not None]
    assert len(columns) == -(-grid.height // group) * -(-grid.width // group)
    first = columns[0]
    assert page.heat.tokens[first] == f"img 1 r0-{group - 1} c0-{group - 1}"
    assert not page.heat.changed[first] and any(page.heat.changed)
    assert page.heat.tip(2, first) == (f"block 2 (L2), image 1, patch rows 0-{group - 1}, "
                                       f"columns 0-{group - 1}: {direct.restored[2, first]:.1%}"
                                       " of the difference restored")
    assert f"restored {group} x {group} at a time" in page.summary.text()
    # the word changed after the image: the image is the same in both runs
    assert not direct.restored[:, columns].any() and "brings nothing back" in page.summary.text()


def test_the_same_question_over_a_noised_picture(qtbot, tmp_path, vision_store,  # noqa: F811
                                                 photo):  # noqa: F811
    window = open_window(qtbot, tmp_path / "h.sqlite3", vision_store)
    page, tracer = window.panel.tracing, window.inspector.tracer
    assert page.noise.isHidden()                    # no picture yet
    window.chat.input.attach([str(photo)])
    send_vl(qtbot, window, "What is in this picture?")
    assert page.counts.text() == ""                 # counted when the tab is on show
    window.panel.tabs.setCurrentWidget(page)
    assert not page.noise.isHidden() and not page.button.isEnabled()
    assert "or noise the picture" in page.counts.text()
    page.noise.setChecked(True)                      # the same words, the picture noised
    assert "picture noised: ready" in page.counts.text() and page.button.isEnabled()
    page.button.click()
    qtbot.waitUntil(lambda: tracer.job is None and page.trace is not None, timeout=TIMEOUT_MS)
    model = window.controller.model
    image = model.prepare_image(str(photo), window.controller.settings.max_pixels)
    clean, corrupt = (model.tokenize_chat([Message("user", "What is in this picture?", (p,))])
                      for p in (image, noised(image)))
    direct = trace(model.gguf, clean, corrupt,
                   patch_group=fitting_patch_group(clean, len(clean), IMAGE_COLUMNS))
    np.testing.assert_array_equal(page.heat.restored, direct.restored)
    columns = [n for n in range(len(direct.units)) if direct.patch_block(n) is not None]
    assert np.abs(direct.restored[:, columns]).max() > 1e-3       # the patches carry it
    assert "brings nothing back" not in page.summary.text() and not any(page.heat.changed)
    window.new_chat()
    assert page.noise.isHidden() and not page.noise.isChecked()


def test_a_closed_panel_counts_when_it_opens_on_the_tab(qtbot, window):
    """Closed (its X button) on the Tracing tab, the panel counts nothing; opened again,
    the tab counts the new message at once."""
    page = window.panel.tracing
    window.show()
    window.panel.show()
    qtbot.waitExposed(window)
    window.panel.hide()
    send(qtbot, window, "Another question here")
    assert page.clean.toPlainText() == "Another question here" and page.counts.text() == ""
    window.panel.show()
    assert "Change one word" in page.counts.text()


def test_every_tab_name_is_whole_at_the_panels_width(qtbot):
    panel = DebugPanel()
    qtbot.addWidget(panel)
    panel.resize(PANEL_WIDTH, 600)
    panel.show()
    qtbot.waitUntil(lambda: panel.page_buttons.width() == PANEL_WIDTH)
    buttons = panel.page_buttons.buttons()
    assert "Tracing" in [button.text() for button in buttons]
    assert all(button.width() >= button.sizeHint().width() for button in buttons)  # whole
