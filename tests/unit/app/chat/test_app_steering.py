"""Steering in the window: a control vector added to a chat with its slider steers the
next answer, which the answer and the panel mark (and the history keeps); the reference
check agrees with the steered engine; the slider at 0 steers nothing; a reopened chat
shows its vectors and its steered answers again."""

from __future__ import annotations

import numpy as np

from app.settings.store import Settings
from engine.gguf.control_vector import write_control_vector
from tests.unit.app.inspector.test_app_check import (  # noqa: F401
    TIMEOUT_MS,
    loaded_window,
    send,
    tiny_store,
)


def test_the_slider_steers_the_next_answer_and_marks_it(qtbot, tmp_path, tiny_store):  # noqa: F811
    window = loaded_window(qtbot, Settings(models_dir=str(tiny_store), options={
        "temperature": 0.0, "num_predict": 8}), tmp_path)
    hidden = window.controller.model.gguf.config.text.hidden_size
    rng = np.random.default_rng(0)
    vector = tmp_path / "bright.gguf"
    write_control_vector(vector, {n: rng.standard_normal(hidden) for n in (1, 2)}, "qwen2")
    controller, bar, panel = window.controller, window.chat.steering, window.panel

    plain = send(qtbot, window, "Hello")
    assert plain.steering == ""
    assert window.chat.view.messages[-1].steered.isHidden()
    assert panel.steering_label.isHidden()

    bar.add_vector(str(vector))
    [row] = bar.rows
    row.slider.setValue(250)                                    # strength 2.5
    assert row.value.text() == "+2.50"
    assert controller.control_vectors() == [(str(vector), 2.5)]
    with qtbot.waitSignal(controller.answerDone, timeout=TIMEOUT_MS) as done:
        window.chat.view.messages[-1].buttons["Regenerate"].click()
    steered = done.args[0]
    assert steered.steering == "bright x2.5"
    assert steered.text != plain.text
    answer = window.chat.view.messages[-1]
    assert not answer.steered.isHidden() and answer.steered.text() == "steered: bright x2.5"
    assert not panel.steering_label.isHidden() and "bright x2.5" in panel.steering_label.text()
    stored = controller.history.messages(controller.conversation_id)
    assert stored[-1].role == "assistant" and stored[-1].steering == "bright x2.5"

    # the engine, steered, against the reference with the same vector
    with qtbot.waitSignal(window.checks.checkDone, timeout=TIMEOUT_MS) as checked:
        panel.reference.check_button.click()
    assert checked.args[0].ok

    # the chat reopened: its vector at its strength, its steered answer marked
    conversation = controller.conversation_id
    window.new_chat()
    assert bar.rows == []
    window.open_conversation(conversation)
    assert bar.vectors() == [(str(vector), 2.5)]
    assert window.chat.view.messages[-1].steered.text() == "steered: bright x2.5"
    assert "bright x2.5" in panel.steering_label.text()

    bar.rows[0].slider.setValue(0)                              # at 0: not steered
    with qtbot.waitSignal(controller.answerDone, timeout=TIMEOUT_MS) as done:
        window.chat.view.messages[-1].buttons["Regenerate"].click()
    assert done.args[0].steering == "" and done.args[0].text == plain.text
    assert window.chat.view.messages[-1].steered.isHidden()


def test_llama_cpp_runs_with_the_answers_vectors_and_says_so(qtbot, tmp_path, tiny_store):  # noqa: F811
    window = loaded_window(qtbot, Settings(models_dir=str(tiny_store), options={
        "temperature": 0.0, "num_predict": 4}), tmp_path)
    hidden = window.controller.model.gguf.config.text.hidden_size
    vector = tmp_path / "bright.gguf"
    write_control_vector(vector, {n: np.random.default_rng(0).standard_normal(hidden)
                                  for n in (1, 2)}, "qwen2")
    window.chat.steering.add_vector(str(vector))
    window.chat.steering.rows[0].slider.setValue(250)            # strength 2.5
    send(qtbot, window, "Hello")
    page, inspector = window.panel.opinion, window.inspector

    page.button.click()
    qtbot.waitUntil(lambda: inspector.opinion_job is None, timeout=TIMEOUT_MS)
    assert page.status.text().startswith("AGREE"), page.status.text()
    assert page.status.text().endswith("Both ran steered by the answer's control vectors "
                                       "(bright x2.5).")
    page.layers.button.click()
    qtbot.waitUntil(lambda: inspector.layers_job is None, timeout=TIMEOUT_MS)
    assert page.layers.status.text().startswith("AGREE"), page.layers.status.text()
    assert "Both ran steered by the answer's control vectors (bright x2.5)" in \
        page.layers.status.text()

    window.chat.steering.rows[0].slider.setValue(0)              # the next answer: unsteered
    send(qtbot, window, "Again")
    page.button.click()
    qtbot.waitUntil(lambda: inspector.opinion_job is None, timeout=TIMEOUT_MS)
    assert "steered" not in page.status.text() and page.status.text().startswith("AGREE")


def test_choosing_a_vector_says_what_one_is_and_how_to_make_one(qtbot):
    from PySide6.QtWidgets import QLabel

    from app.chat.steering_bar import SteeringBar, control_vector_dialog

    bar = SteeringBar()
    qtbot.addWidget(bar)
    dialog = control_vector_dialog(bar)
    qtbot.addWidget(dialog)
    note = dialog.findChild(QLabel, "controlVectorHint")
    assert note is not None and "lantern steer" in note.text()
    assert dialog.nameFilters() == ["Control vectors (*.gguf)"]
