"""Jobs that run off the GUI thread: loading a model, generating an answer, checking the
engine against the reference. Each is a QObject with typed signals and a cancel, moved
to its own QThread; the GUI only ever sees the results through queued signals and never
waits for a job: a cancelled job ends by itself, promptly, and whoever gave it up ignores
its late signals (``ended`` lets the next job on the same engine wait, off the GUI thread).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot

from app.hints import explain
from engine.chat.events import DoneEvent, Event, NoticeEvent, TokenEvent, ToolCallEvent
from engine.errors import LanternError
from engine.runtime.cancel import CancelEvent

log = logging.getLogger(__name__)
BATCH_S = 0.02       # a streamed answer's tokens reach the GUI at most this often
GIL_SWITCH_S = 0.0001  # the longest a job's Python keeps the GUI thread waiting for the GIL
BACKGROUND_NICE = 10  # how far below the GUI thread a job's thread runs (Linux nice steps)


def _message(error: BaseException) -> str:
    if isinstance(error, LanternError):
        return explain(error)
    return f"unexpected {type(error).__name__}: {error} (details in the log)"


class Job(QObject):
    """Base: `work()` runs on the job's thread; `failed` carries a readable message.

    ``WORK`` names the attributes that hold the job's work (an engine call, a generator);
    they are dropped once it has run. The work is often a closure that names its job, a
    cycle that only a full garbage collection frees, and an answer's holds the model's
    session: replaced models stayed in memory for as long (the soak, BENCHMARKS.md)."""

    failed = Signal(str)
    finished = Signal()
    WORK: tuple[str, ...] = ()

    def __init__(self) -> None:
        super().__init__()
        self.cancel_event = CancelEvent()
        self.ended = threading.Event()   # set on the job's thread once work() returned

    def cancel(self) -> None:
        self.cancel_event.set()

    @Slot()
    def run(self) -> None:
        try:
            self.work()
        except BaseException as error:  # shown to the user, never lost
            if not isinstance(error, LanternError):
                log.exception("%s failed", type(self).__name__)  # a bug: keep the details
            self.failed.emit(_message(error))
        finally:
            for name in self.WORK:
                setattr(self, name, None)
            self.ended.set()
            self.finished.emit()

    def work(self) -> None:
        raise NotImplementedError


def _behind_the_window() -> None:
    """The calling job thread, and every thread it starts (ONNX Runtime's workers among
    them), gives way to the GUI thread when both want a core: on a machine whose cores a
    model keeps busy, the window would otherwise wait its turn for every repaint. Only a
    thread JobRunner started calls it (first thing on ``started``): a job run inline must
    not lower its caller, which could never raise itself again without privileges."""
    if sys.platform.startswith("linux"):     # a thread's nice value is its own there
        thread = threading.get_native_id()
        try:
            nice = os.getpriority(os.PRIO_PROCESS, thread)
            os.setpriority(os.PRIO_PROCESS, thread, min(19, nice + BACKGROUND_NICE))
        except OSError:
            log.debug("could not lower a job thread's priority", exc_info=True)
    else:
        QThread.currentThread().setPriority(QThread.Priority.LowPriority)


class LoadJob(Job):
    progress = Signal(str, float)
    loaded = Signal(object)          # engine.runtime.loaded_model.LoadedModel
    WORK = ("_load",)

    def __init__(self, load: Callable[..., object]) -> None:
        super().__init__()
        self._load = load

    def work(self) -> None:
        model = self._load(progress=self.progress.emit, cancel=self.cancel_event)
        if not self.cancel_event.is_set():
            self.loaded.emit(model)


class GenerateJob(Job):
    """Streams an answer's events. Tokens that follow one another within BATCH_S reach the
    GUI thread together, as one ``tokens`` list: a fast model's tokens would otherwise
    queue up faster than the window handles them, and the window would stall."""

    tokens = Signal(object)          # list of TokenEvent, in order
    notice = Signal(str)
    done = Signal(object)            # DoneEvent
    toolCall = Signal(object)        # ToolCallEvent
    WORK = ("_events", "_cancel_engine")

    def __init__(self, events: Callable[[], Iterator[Event]], cancel: Callable[[], None]) -> None:
        super().__init__()
        self._events = events
        self._cancel_engine = cancel
        self._held: list[TokenEvent] = []
        self._sent_at = 0.0

    def cancel(self) -> None:
        super().cancel()
        cancel_engine = self._cancel_engine        # None once the answer has ended
        if cancel_engine is not None:
            cancel_engine()

    def work(self) -> None:
        """``done`` comes once, for the last answer: a round whose answer called tools
        ends in a DoneEvent too, and the tools' results start the next round."""
        held: DoneEvent | None = None
        try:
            for event in self._events():
                if isinstance(event, TokenEvent) and held is None:
                    self._token(event)
                    continue
                self._send_tokens()
                if isinstance(event, ToolCallEvent):
                    held = None
                    self.toolCall.emit(event)
                    continue
                if held is not None:
                    self.done.emit(held)
                    held = None
                if isinstance(event, TokenEvent):
                    self._token(event)
                elif isinstance(event, NoticeEvent):
                    self.notice.emit(event.message)
                elif isinstance(event, DoneEvent):
                    held = event
        finally:          # tokens shown before a failure too
            self._send_tokens()
        if held is not None:
            self.done.emit(held)

    def _token(self, event: TokenEvent) -> None:
        self._held.append(event)
        if time.monotonic() - self._sent_at >= BATCH_S:
            self._send_tokens()

    def _send_tokens(self) -> None:
        if self._held:
            self.tokens.emit(self._held)
            self._held, self._sent_at = [], time.monotonic()


