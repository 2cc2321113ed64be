"""One conversation at a time, on the engine side: the chat backend (the local engine's
LocalSession or a server's RemoteSession, both engine.chat.backend.ChatBackend), its
History rows and its settings. Each turn (send, regenerate, Continue, edit) adds its rows,
opens the session and hands it to the RunningAnswer (app/chat/running_answer.py), which
streams the answer and saves it as it comes.

Stored conversations are restored into a fresh LocalSession lazily, on the job thread of
the next turn, because restoring images means preprocessing them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.chat.running_answer import RunningAnswer, SessionCall
from app.chat.tool_gate import ToolGate
from app.conversations.history import History, Snapshot, StoredMessage
from app.desktop.memory import let_go
from app.settings.store import Settings
from app.workers import CallJob, GivenUpJobs, JobRunner
from engine.chat.answer_format import parse_format
from engine.chat.backend import Capability, ChatBackend
from engine.chat.documents import message_room, split, template_overhead, token_counter
from engine.errors import GenerationError, LanternError
from engine.gguf.control_vector import Steering
from engine.launch import open_chat, options_for, steer
from engine.remote.session import RemoteModel
from engine.runtime.loaded_model import LoadedModel
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
        self.check_job: CallJob | None = None   # a check on the engine (app/inspector/checks.py)
        # given-up jobs that may still run on the engine: the next one waits for them
        self.given_up = GivenUpJobs()
        self.answer = RunningAnswer(history, runner, self.tools, self.given_up,
                                    lambda: self.conversation_id, self)
        self._show_answer(self.answer)
        self.draft_system, self.draft_options = "", {}   # a new chat's own settings
        self.draft_format = ""
        self.draft_vectors: list[tuple[str, float]] = []   # a new chat's control vectors
        self.answer_steering = ""    # the control vectors of the answer in progress, in words
        self.steering_table = None   # what they add per block ([n_layers, H]; None: none)
        self._pending: list[StoredMessage] | None = None   # to restore on the next turn

    def _show_answer(self, answer: RunningAnswer) -> None:
        """The answer's signals are the view's (it sends them only while shown)."""
        answer.token.connect(self.token)
        answer.done.connect(self.answerDone)
        answer.failed.connect(self.answerFailed)
        answer.interrupted.connect(self.answerInterrupted)
        answer.promptReady.connect(self.promptReady)
        answer.toolCall.connect(self.toolCall)
        answer.notice.connect(self.notice)
        answer.unanswered.connect(self._take_back)
        answer.sendRejected.connect(self.sendRejected)
        answer.busyChanged.connect(self.busyChanged)
        answer.answeringChanged.connect(self.answeringChanged)
        answer.listChanged.connect(self.listChanged)

    @property
    def busy(self) -> bool:
        """An answer of the conversation shown is being generated (Stop applies)."""
        return self.answer.job is not None and self.answer.shown()

    @property
    def checking(self) -> bool:
        """A check runs on the engine (nothing can be sent until it ends)."""
        return self.check_job is not None

    @property
    def model_name(self) -> str:
        return self.model.name if self.model is not None else ""

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.model.capabilities if self.model is not None else frozenset()

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
        self.answer.interrupt(MODEL_SWITCH_NOTE)
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
        if conversation_id == self.answer.conversation:
            self.session, self._pending = self.answer.session, None
        else:
            self.session, self._pending = None, messages
        self.conversationChanged.emit(conversation_id)
        self.busyChanged.emit(self.busy)
        return messages

    def delete(self, conversation_id: int) -> Snapshot | None:
        """Delete a conversation; the snapshot returned puts it back (`undelete`)."""
        if conversation_id == self.answer.conversation:
            self.answer.interrupt("interrupted")
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
        self.require_idle()
        if self.conversation_id is None:
            conversation = self.history.create(title_of(text, images), self.model_name,
                                               self.draft_system, self.draft_options,
                                               self.draft_format)
            self.history.set_control_vectors(conversation.id, self.draft_vectors)
            self.conversation_id = conversation.id
            self.conversationChanged.emit(conversation.id)
        user_id = self.history.add(self.conversation_id, "user", text, images)
        answer_id = self._start_answer(
            lambda session, inputs: session.send(text, inputs), images,
            sent=(user_id, text, images))
        return Turn(user_id, answer_id)

    def regenerate(self) -> Turn:
        self.require_idle()
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
        self.require_idle()
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
        self.require_idle()
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

    def shutdown(self) -> None:
        """The window closes: give up what runs, saving the answer as far as it got."""
        self.answer.interrupt("interrupted")
        self.give_up_check()

    def require_idle(self) -> None:
        """Nothing else on the engine: a turn or a check may start (else says why not)."""
        if self.model is None:
            raise GenerationError("no model is loaded: choose one in the sidebar first")
        if self.checking:
            raise GenerationError("the reference check is still running: wait for its verdict")
        if self.busy:
            raise GenerationError("the model is still busy: wait for it or press Stop")
        if self.answer.job is not None:   # one answer at a time: never two jobs on one model
            other = self.history.conversation(self.answer.conversation)
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

    def _start_answer(self, turn: SessionCall, images: tuple[str, ...] = (),
                      answer_id: int | None = None, so_far: StoredMessage | None = None,
                      sent: tuple[int, str, tuple[str, ...]] | None = None) -> int:
        """The running answer answers this conversation's session (see RunningAnswer.start)."""
        session = self.open_session()
        return self.answer.start(
            self.conversation_id, self.model, session, turn, self.settings,
            produced_by(self.model, session, self.where), images=images,
            answer_id=answer_id, so_far=so_far, sent=sent, pending=self.take_pending(),
            vision=self.vision, steering=self.answer_steering)

    def take_pending(self) -> list[StoredMessage] | None:
        """The stored messages the next job restores its fresh session from (once)."""
        pending, self._pending = self._pending, None
        return pending

    def open_session(self) -> ChatBackend:
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

    def _take_back(self, user_id: int) -> None:
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

    # -- checks on the engine (app/inspector/checks.py runs them) ----------------------------

    def start_check(self, job: CallJob) -> None:
        """A check's job takes the engine: nothing is sent until `end_check`."""
        self.check_job = job
        self.busyChanged.emit(True)
        self.runner.start(job)

    def end_check(self, job: QObject | None) -> bool:
        """The check ``job`` ended: False when it had been given up (its result is dropped)."""
        if job is None or job is not self.check_job:
            return False
        self.check_job = None
        self.busyChanged.emit(False)
        return True

    def give_up_check(self) -> None:
        """Cancel the reference check or cross-check (its conversation or model is left);
        it ends by itself and its result is dropped."""
        job = self.check_job
        if job is None:
            return
        job.cancel()
        self.given_up.add(job)
        self.check_job = None
        self.busyChanged.emit(False)
