"""How long the Qt event loop stalls while the real window is used: a stall monitor.

A 5 ms timer on the GUI thread records every gap between its ticks; the longest gap of
each scripted action is that action's stall (what a user feels as a frozen window). The
script drives a MainWindow through what a user does: start (the store's models described
on a worker while the window is up), stream an answer, a follow-up and a long answer
(LONG_ANSWER tokens: a frame must not cost more as the answer grows), switch conversation
mid-answer, Ctrl+N mid-answer, switch model mid-answer, run the reference check, inspect
a position, open a long stored conversation, pull a model in the "Get a model" dialog
(from a docker-registry on loopback, a synthetic model of PULL_MB that is removed again),
switch back to the first model mid-answer (the second, larger one dropped), close
mid-answer. Target: no stall over 50 ms, and closing returns within 1 s. Beside
each stall, the CPU time the GUI thread itself used in it: the rest of the stall it
waited (for the GIL held by a worker, or for a core on a busy machine).
A tiny synthetic model with a long prompt stands in by default
(`--models-dir DIR --model NAME --model2 NAME` uses a real store's models). It starts as
the app does: numpy's BLAS threads told not to spin (app/desktop/blas_threads.py), the
process restarted with glibc's huge pages (app/desktop/huge_pages.py), the app's style
sheet applied.

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m benchmarks.ui_stalls
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QElapsedTimer, QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication

if TYPE_CHECKING:
    from app.conversations.history import History
    from app.window import MainWindow
    from tests.fixtures.registry import LocalRegistry

TICK_MS = 5
TARGET_MS = 50.0
CLOSE_TARGET_S = 1.0
LONG_PROMPT = " ".join(f"item{i} is {i * 7 % 13}" for i in range(700))
LONG_CHAT = 100      # exchanges of the stored conversation the window opens
LONG_ANSWER = 600    # tokens of the long answer: what a frame costs as an answer grows
STORY = "Write a very long story about a lantern, at least 2000 words."
PULLED = "lantern-ui-stalls-pull"   # the pulled model's name in the registry and the store


class StackSampler:
    """``--why``: a thread that records every thread's Python stack every millisecond, so
    that each action's longest stall can be told by what the window was running in it
    (a stack that only waits shows the call that handed over to Qt or the GIL) and by
    what the other threads ran meanwhile (the sampler needs the GIL too: few samples in a
    long stall mean one C call held it, and the first sample after names its caller)."""

    def __init__(self) -> None:
        self.gui = threading.get_ident()
        self.samples: list[tuple[float, tuple[str, ...]]] = []
        self.others: list[tuple[float, str, tuple[str, ...]]] = []
        self.running = True
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while self.running:
            self._sample()
            time.sleep(0.001)

    def _sample(self) -> None:
        """One sample of every thread. The frames die with this call: a frame kept while
        the sampler sleeps would keep its locals, a paint event's QPainter among them."""
        now, me = time.monotonic(), threading.get_ident()
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == self.gui:
                self.samples.append((now, _stack(frame)))
            elif ident != me:
                self.others.append((now, names.get(ident, str(ident)), _stack(frame)))

    def explain(self, start: float, end: float, depth: int = 12) -> list[str]:
        """The stacks sampled between ``start`` and ``end`` (monotonic seconds), most
        frequent first, innermost frame first: the GUI thread's, then the other threads'
        up to the first sample after ``end``."""
        from collections import Counter

        counts = Counter(stack[:depth] for at, stack in self.samples if start <= at <= end)
        after = min((at for at, _ in self.samples if at > end), default=end)
        others = Counter((name, stack[:6]) for at, name, stack in self.others
                         if start <= at <= after)
        return [f"{n:4d} x " + " <- ".join(stack) for stack, n in counts.most_common(4)] + [
            f"{n:4d} x [{name}] " + " <- ".join(stack) for (name, stack), n in
            others.most_common(8)]