class CallJob(Job):
    """Any other engine call (e.g. the reference check) whose result the GUI shows."""

    result = Signal(object)
    WORK = ("_call",)

    def __init__(self, call: Callable[[], object]) -> None:
        super().__init__()
        self._call = call

    def work(self) -> None:
        self.result.emit(self._call())


class ProgressJob(Job):
    """An engine call that reports progress and honours cancel (e.g. an inspection):
    ``call(progress, cancel_event)``; a cancelled job emits neither result nor failure."""

    progress = Signal(str, float)
    result = Signal(object)
    WORK = ("_call",)

    def __init__(self, call: Callable[[Callable[[str, float], None], threading.Event], object]
                 ) -> None:
        super().__init__()
        self._call = call

    def work(self) -> None:
        try:
            value = self._call(self.progress.emit, self.cancel_event)
        except LanternError:
            if self.cancel_event.is_set():
                return
            raise
        if not self.cancel_event.is_set():
            self.result.emit(value)


class GivenUpJobs:
    """Jobs given up that may still run on a model's engine, kept by their ``ended`` only:
    a job kept here would keep its session, and so a switched-from model, in memory. The
    next job on that engine waits for them (the engine runs one at a time), off the GUI
    thread."""

    def __init__(self) -> None:
        self._ended: list[threading.Event] = []

    def add(self, job: Job) -> None:
        self._ended.append(job.ended)

    def running(self) -> list[threading.Event]:
        """The ``ended`` events of given-up jobs still running (the next job waits for them)."""
        self._ended = [ended for ended in self._ended if not ended.is_set()]
        return list(self._ended)


# Every running job and its thread, whoever started them: a job's thread must outlive
# the runner (or test) that started it, or Qt aborts ("QThread destroyed while running").
_ACTIVE: dict[Job, QThread] = {}


class JobRunner(QObject):
    """Starts each job on a fresh QThread and cleans both up when the job finishes."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._running: dict[Job, QThread] = {}
        # A job in Python code (a vocabulary read, sampling) hands the GIL over only when
        # the interpreter's switch interval runs out, each time the GUI thread asks for it,
        # and one paint asks many times: the window waits that much less.
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))

    def start(self, job: Job) -> Job:
        thread = QThread(QCoreApplication.instance())  # owned by the app, not by us
        job.moveToThread(thread)
        # direct: runs on the new thread itself, before the job
        thread.started.connect(_behind_the_window, Qt.ConnectionType.DirectConnection)
        thread.started.connect(job.run)
        # direct: the thread ends itself; queued, quit would wait for the GUI thread
        job.finished.connect(thread.quit, Qt.ConnectionType.DirectConnection)
        thread.finished.connect(self._reap)  # queued: runs on the GUI thread
        self._running[job] = thread
        _ACTIVE[job] = thread
        thread.start()
        return job

    @Slot()
    def _reap(self) -> None:
        """The job whose thread sent ``finished`` is destroyed here, on the GUI thread: every
        signal it sent before has been delivered (a job's other signals come first in the
        queue; another job's may not have). ``finished`` comes from inside the thread's own
        clean-up, so the thread is waited for first. Left to Python, a job in a reference
        cycle (a closure that names its job) would be destroyed whenever the garbage
        collector meets it, on whichever thread; both crash now and then."""
        thread = self.sender()
        job = next((job for job, running in self._running.items() if running is thread), None)
        if job is None:
            return
        thread.wait()                         # the clean-up's last steps: at once
        del self._running[job]
        _ACTIVE.pop(job, None)
        shiboken6.delete(job)                 # its Python attributes stay readable
        thread.deleteLater()

    def busy(self) -> bool:
        return any(not thread.isFinished() for thread in self._running.values())

    def shutdown(self) -> None:
        """Cancel everything (the window closes); the jobs end by themselves and
        ``wait_for_all`` lets the process wait for them once the window is gone."""
        for job in list(self._running):
            job.cancel()


def wait_for_all() -> None:
    """Before the application object goes: every job was cancelled and ends promptly, but
    its thread must have ended first (Qt aborts on a QThread destroyed while running)."""
    for thread in list(_ACTIVE.values()):
        thread.wait()


