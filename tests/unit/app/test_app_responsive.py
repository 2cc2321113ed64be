"""The window never waits for a worker: switching conversation, Ctrl+N, switching model or
closing while an answer is being computed returns at once. Switching conversation or Ctrl+N
lets the answer go on in the background without a signal of it reaching the conversation
now on screen; switching model or closing gives it up, and its worker ends promptly by
itself (a long prefill is stopped mid-run)."""

import os
import time
from pathlib import Path

import pytest
import shiboken6

from app.conversations.history import History
from app.settings.store import Settings
from app.window import MainWindow
from app.workers import GenerateJob
from engine.catalog.importer import import_gguf
from engine.store import Store
from tests.fixtures.synthetic_gguf import TextSpec, write_model

# each action's time is judged (a bound stretched by the machine's load, busy())
pytestmark = pytest.mark.timing

TIMEOUT_MS = 60_000
# an uncancelled long prefill left to finish: seconds alone, minutes beside another test
# process on two cores; a bound against hanging, not on speed
FINISHED_MS = 300_000
NUM_CTX = 8192
# a prompt whose prefill is one ONNX Runtime run of seconds on this model
LONG_PROMPT = " ".join(f"item{i} is {i * 7 % 13}" for i in range(700))
RETURNS_WITHIN_S = 1.0     # generous: the GUI thread does no waiting at all
ENDS_WITHIN_S = 1.0        # the cancelled prefill, measured from the switch


def busy(seconds: float) -> float:
    """A bound stretched by how busy the machine is now: with more runnable threads than
    cores, every thread (the worker's and its uncancelled prefill's alike) gets a share."""
    return seconds * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


@pytest.fixture(scope="module")
def slow_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("slow") / "models"
    root.mkdir()
    spec = TextSpec(hidden=256, heads=4, kv_heads=2, layers=16, ffn=1024, context=NUM_CTX)
    gguf = write_model(root.parent / "slow.gguf", "qwen2", spec)
    import_gguf(Store.open(root), gguf, "slow")
    import_gguf(Store.open(root), gguf, "slow2")
    return root


