"""One conversation at a time, on the engine side: the chat backend (the local engine's
LocalSession or a server's RemoteSession, both engine.chat.backend.ChatBackend), its
History rows and the GenerateJob streaming the answer.

The answer in progress is saved to History as its tokens come, before the view shows them
(one small UPDATE into SQLite's write-ahead log), so quitting (`shutdown`), a crash or
even ``kill -9`` keeps everything that was shown; it stays marked incomplete until done.
Stored conversations are restored into a fresh LocalSession lazily, on the job thread of
the next turn, because restoring images means preprocessing them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.chat.tool_gate import ToolGate
from app.conversations.history import History, Snapshot, StoredMessage
from app.desktop.memory import let_go
from app.settings.store import Settings
from app.workers import CallJob, GenerateJob, Job, JobRunner
from engine.chat.answer_format import parse_format
from engine.chat.backend import Capability, ChatBackend, unavailable_reason
from engine.chat.documents import message_room, split, template_overhead, token_counter
from engine.chat.events import DoneEvent, Event, NoticeEvent, TokenEvent, ToolCallEvent
from engine.chat.messages import Message
from engine.errors import GenerationError, ImageError, LanternError
from engine.gguf.control_vector import Steering
from engine.launch import open_chat, options_for, speculate, steer
from engine.remote.crosscheck import cross_check
from engine.remote.session import RemoteModel
from engine.runtime.loaded_model import LoadedModel
from engine.store import Store
from engine.store.manifest import digest_hex

MODEL_SWITCH_NOTE = "interrupted by the model switch"
TITLE_LENGTH = 48


@dataclass(frozen=True)
class Turn:
    """History rows of a turn just started (the view tags its message widgets with them)."""

    user_id: int | None          # None when regenerating (the user message stays)
    answer_id: int


def title_of(text: str, images: tuple[str, ...]) -> str:
    """The first line the user typed (not an attached document's tag), else what was sent."""
    documents, typed = split(text)
    line = next((line.strip() for line in typed.splitlines() if line.strip()), "")
    if not line:
        return documents[0].name if documents else "Image" if images else "New chat"
    if len(line) <= TITLE_LENGTH:
        return line
    return line[: TITLE_LENGTH - 1].rstrip(" .,;:!?-–—") + "…"   # never ".…"


def produced_by(model: LoadedModel | RemoteModel, session: ChatBackend, where: str) -> dict:
    """What an answer ran with, kept beside it: the weights, the engine and the options
    (the model's name is kept in its own column)."""
    if isinstance(model, LoadedModel):
        hex_digest = digest_hex(model.gguf.path.name)
        weights = f"sha256:{hex_digest}" if hex_digest else str(model.gguf.path)
        engine = "exact" if model.exact else "fast"
    else:
        weights, engine = model.info.blob_digest or "", f"server {where}"
    return {"weights": weights, "engine": engine, "options": asdict(session.options)}


class ConversationController(QObject):
    conversationChanged = Signal(object)     # conversation id or None
    listChanged = Signal()                   # titles/order in History changed
    token = Signal(object)                   # TokenEvent
    answerDone = Signal(object)              # DoneEvent
    answerFailed = Signal(str)
    notice = Signal(str)
    busyChanged = Signal(bool)
    promptReady = Signal(object, object)     # PromptTokens being answered, id -> piece
    checkDone = Signal(object)               # engine.runtime.check.CheckReport
    checkFailed = Signal(str)
    crossCheckDone = Signal(object)          # engine.remote.crosscheck.CrossCheckReport
    crossCheckFailed = Signal(str)
    answerInterrupted = Signal(str)          # the answer was given up; why, in a word or two
    sendRejected = Signal(str, object)       # text, images of a message taken back unanswered
    toolCall = Signal(object)                # ToolCallEvent of the answer in progress
    answeringChanged = Signal(object)        # the conversation being answered, or None

    def __init__(self, history: History, settings: Settings, runner: JobRunner,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.history, self.settings, self.runner = history, settings, runner
        self.tools = ToolGate(self)             # Settings → Tools, and the user's yes
        self.model: LoadedModel | RemoteModel | None = None
        self.where = "this computer"            # where the model runs (a server's host)
        self.vision = False
        self.session: ChatBackend | None = None
        self.conversation_id: int | None = None
        self.job: GenerateJob | None = None
        # the conversation the job answers: it goes on when another one is shown (the
        # signals that show it are sent only while its conversation is the one shown)
        self.answering: int | None = None
        self._answer_session: ChatBackend | None = None
        self._so_far = ("", "")      # what the answer held before this job (Continue)
        self.check_job: CallJob | None = None
        self.answer_id: int | None = None
        self.answer_text = ""
        self.answer_thinking = ""
        self.thinking_ns = 0         # engine time of this answer's thinking tokens
        self._logprobs: list[dict] = []
        self.draft_system, self.draft_options = "", {}   # a new chat's own settings
        self.draft_format = ""
        self.draft_vectors: list[tuple[str, float]] = []   # a new chat's control vectors
        self.answer_steering = ""    # the control vectors of the answer in progress, in words
        self.steering_table = None   # what they add per block ([n_layers, H]; None: none)
        self._pending: list[StoredMessage] | None = None   # to restore on the next turn
        self._first_token = False
        self._decode_ns = 0          # time of this answer's steps after the first
        self._decoded = 0
        # given-up jobs that may still run on the engine, by their ``ended`` only: a job
        # kept here would keep its session, and so a switched-from model, in memory
        self._draining: list[threading.Event] = []
        self._sent: tuple[int, str, tuple[str, ...]] | None = None  # this turn's new message

    @property
    def busy(self) -> bool:
        """An answer of the conversation shown is being generated (Stop applies)."""
        return self.job is not None and self._shown()

    def _shown(self) -> bool:
        """The answer in progress belongs to the conversation shown."""
        return self.answering is not None and self.answering == self.conversation_id

    @property
    def checking(self) -> bool:
        """The reference check runs (nothing can be sent until it ends)."""
        return self.check_job is not None

    @property
    def tokens_per_second(self) -> float:
        """Decode speed of the current answer (the first step, which follows the prompt
        evaluation, is left out)."""
        return self._decoded / (self._decode_ns / 1e9) if self._decode_ns else 0.0

    @property
    def model_name(self) -> str:
        return self.model.name if self.model is not None else ""

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.model.capabilities if self.model is not None else frozenset()

    @property
    def thinking_ms(self) -> int:
        return self.thinking_ns // 1_000_000

    def conversation_settings(self) -> tuple[str, dict]:
        """This conversation's own system prompt and options (a new chat's drafts)."""
        if self.conversation_id is None:
            return self.draft_system, dict(self.draft_options)
        conversation = self.history.conversation(self.conversation_id)
        return (conversation.system, dict(conversation.options)) if conversation else ("", {})

    def conversation_format(self) -> str:
        """This conversation's structured output: "", "json" or a JSON schema's text."""
        if self.conversation_id is None:
            return self.draft_format
        conversation = self.history.conversation(self.conversation_id)
        return conversation.format if conversation else ""

    def set_conversation_format(self, text: str) -> None:
        """Applies from the next answer on (set_conversation_settings tells the view)."""
        if self.conversation_id is None:
            self.draft_format = text
        else:
            self.history.set_format(self.conversation_id, text)

    def control_vectors(self) -> list[tuple[str, float]]:
        """This conversation's control vectors: (file, strength) each."""
        if self.conversation_id is None:
            return list(self.draft_vectors)
        return self.history.control_vectors(self.conversation_id)

    def set_control_vectors(self, vectors: list[tuple[str, float]]) -> None:
        """Applies from the next answer on (a strength changes no graph, engine side)."""
        if self.conversation_id is None:
            self.draft_vectors = list(vectors)
        else:
            self.history.set_control_vectors(self.conversation_id, vectors)

    def count_tokens(self, text: str) -> tuple[int, bool]:
        """Tokens of ``text`` with the current model (False: estimated, a server's model)."""
        count, exact = token_counter(self.model)
        return count(text), exact

    def message_room(self) -> int:
        """Tokens a new message may take in this conversation's context."""
        _, own = self.conversation_settings()
        options = options_for(self.model, {**self.settings.options, **own,
                                           "num_ctx": self.settings.num_ctx})
        return message_room(options.num_ctx, options.num_predict, template_overhead(
            self.model, self.system_prompt(), self.settings.think))

    def set_conversation_settings(self, system: str, options: dict) -> None:
        """Applies from the next answer on."""
        if self.conversation_id is None:
            self.draft_system, self.draft_options = system, dict(options)
        else:
            self.history.set_settings(self.conversation_id, system, options)
        self.conversationChanged.emit(self.conversation_id)

    # -- model and conversation switching ---------------------------------------------------

    def set_model(self, model: LoadedModel | RemoteModel, vision: bool,
                  where: str = "this computer") -> None:
        """Use a newly loaded model; the conversation continues in a fresh session. The
        previous model is freed off the GUI thread."""
        self.interrupt(MODEL_SWITCH_NOTE)
        self.give_up_check()
        previous = [self.model, self.session]
        self.model, self.vision, self.where = model, vision, where
        self.session = None
        let_go(previous)
        if self.conversation_id is not None:
            self._pending = self.history.messages(self.conversation_id, logprobs=False)

    def new_chat(self) -> None:
        """An empty chat; an answer in progress goes on in the background."""
        self.give_up_check()
        self.conversation_id, self.session, self._pending = None, None, None
        self.draft_system, self.draft_options = "", {}
        self.draft_format = ""
        self.draft_vectors = []
        self.conversationChanged.emit(None)
        self.busyChanged.emit(self.busy)

    def open(self, conversation_id: int) -> list[StoredMessage]:
        """Switch to a stored conversation; returns its messages for the view (without
        their token rows: the view reads each answer's as it builds its bubble). An answer
        in progress goes on in the background; back on its conversation, its session
        is the one that answers it."""
        self.give_up_check()
        messages = self.history.messages(conversation_id, logprobs=False)
        self.conversation_id = conversation_id
        if conversation_id == self.answering:
            self.session, self._pending = self._answer_session, None
        else:
            self.session, self._pending = None, messages
        self.conversationChanged.emit(conversation_id)
        self.busyChanged.emit(self.busy)
        return messages

    def delete(self, conversation_id: int) -> Snapshot | None:
        """Delete a conversation; the snapshot returned puts it back (`undelete`)."""
        if conversation_id == self.answering:
            self.interrupt("interrupted")
        if conversation_id == self.conversation_id:
            self.new_chat()
        snapshot = self.history.delete(conversation_id)
        self.listChanged.emit()
        return snapshot

    def undelete(self, snapshot: Snapshot) -> None:
        self.history.restore(snapshot)
        self.listChanged.emit()

    # -- turns ------------------------------------------------------------------------------

    def send(self, text: str, images: tuple[str, ...] = ()) -> Turn:
        self._require_idle()
        if self.conversation_id is None:
            conversation = self.history.create(title_of(text, images), self.model_name,
                                               self.draft_system, self.draft_options,
                                               self.draft_format)
            self.history.set_control_vectors(conversation.id, self.draft_vectors)
            self.conversation_id = conversation.id
            self.conversationChanged.emit(conversation.id)
        user_id = self.history.add(self.conversation_id, "user", text, images)
        answer_id = self._start_answer(
            lambda session, inputs: session.send(text, inputs), images)
        self._sent = (user_id, text, images)
        return Turn(user_id, answer_id)

    def regenerate(self) -> Turn:
        self._require_idle()
        if self.conversation_id is None:
            raise GenerationError("there is no message to answer again: send one first")
        last = self._last_answer()
        if last is None:
            return Turn(None, self._start_answer(lambda session, _: session.regenerate()))
        self.history.keep_version(last.id, self.model_name)     # the earlier one stays
        return Turn(None, self._start_answer(lambda session, _: session.regenerate(),
                                             answer_id=last.id))

    def continue_answer(self) -> Turn:
        """Go on with the last answer (stopped, cut off or interrupted) in its own row."""
        self._require_idle()
        if not isinstance(self.model, LoadedModel):    # a server starts each answer anew
            raise GenerationError(f"Continue needs a model on this computer: "
                                  f"{self.model_name} runs on {self.where}. Regenerate the "
                                  "answer instead, or load a local model")
        if self.conversation_format():
            raise GenerationError("a structured answer cannot be continued: its format "
                                  "would start again. Regenerate it instead")
        last = self._last_answer()
        if last is None:
            raise GenerationError("there is no answer to continue: send a message first")
        return Turn(None, self._start_answer(lambda session, _: session.continue_answer(),
                                             answer_id=last.id, so_far=last))

    def show_version(self, message_id: int, number: int) -> StoredMessage | None:
        """Show another version of an answer: the conversation goes on from it (its
        session is restored from the history on the next turn)."""
        if self.busy:
            raise GenerationError("the answer is still being written: wait for it or "
                                  "press Stop")
        self.history.show_version(message_id, number)
        self.session = None
        self._pending = self.history.messages(self.conversation_id, logprobs=False)
        return self.history.message(message_id)

    def _last_answer(self) -> StoredMessage | None:
        """The answer to the last user message, if it has one."""
        last = self._last_stored("assistant")
        return last if last is not None and last.id > (self._last_id("user") or 0) else None

    def edit_last_user(self, text: str) -> Turn:
        self._require_idle()
        last = self._last_stored("user")
        if last is None:
            raise GenerationError("there is no message to edit: send one first")
        self._retitle(last, text)
        self.history.truncate_from(self.conversation_id, last.id)
        user_id = self.history.add(self.conversation_id, "user", text, last.images)
        answer_id = self._start_answer(lambda session, _: session.edit_last_user(text))
        return Turn(user_id, answer_id)

    def _retitle(self, edited: StoredMessage, text: str) -> None:
        """Editing the first message renames a conversation still called after it (a title
        the user gave it stays)."""
        first = next((m for m in self.history.messages(self.conversation_id)
                      if m.role == "user"), None)
        conversation = self.history.conversation(self.conversation_id)
        if first is not None and first.id == edited.id and conversation is not None and \
                conversation.title == title_of(edited.content, edited.images):
            self.history.rename(self.conversation_id, title_of(text, edited.images))
            self.conversationChanged.emit(self.conversation_id)

    def stop(self) -> None:
        """Cancel the answer (Esc, Stop): it ends within a token and is saved as "stopped"
        when its done signal comes."""
        if self.job is not None:
            self.job.cancel()

    def interrupt(self, note: str) -> None:
        """Give up the answer now (another conversation, a new chat, another model, the
        window closing): it is cancelled, saved as far as it was shown and marked
        interrupted (``note`` says why, beside it); the job ends by itself in the
        background and its late signals are dropped. Never waits for the job."""
        job = self.job
        if job is None:
            return
        job.cancel()
        self._draining.append(job.ended)
        shown = self._shown()
        self._finish(complete=False)
        if shown:
            self.answerInterrupted.emit(note)

    def give_up_check(self) -> None:
        """Cancel the reference check or cross-check (its conversation or model is left);
        it ends by itself and its result is dropped."""
        job = self.check_job
        if job is None:
            return
        job.cancel()
        self._draining.append(job.ended)
        self.check_job = None
        self.busyChanged.emit(False)

    def shutdown(self) -> None:
        """The window closes: give up what runs, saving the answer as far as it got."""
        self.interrupt("interrupted")
        self.give_up_check()

    def _require_idle(self) -> None:
        if self.model is None:
            raise GenerationError("no model is loaded: choose one in the sidebar first")
        if self.checking:
            raise GenerationError("the reference check is still running: wait for its verdict")
        if self.busy:
            raise GenerationError("the model is still busy: wait for it or press Stop")
        if self.job is not None:       # one answer at a time: never two jobs on one model
            other = self.history.conversation(self.answering)
            title = f" (“{other.title}”)" if other else ""
            raise GenerationError(f"another chat{title} is still answering: wait for it, "
                                  "or open it and press Stop")

    def last_user_message(self) -> StoredMessage | None:
        """The conversation's latest message from the user (causal tracing's clean text)."""
        return self._last_stored("user")

    def system_prompt(self) -> str | None:
        """The system prompt this conversation's answers get (None: the model's own)."""
        system, _ = self.conversation_settings()
        return system or self.settings.system or None

    def _last_stored(self, role: str) -> StoredMessage | None:
        if self.conversation_id is None:
            return None
        return self.history.last_message(self.conversation_id, role)

    def _last_id(self, role: str) -> int | None:
        last = self._last_stored(role)
        return last.id if last is not None else None

    def _start_answer(self, turn: Callable[[ChatBackend, tuple], Iterator[Event]],
                      images: tuple[str, ...] = (), answer_id: int | None = None,
                      so_far: StoredMessage | None = None) -> int:
        """Answer into a new row, or into ``answer_id``'s (a regenerated version; going on
        from ``so_far``, the answer as it stands)."""
        self.answer_id = answer_id if answer_id is not None else self.history.add(
            self.conversation_id, "assistant", "", complete=False, model=self.model_name)
        self._so_far = (so_far.content, so_far.thinking) if so_far else ("", "")
        self.answer_text, self.answer_thinking = self._so_far
        self.thinking_ns = so_far.thinking_ms * 1_000_000 if so_far else 0
        self._logprobs = list(self.history.logprobs(answer_id)) if so_far else []
        if so_far:
            self.history.set_done_reason(self.answer_id, "")     # being written again
        self._sent = None
        self._first_token = True
        self._decode_ns = self._decoded = 0
        session = self._open_session()
        self.history.set_produced_by(self.answer_id, produced_by(self.model, session,
                                                                 self.where))
        pending, self._pending = self._pending, None
        max_pixels = self.settings.max_pixels
        before = self._take_draining()

        def events() -> Iterator[Event]:
            for ended in before:    # given-up jobs end promptly; the engine runs one at a time
                ended.wait()
            if (Capability.SPECULATION in session.capabilities and session.drafter is None
                    and self.settings.speculate != "off"):
                note = speculate(session, self.settings.speculate,
                                 Store.open(self.settings.models_dir),
                                 requantize=self.settings.requantize or None)
                if session.drafter is not None and note:
                    yield NoticeEvent(note)
            if pending is not None:
                restored, notes = restore_messages(pending, max_pixels, self.vision,
                                                   session.prepare_image)
                session.messages = restored
                for note in notes:
                    yield NoticeEvent(note)
            for note in self._offer_tools(session, job.cancel_event):
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
        self.job, self.answering, self._answer_session = job, self.conversation_id, session
        self.busyChanged.emit(True)
        self.runner.start(job)
        self.answeringChanged.emit(self.answering)
        self.listChanged.emit()
        return self.answer_id

    def _open_session(self) -> ChatBackend:
        """This conversation's session (a fresh one after a switch), with its settings."""
        _, own = self.conversation_settings()
        options = options_for(self.model, {**self.settings.options, **own,
                                           "num_ctx": self.settings.num_ctx})
        session = self.session or open_chat(self.model, options)
        session.options = options
        session.system = self.system_prompt()
        session.think = self.settings.think      # False: Ollama's think=false
        answer_format = self.conversation_format()
        session.format = parse_format(answer_format) if answer_format else None
        self.session = session
        self._steer(session)
        return session

    def _steer(self, session: ChatBackend) -> None:
        """The conversation's control vectors on a local session (a vector that cannot
        be read or does not fit the model is left out, and the user told)."""
        vectors = self.control_vectors()
        local = isinstance(self.model, LoadedModel)
        steering = Steering()
        if vectors and not local:
            self.notice.emit(f"Control vectors steer a model on this computer; "
                             f"{self.model_name} runs on {self.where}: not steered.")
        elif vectors:
            try:
                steering = Steering.load([(Path(path), strength) for path, strength in vectors])
                steer(session, steering)
            except LanternError as error:
                self.notice.emit(f"Not steered: {error}")
                steering = Steering()
        if local and not steering:
            steer(session, steering)    # what an earlier answer set no longer applies
        self.answer_steering = steering.label if steering else ""
        self.steering_table = session.steering_table() if steering else None

    def _offer_tools(self, session: ChatBackend, cancel: threading.Event) -> list[str]:
        """Worker thread: the session gets the tools the settings turn on and a runner
        that asks the user (through the GUI) before calls that touch the outside world."""
        box, notes = self.tools.prepare(self.settings)
        session.tools = box.tools if box is not None else []
        session.run_tool = box.runner(
            lambda call, where: self.tools.confirm(call, where, cancel)) if box else None
        return notes

    def _take_draining(self) -> list[threading.Event]:
        """The ``ended`` events of given-up jobs still running (the next job waits for them)."""
        self._draining = [ended for ended in self._draining if not ended.is_set()]
        return list(self._draining)

    def _current(self, job: Job | None) -> bool:
        """The signal comes from the job in charge now (not one given up)."""
        sender = self.sender()
        return sender is not None and sender is job

    # -- job signals (queued onto the GUI thread) --------------------------------------------

    def _on_tokens(self, events: list[TokenEvent]) -> None:
        if not self._current(self.job):
            return
        for event in events:
            self._take(event)
        self._save(complete=False)       # saved before shown: nothing shown can be lost
        for event in events if self._shown() else ():
            self.token.emit(event)

    def _take(self, event: TokenEvent) -> None:
        session = self._answer_session
        if self._first_token and session is not None and session.last_prompt:
            self._first_token = False
            if self._shown():
                self.promptReady.emit(session.last_prompt, self.model.tokenizer.id_to_piece)
        if event.index > 0:
            self._decode_ns += event.elapsed_ns
            self._decoded += 1
        self.answer_text += event.text
        self.answer_thinking += event.thinking_text
        if event.thinking:
            self.thinking_ns += event.elapsed_ns
        self._logprobs.append(token_logprobs(event))

    def _on_tool_call(self, event: ToolCallEvent) -> None:
        if self._current(self.job):
            self.answer_text = ""     # the call's text; the next round's answer follows
            if self._shown():
                self.toolCall.emit(event)

    def _on_done(self, event: DoneEvent) -> None:
        if not self._current(self.job):
            return
        text, thinking = self._so_far
        self.answer_text, self.answer_thinking = text + event.text, thinking + event.thinking
        self.answer_steering = event.steering
        shown = self._shown()
        self.history.set_done_reason(self.answer_id, event.done_reason)
        self._finish(complete=event.done_reason != "cancel")
        if shown:
            self.answerDone.emit(event)

    def _on_failed(self, message: str) -> None:
        if not self._current(self.job):
            return
        shown = self._shown()
        if self.answer_id is not None and not self.answer_text and self._so_far == ("", ""):
            if self.history.drop_shown_version(self.answer_id):    # the earlier one again
                self.answer_id = None
                self._sent = None
            else:
                self.history.truncate_from(self.answering, self.answer_id)
                self.answer_id = None
            if self._sent is not None and shown:
                self._take_back(*self._sent)
                if "num_ctx" in message:
                    message += ("; in Lantern the context size is in Settings → Conversation "
                                "(num_ctx, for every chat)")
        self._finish(complete=False)
        if not shown:
            self.notice.emit(f"An answer in another chat failed: {message}")
        else:
            self.answerFailed.emit(message)
            if self._sent is not None:
                self.sendRejected.emit(self._sent[1], self._sent[2])
        self._sent = None

    def _take_back(self, user_id: int, text: str, images: tuple[str, ...]) -> None:
        """A message that got no answer at all (too long, an unreadable image) is not kept:
        out of the history (and its conversation, when that was all it held) and out of
        the session, which restores from the history on the next turn."""
        self.history.truncate_from(self.conversation_id, user_id)
        self.session = None
        remaining = self.history.messages(self.conversation_id, logprobs=False)
        if remaining:
            self._pending = remaining
            return
        self.history.delete(self.conversation_id)
        self.conversation_id, self._pending = None, None
        self.conversationChanged.emit(None)

    def _finish(self, complete: bool) -> None:
        self._save(complete, final=True)
        self.job, self.answer_id = None, None
        self.answering, self._answer_session = None, None
        self.busyChanged.emit(False)
        self.answeringChanged.emit(None)
        self.listChanged.emit()

    def _save(self, complete: bool, final: bool = False) -> None:
        if self.answer_id is not None:
            self.history.update(self.answer_id, self.answer_text, complete,
                                self.answer_thinking, self.thinking_ms,
                                self._logprobs if final else None, self.answer_steering)

    # -- reference check ------------------------------------------------------------------------

    def check(self) -> None:
        """Compare engine and numpy reference on the current context (off the GUI thread)."""
        self._require_idle()
        if Capability.REFERENCE not in self.capabilities:
            raise GenerationError(unavailable_reason(Capability.REFERENCE, self.model_name,
                                                     self.where))
        if (self.session is None or self.session.last_prompt is None) and \
                self._last_stored("user") is None:
            raise GenerationError("send a message first: the check runs on the last prompt")
        session = self._open_session()
        self.history.set_produced_by(self.answer_id, produced_by(self.model, session,
                                                                 self.where))
        pending, self._pending = self._pending, None
        before = self._take_draining()
        max_pixels = self.settings.max_pixels

        def run_check() -> object:
            for ended in before:
                ended.wait()
            if pending is not None:      # a conversation reopened: restored here first
                session.messages, _ = restore_messages(pending, max_pixels, self.vision,
                                                       session.prepare_image)
            return session.check_against_reference(job.cancel_event)

        job = CallJob(run_check)
        job.result.connect(self._on_check_result)
        job.failed.connect(self._on_check_failed)
        self.check_job = job
        self.busyChanged.emit(True)
        self.runner.start(job)

    def cross_check(self, remote: RemoteModel, same_weights: bool, num_predict: int) -> None:
        """The server's greedy answer to this conversation against Lantern's own
        log-probabilities along it (off the GUI thread; sending waits for it)."""
        self._require_idle()
        if Capability.LOGITS not in self.capabilities:
            raise GenerationError("the cross-check compares Lantern's own engine with a "
                                  "server: load a model from this computer first")
        if self.session is None or not any(m.role == "user" for m in self.session.messages):
            raise GenerationError("send a message first: the cross-check answers the "
                                  "conversation's last user message again")
        messages = list(self.session.messages)
        while messages[-1].role != "user":
            messages.pop()
        if any(m.images for m in messages):
            raise GenerationError("the cross-check compares text conversations: start a "
                                  "new chat without images")
        model, system = self.model, self.session.system
        before = self._take_draining()

        def run_cross_check() -> object:
            for ended in before:
                ended.wait()
            return cross_check(model, remote, messages, system, num_predict=num_predict,
                               same_weights_asserted=same_weights, num_ctx=model.num_ctx)

        job = CallJob(run_cross_check)
        job.result.connect(self._on_cross_check_result)
        job.failed.connect(self._on_cross_check_failed)
        self.check_job = job
        self.busyChanged.emit(True)
        self.runner.start(job)

    def _on_cross_check_result(self, report: object) -> None:
        if not self._current(self.check_job):
            return
        self.check_job = None
        self.busyChanged.emit(False)
        self.crossCheckDone.emit(report)

    def _on_cross_check_failed(self, message: str) -> None:
        if not self._current(self.check_job):
            return
        self.check_job = None
        self.busyChanged.emit(False)
        self.crossCheckFailed.emit(message)

    def _on_check_result(self, report: object) -> None:
        if not self._current(self.check_job):
            return
        self.check_job = None
        self.busyChanged.emit(False)
        self.checkDone.emit(report)

    def _on_check_failed(self, message: str) -> None:
        if not self._current(self.check_job):
            return
        self.check_job = None
        self.busyChanged.emit(False)
        self.checkFailed.emit(message)


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