def _stack(frame: FrameType | None) -> tuple[str, ...]:
    stack = []
    while frame is not None and len(stack) < 40:
        code = frame.f_code
        stack.append(f"{Path(code.co_filename).name}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return tuple(stack)


class CollectorWatch:
    """The garbage collector's passes, timed (``gc.callbacks``): one on the GUI thread
    shows as own CPU time in a stall."""

    def __init__(self) -> None:
        import gc

        self.started = 0.0
        self.longest = 0.0         # ms, of the passes since ``reset``
        gc.callbacks.append(self._event)

    def reset(self) -> None:
        self.longest = 0.0

    def _event(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        else:
            self.longest = max(self.longest, (time.perf_counter() - self.started) * 1000)


def stolen_ms() -> float:
    """CPU time the hypervisor took from this machine's CPUs so far (Linux ``/proc/stat``,
    all CPUs; 0 elsewhere): a thread is charged CPU time while its virtual CPU waits."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return 0.0
    return int(fields[8]) * 1000 / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


class StallMonitor(QObject):
    """The longest gap between ticks of a TICK_MS timer since ``reset``, and the GUI
    thread's own CPU time within that gap; apart, the most own CPU time of any one gap
    (the window's own longest work: on a busy machine the longest gap may be waiting)."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = QElapsedTimer()
        self.timer = QTimer(self)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self._tick)
        self.last = 0
        self.last_cpu = 0.0
        self.longest = 0.0
        self.longest_cpu_ms = 0.0
        self.most_cpu_ms = 0.0
        self.longest_at = (0.0, 0.0)     # monotonic seconds: the longest stall's start, end

    def start(self) -> None:
        self.clock.start()
        self.timer.start()
        self.reset()

    def reset(self) -> None:
        self.last, self.last_cpu = self.clock.elapsed(), time.thread_time()
        self.longest = self.longest_cpu_ms = self.most_cpu_ms = 0.0

    def _tick(self) -> None:
        now, cpu = self.clock.elapsed(), time.thread_time()
        gap, own = float(now - self.last - TICK_MS), (cpu - self.last_cpu) * 1000
        if gap > self.longest:
            self.longest, self.longest_cpu_ms = gap, own
            self.longest_at = (time.monotonic() - (now - self.last) / 1000, time.monotonic())
        self.most_cpu_ms = max(self.most_cpu_ms, own)
        self.last, self.last_cpu = now, cpu


def turn(app: QApplication) -> None:
    """One turn of the event loop as the app's own runs it: widgets given up with
    deleteLater are destroyed too (``processEvents`` alone leaves them)."""
    app.processEvents()
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)


def wait_until(app: QApplication, done: Callable[[], bool], timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("the window did not get there in time")
        turn(app)
        time.sleep(0.001)


def settle(app: QApplication, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        turn(app)
        time.sleep(0.001)


def tiny_store(folder: Path) -> tuple[Path, str, str]:
    from engine.catalog.importer import import_gguf
    from engine.store import Store
    from tests.fixtures.synthetic_gguf import TextSpec, write_model

    root = folder / "models"
    spec = TextSpec(hidden=256, heads=4, kv_heads=2, layers=8, ffn=1024, context=8192)
    gguf = write_model(folder / "slow.gguf", "qwen2", spec)
    for name in ("slow", "slow2"):
        import_gguf(Store.open(root), gguf, name)
    return root, "slow:latest", "slow2:latest"


def described(window: MainWindow) -> bool:
    """The store's scan is over: every model listed and opened (or found unusable)."""
    entries = window.models.entries
    scan = window.models_controller.scan_job
    return scan is not None and scan.ended.is_set() and bool(entries) \
        and all(e.checked for e in entries)


def long_conversation(history: History) -> int:
    """A stored chat of LONG_CHAT exchanges, each answer with a code block and its tokens
    saved (four characters a token), as a long day's chat leaves it."""
    from app.conversations.history import StoredMessage

    conversation = history.create("a long chat", "").id
    for n in range(LONG_CHAT):
        history.add(conversation, "user", f"Question {n}: how do I sort a list by length?")
        text = (f"Answer {n}: give `sorted` a key:\n\n```python\nsorted(items, key=len)\n"
                "```\n\nIt returns a **new** list; `items.sort(key=len)` sorts in place.")
        pieces = [text[i:i + 4] for i in range(0, len(text), 4)]
        rows = tuple({"token": p, "text": p, "logprob": -0.5, "top": [[p, -0.5]]}
                     for p in pieces)
        history.add_message(conversation, StoredMessage(0, "assistant", text, (), True,
                                                        logprobs=rows))
    return conversation


def pull_source(folder: Path) -> tuple[LocalRegistry, str]:
    """A docker-registry on loopback serving a synthetic model (about 200 MB of F32
    weights: the download takes seconds, its progress reaches the dialog many times)."""
    from engine.catalog.importer import import_gguf
    from engine.store import Store
    from tests.fixtures.registry import LocalRegistry
    from tests.fixtures.synthetic_gguf import TextSpec, write_model

    spec = TextSpec(hidden=768, heads=12, kv_heads=4, layers=6, ffn=3072)
    scratch = Store.open(folder / "pull-source")
    import_gguf(scratch, write_model(folder / "pulled.gguf", "qwen2", spec), PULLED)
    registry = LocalRegistry.start(folder / "registry")
    registry.push_model(scratch, PULLED, f"library/{PULLED}", "latest")
    return registry, f"{registry.host}/library/{PULLED}"


def main() -> int:
    from app.launcher import window_process

    window_process()                    # as the app's start does
    compile_sources()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir")
    parser.add_argument("--model", help="the model to chat with (with --models-dir)")
    parser.add_argument("--model2", help="the model to switch to (with --models-dir)")
    parser.add_argument("--why", type=float, nargs="?", const=TARGET_MS, metavar="MS",
                        help="print the threads' Python stacks in each action's longest "
                             "stall over MS (default: the target)")
    args = parser.parse_args()
    sampler = StackSampler() if args.why is not None else None

    from app.desktop.memory import merge_freed_blocks

    merge_freed_blocks()                # as app.main does at start
    app = QApplication.instance() or QApplication(sys.argv)
    from app.desktop import theme

    theme.apply(app, dark=False)        # the app's style sheet: it is what paints a frame
    scratch = Path(tempfile.mkdtemp(prefix="ui-stalls-"))
    try:                                # (the pulled model's registry alone is 400 MB)
        return run_script(app, args, scratch, sampler)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def compile_sources() -> None:
    """Byte-compile the app and the engine first, as installing them does: a module edited
    since the last run is otherwise compiled where it is first imported, maybe on the GUI
    thread inside a measured action (a first run after an edit measured the compiler)."""
    root = Path(__file__).resolve().parent.parent
    for package in ("app", "engine"):
        compileall.compile_dir(root / package, quiet=1)


def run_script(app: QApplication, args: argparse.Namespace, scratch: Path,
               sampler: StackSampler | None) -> int:
    """Drive the window through the script in ``scratch``; print each action's stalls;
    0 when every action met the target."""
    from app.conversations.history import History
    from app.desktop.memory import freeze_startup_objects
    from app.settings.store import Settings
    from app.window import MainWindow
    from app.workers import wait_for_all
    from engine.store.copy_remove import remove_model

    if args.models_dir:
        models, first, second = Path(args.models_dir), args.model, args.model2
    else:
        models, first, second = tiny_store(scratch)
    registry, pulled_name = pull_source(scratch)
    monitor = StallMonitor()
    collector = CollectorWatch()
    monitor.start()
    history = History(scratch / "h.sqlite3")
    long_chat = long_conversation(history)
    window = MainWindow(Settings(models_dir=str(models), num_ctx=8192,
                                 options={"temperature": 0.0, "num_predict": 64}),
                        history, auto_load=False)
    freeze_startup_objects()            # as app.main does before the window shows
    window.show()
    results: list[tuple[str, float, float, float, float, float]] = []

    def measure(name: str, action: Callable[[], None], until: Callable[[], bool],
                after_s: float = 0.3) -> None:
        monitor.reset()
        collector.reset()
        stolen = stolen_ms()
        action()
        wait_until(app, until)
        settle(app, after_s)
        results.append((name, monitor.longest, monitor.longest_cpu_ms, monitor.most_cpu_ms,
                        collector.longest, stolen_ms() - stolen))
        if sampler is not None and monitor.longest > args.why:
            print(f"{name}: {monitor.longest:.0f} ms", *sampler.explain(*monitor.longest_at),
                  sep="\n  ")

    def load(name: str) -> None:
        window.models_controller.load(window.models.entry(window.models.row_of(name)))

    def send(text: str) -> None:
        window.chat.input.editor.setPlainText(text)
        window.chat.input.submit()

    controller = window.controller
    measure("start", lambda: None, lambda: described(window))
    measure("load the model", lambda: load(first),
            lambda: controller.model is not None and controller.model.name == first)
    measure("stream the first answer", lambda: send("Hello"), lambda: not controller.busy)
    measure("stream a follow-up answer", lambda: send("Again"), lambda: not controller.busy)
    earlier = controller.conversation_id
    window.new_chat()
    controller.set_conversation_settings("", {"num_predict": LONG_ANSWER})
    measure(f"stream a {LONG_ANSWER}-token answer", lambda: send(STORY),
            lambda: not controller.busy)
    window.open_conversation(earlier)

    def mid_answer() -> None:
        wait_until(app, lambda: controller.answer.conversation is None)   # one answer at a time
        window.new_chat()
        send(LONG_PROMPT)
        settle(app, 0.3)

    mid_answer()
    measure("switch conversation mid-answer", lambda: window.open_conversation(earlier),
            lambda: True, after_s=1.0)
    mid_answer()
    measure("Ctrl+N mid-answer", window.new_chat, lambda: True, after_s=1.0)
    wait_until(app, lambda: controller.answer.conversation is None)  # it finishes in the background
    window.open_conversation(earlier)
    measure("reference check", window.panel.reference.check_button.click,
            lambda: not controller.checking)
    send("Go on")
    wait_until(app, lambda: not controller.busy)
    measure("inspect the latest token", window.panel.inside.inspect_button.click,
            lambda: window.inspector.inspection is not None, after_s=0.5)
    measure("open a long conversation", lambda: window.open_conversation(long_chat),
            lambda: not getattr(window.chat, "building", False))
    send("And more")
    settle(app, 0.1)
    measure("switch model mid-answer", lambda: load(second),
            lambda: controller.model is not None and controller.model.name == second)
    dialog = window.manager.get_model()

    def pull() -> None:
        dialog.name.setText(pulled_name)
        dialog.insecure.setChecked(True)
        dialog.start()

    measure("pull a model", pull, lambda: not dialog.running and described(window),
            after_s=1.0)
    registry.stop()
    if dialog.error.isVisible():
        raise RuntimeError(f"the pull failed: {dialog.error.text()}")
    remove_model(window.models_controller.store(), pulled_name)
    send("And more")
    settle(app, 0.1)
    measure("switch back mid-answer", lambda: load(first),     # the larger model let go
            lambda: controller.model is not None and controller.model.name == first)
    mid_answer()
    monitor.reset()
    collector.reset()
    stolen = stolen_ms()
    started = time.perf_counter()
    window.close()
    close_s = time.perf_counter() - started
    settle(app, 0.3)
    results.append(("close mid-answer", monitor.longest, monitor.longest_cpu_ms,
                    monitor.most_cpu_ms, collector.longest, stolen_ms() - stolen))
    wait_for_all()

    print(f"{'action':<34} longest stall (target <= {TARGET_MS:.0f} ms), "
          "the GUI thread's own CPU in it, its most own CPU in any one stall, the longest "
          "garbage collection (any thread), CPU time the hypervisor took in the action")
    for name, stall, own, most, collection, stolen in results:
        print(f"{name:<34} {stall:8.1f} ms {own:8.1f} ms {most:8.1f} ms {collection:8.1f} ms"
              f" {stolen:6.0f} ms{'' if stall <= TARGET_MS else '  OVER'}")
    print(f"closing returned in {close_s * 1000:.0f} ms (target <= {CLOSE_TARGET_S * 1000:.0f} ms)")
    return 0 if all(row[1] <= TARGET_MS for row in results) and close_s <= CLOSE_TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
