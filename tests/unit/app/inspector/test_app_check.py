"""The Reference tab: "Check against reference" on a tiny model's last prompt gives one
row per layer (embeddings + blocks), both top-5 lists side by side and a green verdict;
sending waits while it runs and the chat goes on afterwards. A report with a layer off
is shown red, naming that layer."""

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.conversations.history import History
from app.inspector.panel import DebugPanel
from app.inspector.reference_page import FAILED_COLOUR
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.importer import import_gguf
from engine.reference import layer_label
from engine.runtime.check import CheckReport, LayerCheck, TopCandidate
from engine.store import Store
from tests.fixtures.synthetic_gguf import TextSpec, write_model

TIMEOUT_MS = 60_000
LAYERS = 3


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("check") / "models"
    gguf = write_model(root.parent / "t.gguf", "qwen2", TextSpec(layers=LAYERS), seed=3)
    import_gguf(Store.open(root), gguf, "tiny")
    return root


def loaded_window(qtbot, settings: Settings, tmp_path: Path) -> MainWindow:
    """A window on the tiny store with its model loaded."""
    window = MainWindow(settings, History(tmp_path / "h.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.models.row_of("tiny:latest") >= 0, timeout=TIMEOUT_MS)
    window.models_controller.load(window.models.entry(window.models.row_of("tiny:latest")))
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=TIMEOUT_MS)
    return window


def send(qtbot, window: MainWindow, text: str):
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        window.chat.input.editor.setPlainText(text)
        window.chat.input.submit()
    return done.args[0]


def test_check_shows_every_layer_a_green_verdict_and_the_chat_goes_on(qtbot, tmp_path,
                                                                       tiny_store):
    window = loaded_window(qtbot, Settings(models_dir=str(tiny_store),
                                           options={"temperature": 0.0, "num_predict": 4}),
                           tmp_path)
    first = send(qtbot, window, "Hello")
    assert window.panel.prompt.prompt_table.isColumnHidden(3)             # 1-D positions: no t·h·w

    panel = window.panel
    with qtbot.waitSignal(window.checks.checkDone, timeout=TIMEOUT_MS) as checked:
        panel.reference.check_button.click()
        assert not panel.reference.check_button.isEnabled()                  # running...
        assert not window.chat.input.send_button.isEnabled()       # ...and sending waits
    report = checked.args[0]
    assert report.ok and report.n_tokens == first.prompt_eval_count
    assert panel.reference.check_model.rowCount() == LAYERS + 1
    assert [r.label for r in panel.reference.check_model.records][0] == "embeddings"
    verdict = panel.reference.verdict
    assert verdict.property("ok") == "yes" and "matches" in verdict.text()
    pairs = panel.reference.pair_model.records
    assert len(pairs) == 5 and all(p.same for p in pairs)
    assert [p.engine.id for p in pairs] == [c.id for c in report.engine_top]
    window.chat.input.editor.setPlainText("next")         # Send needs a message to send
    assert panel.reference.check_button.isEnabled() and window.chat.input.send_button.isEnabled()

    second = send(qtbot, window, "And again")
    assert second.eval_count == 4 and window.chat.view.messages[-1].text == second.text
    assert [w.role for w in window.chat.view.messages] == ["user", "assistant"] * 2
    assert len(window.controller.session.last_prompt) > report.n_tokens


def test_a_layer_off_is_shown_red_and_named(qtbot):
    panel = DebugPanel()
    qtbot.addWidget(panel)
    stats = (0.0, 1.0, -2.0, 2.0)
    rows = tuple(LayerCheck(layer_label(i), stats, stats, diff, 1e-3)
                 for i, diff in enumerate((0.0, 1e-4, 0.5, 0.9)))
    top = tuple(TopCandidate(i, f"t{i}", 5.0 - i) for i in range(5))
    swapped = (top[1], top[0], *top[2:])
    panel.reference.show_check(CheckReport(rows, top, swapped, max_logit_diff=0.7, exact=True,
                                 n_tokens=9))
    assert panel.reference.verdict.property("ok") == "no"
    assert "layer 2 (blk.1) is the first layer off" in panel.reference.verdict.text()
    assert panel.reference.check_model.index(2, 0).data(Qt.BackgroundRole).color() == FAILED_COLOUR
    assert panel.reference.check_model.index(1, 0).data(Qt.BackgroundRole) is None
    assert [p.same for p in panel.reference.pair_model.records] == [False, False, True, True, True]


def test_requantized_weights_are_labelled_in_the_status_bar_and_the_verdict(qtbot, tmp_path,
                                                                           tiny_store):
    # no layer statistics: the check builds its own debug decoder, with the same weights
    window = loaded_window(qtbot, Settings(models_dir=str(tiny_store), requantize="q4",
                                           options={"temperature": 0.0, "num_predict": 2}),
                           tmp_path)
    assert window.controller.model.decoder.requantization.spec == "q4"
    assert "q4 re-quantized, NOT exact" in window.models_view.status_provider.text()
    assert "NOT the GGUF's exact weights" in window.models_view.status_provider.toolTip()
    send(qtbot, window, "Hello")

    with qtbot.waitSignal(window.checks.checkDone, timeout=TIMEOUT_MS) as checked:
        window.panel.reference.check_button.click()
    report = checked.args[0]
    assert report.requantized == "q4"
    assert not report.ok  # 4-bit rounding of random weights: layers move past tolerance
    assert "Expected: the weights are re-quantized to q4" in window.panel.reference.verdict.text()
