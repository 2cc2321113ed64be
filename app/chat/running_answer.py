"""The answer being written (ConversationController starts it, one at a time): the
GenerateJob streaming it from the session, the conversation it answers, the History row
it is saved into, and how it ends.

It goes on in the background when another conversation is shown: its signals reach the
view only while its conversation is the one shown. The answer in progress is saved to
History as its tokens come, before the view shows them (one small UPDATE into SQLite's
write-ahead log), so quitting, a crash or even ``kill -9`` keeps everything that was
shown; it stays marked incomplete until done. Continue goes on from the stored answer in
its own row; a regenerated answer that fails before its first token gives the row back
to the version it replaced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from PySide6.QtCore import QObject, Signal

from app.chat.tool_gate import ToolGate
from app.conversations.history import History, StoredMessage
from app.settings.store import Settings
from app.workers import GenerateJob, GivenUpJobs, JobRunner
from engine.chat.backend import Capability, ChatBackend
from engine.chat.events import DoneEvent, Event, NoticeEvent, TokenEvent, ToolCallEvent
from engine.chat.messages import Message
from engine.errors import ImageError
from engine.launch import speculate
from engine.remote.session import RemoteModel
from engine.runtime.loader import LoadedModel
from engine.store import Store

SessionCall = Callable[[ChatBackend, tuple], Iterator[Event]]   # send, regenerate, …: the turn


class RunningAnswer(QObject):
    token = Signal(object)                   # TokenEvent
    done = Signal(object)                    # DoneEvent
    failed = Signal(str)
    interrupted = Signal(str)                # the answer was given up; why, in a word or two
    promptReady = Signal(object, object)     # PromptTokens being answered, id -> piece
    toolCall = Signal(object)                # ToolCallEvent
    notice = Signal(str)
    unanswered = Signal(int)                 # the new user message got no answer: take it back
    sendRejected = Signal(str, object)       # its text and images, back to the input
    busyChanged = Signal(bool)
    answeringChanged = Signal(object)        # the conversation being answered, or None
    listChanged = Signal()                   # its conversation moved up in History

    def __init__(self, history: History, runner: JobRunner, tools: ToolGate,
                 given_up: GivenUpJobs, shown: Callable[[], int | None],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.history, self.runner, self.tools, self.given_up = history, runner, tools, given_up
        self._shown_conversation = shown         # the conversation the window shows
        self.job: GenerateJob | None = None
        # the conversation the job answers: it goes on when another one is shown (the
        # signals that show it are sent only while its conversation is the one shown)
        self.conversation: int | None = None
        self.session: ChatBackend | None = None
        self.model: LoadedModel | RemoteModel | None = None
        self.message_id: int | None = None
        self.text = ""
        self.thinking = ""
        self.thinking_ns = 0         # engine time of this answer's thinking tokens
        self.steering = ""           # its control vectors, in words
        self._so_far = ("", "")      # what the answer held before this job (Continue)
        self._logprobs: list[dict] = []
        self._first_token = False
        self._decode_ns = 0          # time of this answer's steps after the first
        self._decoded = 0
        self._sent: tuple[int, str, tuple[str, ...]] | None = None  # this turn's new message

    @property
    def tokens_per_second(self) -> float:
        """Decode speed of the current answer (the first step, which follows the prompt
        evaluation, is left out)."""
        return self._decoded / (self._decode_ns / 1e9) if self._decode_ns else 0.0

    @property
    def thinking_ms(self) -> int:
        return self.thinking_ns // 1_000_000

    def shown(self) -> bool:
        """The answer in progress belongs to the conversation shown."""
        return self.conversation is not None and self.conversation == self._shown_conversation()

    def start(self, conversation: int, model: LoadedModel | RemoteModel, session: ChatBackend,
              turn: SessionCall, settings: Settings, produced_by: dict, *,
              images: tuple[str, ...] = (), answer_id: int | None = None,
              so_far: StoredMessage | None = None,
              sent: tuple[int, str, tuple[str, ...]] | None = None,
              pending: list[StoredMessage] | None = None, vision: bool = False,
              steering: str = "") -> int:
        """Answer into a new row, or into ``answer_id``'s (a regenerated version; going on
        from ``so_far``, the answer as it stands). ``produced_by``: what it runs with, kept
        beside it; ``sent``: the user message new this turn; ``pending``: the stored
        conversation the session is restored from first; ``steering``: its control
        vectors, in words."""
        self.message_id = answer_id if answer_id is not None else self.history.add(
            conversation, "assistant", "", complete=False, model=model.name)
        self._so_far = (so_far.content, so_far.thinking) if so_far else ("", "")
        self.text, self.thinking = self._so_far
        self.thinking_ns = so_far.thinking_ms * 1_000_000 if so_far else 0
        self._logprobs = list(self.history.logprobs(answer_id)) if so_far else []
        if so_far:
            self.history.set_done_reason(self.message_id, "")     # being written again
        self._sent = sent
        self._first_token = True
        self._decode_ns = self._decoded = 0
        self.model, self.steering = model, steering
        self.history.set_produced_by(self.message_id, produced_by)
        max_pixels = settings.max_pixels
        before = self.given_up.running()

        def events() -> Iterator[Event]:
            for ended in before:    # given-up jobs end promptly; the engine runs one at a time
                ended.wait()
            if (Capability.SPECULATION in session.capabilities and session.drafter is None
                    and settings.speculate != "off"):
                note = speculate(session, settings.speculate,
                                 Store.open(settings.models_dir),
                                 requantize=settings.requantize or None)
                if session.drafter is not None and note:
                    yield NoticeEvent(note)
            if pending is not None:
                restored, notes = restore_messages(pending, max_pixels, vision,
                                                   session.prepare_image)
                session.messages = restored
                for note in notes:
                    yield NoticeEvent(note)
            for note in self._offer_tools(session, settings, job.cancel_event):
                yield NoticeEvent(note)
            inputs = tuple(session.prepare_image(path, max_pixels) for path in images)
            answer = turn(session, inputs)
            if job.cancel_event.is_set():   # cancelled while getting ready
                session.cancel()
            yield from answer

        job = GenerateJob(events, session.cancel)
        job.tokens.connect(self._on_tokens)
        job.notice.connect(self.notice)
        job.done.connect(self._on_done)
        job.toolCall.connect(self._on_tool_call)
        job.failed.connect(self._on_failed)
        self.job, self.conversation, self.session = job, conversation, session
        self.busyChanged.emit(True)
        self.runner.start(job)
        self.answeringChanged.emit(self.conversation)
        self.listChanged.emit()
        return self.message_id

    def _offer_tools(self, session: ChatBackend, settings: Settings,
                     cancel: threading.Event) -> list[str]:
        """Worker thread: the session gets the tools the settings turn on and a runner
        that asks the user (through the GUI) before calls that touch the outside world."""
        box, notes = self.tools.prepare(settings)
        session.tools = box.tools if box is not None else []
        session.run_tool = box.runner(
            lambda call, where: self.tools.confirm(call, where, cancel)) if box else None
        return notes

    def stop(self) -> None:
        """Cancel the answer (Esc, Stop): it ends within a token and is saved as "stopped"
        when its done signal comes."""
        if self.job is not None:
            self.job.cancel()

    def interrupt(self, note: str) -> None:
        """Give up the answer now (its conversation deleted, another model, the window
        closing): it is cancelled, saved as far as it was shown and marked interrupted
        (``note`` says why, beside it); the job ends by itself in the background and its
        late signals are dropped. Never waits for the job."""
        job = self.job
        if job is None:
            return
        job.cancel()
        self.given_up.add(job)
        shown = self.shown()
        self._finish(complete=False)
        if shown:
            self.interrupted.emit(note)

    def _current(self) -> bool:
        """The signal comes from the job in charge now (not one given up)."""
        sender = self.sender()
        return sender is not None and sender is self.job

    # -- job signals (queued onto the GUI thread) --------------------------------------------

    def _on_tokens(self, events: list[TokenEvent]) -> None:
        if not self._current():
            return
        for event in events:
            self._take(event)
        self._save(complete=False)       # saved before shown: nothing shown can be lost
        for event in events if self.shown() else ():
            self.token.emit(event)

    def _take(self, event: TokenEvent) -> None:
        session = self.session
        if self._first_token and session is not None and session.last_prompt:
            self._first_token = False
            if self.shown():
                self.promptReady.emit(session.last_prompt, self.model.tokenizer.id_to_piece)
        if event.index > 0:
            self._decode_ns += event.elapsed_ns
            self._decoded += 1
        self.text += event.text
        self.thinking += event.thinking_text
        if event.thinking:
            self.thinking_ns += event.elapsed_ns
        self._logprobs.append(token_logprobs(event))

    def _on_tool_call(self, event: ToolCallEvent) -> None:
        if self._current():
            self.text = ""     # the call's text; the next round's answer follows
            if self.shown():
                self.toolCall.emit(event)

    def _on_done(self, event: DoneEvent) -> None:
        if not self._current():
            return
        text, thinking = self._so_far
        self.text, self.thinking = text + event.text, thinking + event.thinking
        self.steering = event.steering
        shown = self.shown()
        self.history.set_done_reason(self.message_id, event.done_reason)
        self._finish(complete=event.done_reason != "cancel")
        if shown:
            self.done.emit(event)

    def _on_failed(self, message: str) -> None:
        if not self._current():
            return
        shown = self.shown()
        if self.message_id is not None and not self.text and self._so_far == ("", ""):
            if self.history.drop_shown_version(self.message_id):    # the earlier one again
                self.message_id = None
                self._sent = None
            else:
                self.history.truncate_from(self.conversation, self.message_id)
                self.message_id = None
            if self._sent is not None and shown:
                self.unanswered.emit(self._sent[0])
                if "num_ctx" in message:
                    message += ("; in Lantern the context size is in Settings → Conversation "
                                "(num_ctx, for every chat)")
        self._finish(complete=False)
        if not shown:
            self.notice.emit(f"An answer in another chat failed: {message}")
        else:
            self.failed.emit(message)
            if self._sent is not None:
                self.sendRejected.emit(self._sent[1], self._sent[2])
        self._sent = None

    def _finish(self, complete: bool) -> None:
        self._save(complete, final=True)
        self.job, self.message_id = None, None
        self.conversation, self.session = None, None
        self.busyChanged.emit(False)
        self.answeringChanged.emit(None)
        self.listChanged.emit()

    def _save(self, complete: bool, final: bool = False) -> None:
        if self.message_id is not None:
            self.history.update(self.message_id, self.text, complete,
                                self.thinking, self.thinking_ms,
                                self._logprobs if final else None, self.steering)


def restore_messages(stored: list[StoredMessage], max_pixels: int, vision: bool,
                     prepare: Callable[[str, int], object]) -> tuple[list[Message], list[str]]:
    """Stored messages as engine messages; images re-read by the backend's ``prepare``
    (vision models only). Images that are gone are left out, with a note saying so."""
    messages, notes = [], []
    for message in stored:
        if message.role == "assistant" and not message.content:
            continue
        inputs: list[object] = []
        if message.images and not vision:
            notes.append(f"{len(message.images)} earlier image(s) left out: this model "
                         "cannot see images")
        for path in message.images if vision else ():
            try:
                inputs.append(prepare(path, max_pixels))
            except ImageError as error:
                notes.append(f"an earlier image is left out of the conversation: {error}")
        messages.append(Message(message.role, message.content, tuple(inputs),
                                thinking=message.thinking))
    return messages, notes


def token_logprobs(event: TokenEvent) -> dict:
    """What the history keeps of a token: its piece, its text in the answer, its
    log-probability and the best few (the view and panel show them again on reopening)."""
    kept = {"token": event.piece, "text": event.text, "logprob": round(event.logprob, 5),
            "top": [[t.piece, round(t.logprob, 5)] for t in event.top]}
    if event.thinking:
        kept["thinking"] = True
    return kept