def open_window(qtbot, tmp_path: Path, store: Path) -> MainWindow:
    settings = Settings(models_dir=str(store), num_ctx=NUM_CTX,
                        options={"temperature": 0.0, "num_predict": 4})
    window = MainWindow(settings, History(tmp_path / "h.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    return window


def load(qtbot, window: MainWindow, name: str) -> None:
    qtbot.waitUntil(lambda: window.models.row_of(name) >= 0, timeout=TIMEOUT_MS)
    window.models_controller.load(window.models.entry(window.models.row_of(name)))
    qtbot.waitUntil(lambda: window.controller.model is not None
                    and window.controller.model.name == name, timeout=TIMEOUT_MS)


def send(window: MainWindow, text: str) -> None:
    window.chat.input.editor.setPlainText(text)
    window.chat.input.submit()


def start_long_answer(qtbot, window: MainWindow, topic: str = "") -> GenerateJob:
    """A new chat whose answer is busy prefilling a long prompt (``topic`` makes it one the
    model's cache does not already hold: an answer left to finish leaves its prompt there)."""
    window.new_chat()
    send(window, topic + LONG_PROMPT)
    job = window.controller.answer.job
    assert job is not None
    qtbot.wait(300)                    # the worker is inside the prefill now
    assert not job.ended.is_set(), "the prefill ended too soon to test a cancel"
    return job


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def assert_ends(qtbot, job: GenerateJob) -> None:
    started = time.perf_counter()
    assert job.ended.wait(busy(ENDS_WITHIN_S)), "the cancelled worker kept running"
    qtbot.waitUntil(lambda: not window_threads_running(job), timeout=2000)
    assert time.perf_counter() - started < busy(ENDS_WITHIN_S) + 2


def window_threads_running(job: GenerateJob) -> bool:
    if not shiboken6.isValid(job):            # destroyed by its runner: its thread ended
        return False
    return job.thread() is not None and job.thread().isRunning()


def test_long_prefill_takes_seconds_uncancelled(qtbot, tmp_path, slow_store):
    # the premise of the other tests: without a cancel this prefill outlasts their bounds
    window = open_window(qtbot, tmp_path, slow_store)
    load(qtbot, window, "slow:latest")
    window.controller.settings.options["num_predict"] = 1
    started = time.perf_counter()
    with qtbot.waitSignal(window.controller.answerDone, timeout=FINISHED_MS):
        send(window, LONG_PROMPT)
    assert time.perf_counter() - started > busy(ENDS_WITHIN_S) + 0.5


def test_switching_conversation_new_chat_and_close_never_wait(qtbot, tmp_path, slow_store):
    window = open_window(qtbot, tmp_path, slow_store)
    load(qtbot, window, "slow:latest")
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        send(window, "Hello")
    first = window.controller.conversation_id
    shown = [(w.role, w.text) for w in window.chat.view.messages]

    # switching conversation mid-answer: it returns at once, the answer goes on in the
    # background and none of it reaches the conversation shown
    job = start_long_answer(qtbot, window)
    answered = window.controller.conversation_id
    assert timed(lambda: window.open_conversation(first)) < busy(RETURNS_WITHIN_S)
    assert window.controller.conversation_id == first and not window.controller.busy
    assert window.controller.answer.conversation == answered and not job.ended.is_set()
    qtbot.waitUntil(lambda: window.controller.answer.conversation is None, timeout=FINISHED_MS)
    qtbot.wait(100)
    assert [(w.role, w.text) for w in window.chat.view.messages] == shown
    answer = window.history.messages(answered)[-1]
    assert answer.role == "assistant" and answer.complete

    # Ctrl+N mid-answer: the same
    job = start_long_answer(qtbot, window, topic="Again: ")
    assert timed(window.new_chat) < busy(RETURNS_WITHIN_S)
    assert window.controller.conversation_id is None and not window.chat.view.messages
    qtbot.waitUntil(lambda: window.controller.answer.conversation is None, timeout=FINISHED_MS)
    assert not window.chat.view.messages

    # the next answer waits for nothing the user can see and is complete
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        send(window, "Hello again")
    assert done.args[0].done_reason == "length"

    # closing the window mid-answer
    job = start_long_answer(qtbot, window, topic="Once more: ")
    assert timed(window.close) < busy(RETURNS_WITHIN_S)
    assert_ends(qtbot, job)


def test_switching_model_mid_answer_interrupts_it_first(qtbot, tmp_path, slow_store):
    window = open_window(qtbot, tmp_path, slow_store)
    load(qtbot, window, "slow:latest")
    window.controller.settings.options["num_predict"] = -1
    send(window, "Count")
    qtbot.waitUntil(lambda: len(window.chat.view.messages[-1].tokens) >= 3,
                    timeout=TIMEOUT_MS)
    job, conversation = window.controller.answer.job, window.controller.conversation_id
    assert timed(lambda: window.models_controller.load(
        window.models.entry(window.models.row_of("slow2:latest")))) < busy(RETURNS_WITHIN_S)
    # the old answer stops before the new model loads, and says why
    assert_ends(qtbot, job)
    answer = window.chat.view.messages[-1]
    assert answer.status.text() == "interrupted by the model switch"
    stored = window.history.messages(conversation)[-1]
    assert not stored.complete and stored.content == answer.text != ""
    qtbot.waitUntil(lambda: window.controller.model is not None
                    and window.controller.model.name == "slow2:latest", timeout=TIMEOUT_MS)


def test_leaving_a_conversation_gives_up_its_reference_check(qtbot, tmp_path, slow_store):
    window = open_window(qtbot, tmp_path, slow_store)
    load(qtbot, window, "slow:latest")
    window.controller.settings.options["num_predict"] = 1
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS):
        send(window, LONG_PROMPT)
    window.panel.reference.check_button.click()
    job = window.controller.check_job
    assert job is not None
    qtbot.wait(300)
    assert not job.ended.is_set(), "the check ended too soon to test a cancel"
    assert timed(window.new_chat) < busy(RETURNS_WITHIN_S)
    assert window.controller.check_job is None and window.chat.input.send_button.text() == "Send"
    assert job.ended.wait(busy(ENDS_WITHIN_S)), "the cancelled check kept running"
    qtbot.wait(100)
    assert window.panel.reference.verdict.text() == ""                 # its result was dropped
