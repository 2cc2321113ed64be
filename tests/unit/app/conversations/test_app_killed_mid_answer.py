"""``kill -9`` of the app mid-answer loses nothing already shown: a child process runs the
real window, streams an answer and prints what the answer's bubble holds as it grows; the
test kills it without warning, and after a restart the conversation has the partial
answer (at least everything printed), marked interrupted."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.conversations.history import History
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.importer import import_gguf
from engine.store import Store
from tests.fixtures.synthetic_gguf import write_model

ROOT = Path(__file__).resolve().parents[4]
SHOWN_BEFORE_KILL = 60          # characters of the answer on screen before the kill
TIMEOUT_S = 120


def settings_for(models: Path) -> Settings:
    # a long answer (a random model rarely stops): it streams while the test kills it
    return Settings(models_dir=str(models),
                    options={"temperature": 0.0, "num_predict": 100_000})


@pytest.fixture
def tiny_store(tmp_path) -> Path:
    root = tmp_path / "models"
    # seed 3: this random model answers "Hello" with tokens (not a stop token at once)
    import_gguf(Store.open(root), write_model(tmp_path / "t.gguf", "qwen2", seed=3), "tiny")
    return root


def child(models: Path, history: Path) -> None:
    """The app process: load, send, then print the streamed bubble's text every 10 ms."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv)
    window = MainWindow(settings_for(models), History(history), auto_load=False)
    window.show()

    loading: list[bool] = []

    def step() -> None:
        controller, models_list = window.controller, window.models
        if not loading and models_list.row_of("tiny:latest") >= 0:
            loading.append(True)
            window.models_controller.load(models_list.entry(models_list.row_of("tiny:latest")))
        elif controller.model is not None and controller.conversation_id is None:
            window.chat.input.editor.setPlainText("Hello")
            window.chat.input.submit()
        elif window.chat.answer is not None:
            print(json.dumps({"conversation": controller.conversation_id,
                              "shown": window.chat.answer.text}), flush=True)

    timer = QTimer(interval=10, timeout=step)
    timer.start()
    app.exec()


def test_kill_9_mid_answer_keeps_what_was_shown(qtbot, tmp_path, tiny_store):
    history = tmp_path / "h.sqlite3"
    process = subprocess.Popen(
        [sys.executable, __file__, str(tiny_store), str(history)], cwd=ROOT,
        stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"})
    last: dict = {}
    deadline = time.monotonic() + TIMEOUT_S
    try:
        for line in process.stdout:
            last = json.loads(line)
            if len(last["shown"]) >= SHOWN_BEFORE_KILL or time.monotonic() > deadline:
                break
    finally:
        process.kill()          # SIGKILL: no closeEvent, no atexit, nothing flushed
        process.wait(TIMEOUT_S)
    assert process.returncode == -signal.SIGKILL
    assert len(last.get("shown", "")) >= SHOWN_BEFORE_KILL, "the answer did not stream"

    stored = History(history).messages(last["conversation"])
    assert [m.role for m in stored] == ["user", "assistant"]
    answer = stored[-1]
    assert not answer.complete
    assert answer.content.startswith(last["shown"])

    # the restarted app shows it, marked interrupted
    window = MainWindow(settings_for(tiny_store), History(history), auto_load=False)
    qtbot.addWidget(window)
    window.open_conversation(last["conversation"])
    bubble = window.chat.view.messages[-1]
    assert bubble.role == "assistant" and bubble.text == answer.content
    assert bubble.status.text() == "interrupted"


if __name__ == "__main__":
    child(Path(sys.argv[1]), Path(sys.argv[2]))
