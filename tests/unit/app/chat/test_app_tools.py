"""Tools in the app: Settings → Tools round trip, the Toolbox built from it with the real
calculator and a real MCP server over stdio, the user's yes asked on the GUI thread while
the worker waits (allow, deny, Stop), every call shown under the answer, and a crashing
server giving a message while the chat goes on."""

import sys
import threading
from pathlib import Path

import pytest

from app.chat.tool_gate import ToolGate, build_toolbox, describe_call
from app.chat.view import MessageWidget
from app.conversations.history import History
from app.settings.dialog import SettingsDialog
from app.settings.store import Settings
from app.window import MainWindow
from app.workers import GenerateJob
from engine.catalog.importer import import_gguf
from engine.chat.events import DoneEvent, NoticeEvent, ToolCallEvent
from engine.chat.messages import Message
from engine.chat.tool_loop import run_call
from engine.chat.tools import ToolCall, ToolFailed
from engine.store import Store

SERVER = Path(__file__).parents[3] / "fixtures" / "mcp_server.py"
TIMEOUT_MS = 30_000


def server(mode: str = "normal", ask: bool = True) -> dict:
    return {"name": mode, "target": f"{sys.executable} {SERVER} {mode}", "ask": ask}


def in_thread(work):
    """Run ``work`` on a worker thread, as the chat's job does; its outcome when done."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = work()
        except ToolFailed as error:
            outcome["error"] = str(error)
    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_tools_settings_round_trip(qtbot):
    settings = Settings(builtin_tools=True, mcp_servers=[server("normal", ask=False)])
    settings.save()
    assert Settings.load() == settings
    dialog = SettingsDialog(Settings.load())
    qtbot.addWidget(dialog)
    assert dialog.tools.builtin.isChecked()
    dialog.tools.name.setText("web")
    dialog.tools.target.setText("http://127.0.0.1:9/mcp")
    dialog.tools.add_server()
    chosen = dialog.result_settings()
    assert chosen.mcp_servers == [server("normal", ask=False),
                                  {"name": "web", "target": "http://127.0.0.1:9/mcp",
                                   "ask": True}]
    dialog.tools.servers.setCurrentRow(0)
    dialog.tools.remove_server()
    assert [r["name"] for r in dialog.tools.records()] == ["web"]


def test_calculator_call_is_shown_above_the_answer(qtbot):
    box, notes = build_toolbox(Settings(builtin_tools=True))
    assert notes == [] and [t.name for t in box.tools] == ["calculator", "current_time"]
    event = run_call(ToolCall("calculator", {"expression": "12345*6789"}), [], box.runner())
    answer = MessageWidget("assistant", "Lantern")
    qtbot.addWidget(answer)
    answer.add_tool_call(*describe_call(event))
    [label] = answer.tool_calls
    assert label.text() == "Tool call: calculator(expression=12345*6789) → 83810205"
    # in the order they came: the call, then the answer written from its result
    answer.set_text("It is 83810205.", immediate=True)
    answer.show()
    assert label.geometry().bottom() < answer._blocks[0].geometry().top()


def test_a_cut_result_says_so_above_the_answer(qtbot):
    result = "The quick brown fox. " * 40 + "\n[cut: 200 of 300164 tokens shown]"
    event = ToolCallEvent("page", {"size": 2_000_000}, result, shown_tokens=200,
                          total_tokens=300164)
    answer = MessageWidget("assistant", "Lantern")
    qtbot.addWidget(answer)
    answer.add_tool_call(*describe_call(event))
    [label] = answer.tool_calls
    assert label.text().startswith("Tool call: page(size=2000000) → The quick brown fox.")
    assert label.text().endswith("… [cut: 200 of 300164 tokens shown]")
    assert label.toolTip().endswith("[cut: 200 of 300164 tokens shown]")


@pytest.mark.parametrize("allowed", [True, False])
def test_the_window_asks_before_an_mcp_call(qtbot, tmp_path, allowed):
    window = MainWindow(Settings(models_dir=str(tmp_path)), History(tmp_path / "h.db"),
                        auto_load=False)
    qtbot.addWidget(window)
    gate = window.controller.tools
    box, notes = gate.prepare(Settings(mcp_servers=[server()]))
    assert notes == [] and "secret_word" in [t.name for t in box.tools]
    cancel = threading.Event()
    run = box.runner(lambda call, where: gate.confirm(call, where, cancel))
    thread, outcome = in_thread(lambda: run(ToolCall("secret_word", {})))
    qtbot.waitUntil(lambda: window._tool_question is not None
                    and window._tool_question.isVisible(), timeout=TIMEOUT_MS)
    question = window._tool_question
    assert "secret_word on MCP server normal" in question.text()
    [button] = [b for b in question.buttons() if b.text() == ("Allow" if allowed else "Deny")]
    button.click()
    qtbot.waitUntil(lambda: not thread.is_alive(), timeout=TIMEOUT_MS)
    if allowed:
        assert outcome == {"value": "heliotrope"}
    else:
        assert outcome == {"error": "the user did not allow secret_word"}


def test_stop_answers_a_waiting_question_with_no(qtbot):
    gate = ToolGate()
    box, _ = build_toolbox(Settings(mcp_servers=[server()]))
    asked = []
    gate.confirmRequested.connect(lambda call, where, answer: asked.append(answer))
    cancel = threading.Event()
    run = box.runner(lambda call, where: gate.confirm(call, where, cancel))
    thread, outcome = in_thread(lambda: run(ToolCall("secret_word", {})))
    qtbot.waitUntil(lambda: bool(asked), timeout=TIMEOUT_MS)
    cancel.set()
    thread.join(10)
    assert outcome == {"error": "the user did not allow secret_word"}


def test_a_crashing_server_is_a_message_and_the_chat_goes_on(qtbot):
    box, notes = build_toolbox(Settings(mcp_servers=[
        server("crash", ask=False),
        {"name": "gone", "target": "/nonexistent/lantern-mcp", "ask": True}]))
    assert len(notes) == 1 and "MCP server gone" in notes[0]
    assert "Settings → Tools" in notes[0]
    messages: list[Message] = []
    event = run_call(ToolCall("multiply", {"a": 1, "b": 2}), messages, box.runner())
    assert event.failed and "out of cheese" in event.result
    assert messages and messages[-1].role == "tool"      # the model reads the failure
    line, full = describe_call(event)
    assert line.startswith("Tool call: multiply(a=1, b=2) failed: ") and "out of cheese" in full


def done(text: str) -> DoneEvent:
    return DoneEvent("stop", text, "", 0, 0, 0, 0, 0, 0)


def test_an_answer_with_tool_rounds_is_done_once(qtbot):
    """The loop's first round ends in a DoneEvent before its call runs; the app's answer
    ends only with the last round."""
    first = done('<tool_call>{"name": "calculator"}</tool_call>')
    call = ToolCallEvent("calculator", {"expression": "2+2"}, "4")
    last = done("It is 4.")
    job = GenerateJob(lambda: iter([first, call, NoticeEvent("n"), last]), lambda: None)
    seen = []
    job.done.connect(lambda event: seen.append(("done", event.text)))
    job.toolCall.connect(lambda event: seen.append(("tool", event.result)))
    job.notice.connect(lambda text: seen.append(("notice", text)))
    job.work()
    assert seen == [("tool", "4"), ("notice", "n"), ("done", "It is 4.")]


# the system prompt of tests/unit/tools/test_tools.py: without it the 1.5B model calls the
# calculator again after each result
SYSTEM = ("You are a helpful assistant. When a tool result arrives, answer the user's "
          "question with it in one sentence; never call the same tool twice.")


def test_the_15b_model_calls_the_calculator_in_the_window(qtbot, tmp_path, demo_15b):
    root = tmp_path / "models"
    root.mkdir()
    import_gguf(Store.open(root), demo_15b, "qwen2.5-coder:1.5b")
    settings = Settings(models_dir=str(root), options={"temperature": 0, "num_predict": 128},
                        system=SYSTEM, num_ctx=2048, builtin_tools=True, speculate="off")
    window = MainWindow(settings, History(tmp_path / "h.db"), auto_load=False)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.models.row_of("qwen2.5-coder:1.5b") >= 0, timeout=60_000)
    window.models_controller.load(window.models.entry(window.models.row_of("qwen2.5-coder:1.5b")))
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=120_000)
    window.chat.input.editor.setPlainText("What is 12345 * 6789?")
    window.chat.input.submit()
    qtbot.waitUntil(lambda: window.controller.busy, timeout=10_000)
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=240_000)
    answer = window.chat.view.messages[-1]
    assert [label.text() for label in answer.tool_calls] == [
        "Tool call: calculator(expression=12345 * 6789) → 83810205"]
    assert "83810205" in answer.text.replace(",", "")


def test_always_allow_asks_no_more_for_that_tool_and_is_kept(qtbot, tmp_path):
    # Allow had no "always allow this tool"
    window = MainWindow(Settings(models_dir=str(tmp_path)), History(tmp_path / "h.db"),
                        auto_load=False)
    qtbot.addWidget(window)
    gate = window.controller.tools
    box, _ = gate.prepare(Settings(mcp_servers=[server()]))
    cancel = threading.Event()
    run = box.runner(lambda call, where: gate.confirm(call, where, cancel))
    thread, outcome = in_thread(lambda: run(ToolCall("secret_word", {})))
    qtbot.waitUntil(lambda: window._tool_question is not None
                    and window._tool_question.isVisible(), timeout=TIMEOUT_MS)
    [always] = [b for b in window._tool_question.buttons()
                if b.text() == "Always allow secret_word"]
    always.click()
    qtbot.waitUntil(lambda: not thread.is_alive(), timeout=TIMEOUT_MS)
    assert outcome == {"value": "heliotrope"}
    qtbot.waitUntil(lambda: window.settings.allowed_tools == ["secret_word"], timeout=5000)
    assert Settings.load().allowed_tools == ["secret_word"]
    asked = []
    gate.confirmRequested.connect(lambda *args: asked.append(args))
    thread, outcome = in_thread(lambda: run(ToolCall("secret_word", {})))
    thread.join(TIMEOUT_MS / 1000)
    assert outcome == {"value": "heliotrope"} and asked == []
    dialog = SettingsDialog(window.settings)
    qtbot.addWidget(dialog)
    assert "secret_word" in dialog.tools.allowed_label.text()
    dialog.tools.ask_again.click()
    assert dialog.result_settings().allowed_tools == []


def test_settings_tests_an_mcp_server_and_lists_its_tools(qtbot):
    # an MCP server could not be tested in Settings, nor its tools seen
    from app.workers import JobRunner

    runner = JobRunner()
    dialog = SettingsDialog(Settings(mcp_servers=[server()]), runner=runner)
    qtbot.addWidget(dialog)
    tools = dialog.tools
    said_on = []                      # the verdict is widget work: the GUI thread's alone
    say = tools._say
    tools._say = lambda text, ok: (said_on.append(threading.current_thread()), say(text, ok))
    assert not tools.test_button.isEnabled()            # nothing selected yet
    tools.servers.setCurrentRow(0)
    tools.test_button.click()
    qtbot.waitUntil(lambda: "answers with" in tools.status.text(), timeout=TIMEOUT_MS)
    assert "secret_word" in tools.status.text() and tools.status.property("ok") == "yes"
    assert "secret_word" in tools.servers.item(0).toolTip()
    assert said_on and set(said_on) == {threading.main_thread()}
    from PySide6.QtCore import Qt

    missing = {"name": "missing", "target": str(SERVER.parent / "no-such-server"), "ask": True}
    tools.servers.item(0).setData(Qt.UserRole, missing)
    tools.test_button.click()
    qtbot.waitUntil(lambda: tools.status.property("ok") == "no", timeout=TIMEOUT_MS)
