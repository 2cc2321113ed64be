"""The centre of the window: the conversation view above the input box, kept in step
with the ConversationController (messages added, answers streamed, actions offered only
where they make sense: Edit on the last question, Regenerate on the last answer).
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial
from pathlib import Path

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.chat.conversation import ConversationController, Turn
from app.chat.header import ConversationHeader
from app.chat.input_box import InputBox, Submission
from app.chat.saved_tokens import saved_tokens
from app.chat.steering_bar import SteeringBar
from app.chat.tool_gate import describe_call
from app.chat.view import ChatView, MessageWidget
from app.conversations.history import StoredMessage
from engine.chat.events import DoneEvent, TokenEvent, ToolCallEvent
from engine.errors import LanternError

BUILD_SLICE_S = 0.008     # a reopened conversation's bubbles are built this long per turn
KEPT_MESSAGES = 60        # a chat's newest bubbles kept built; older ones when scrolled up to
MORE_AT_TOP = 20          # older bubbles built each time the user reaches the top
LET_GO_SLACK = 20         # how far past KEPT_MESSAGES a chat grows before its oldest go
KEPT_SCREENS = 2          # ...and never below this many heights of the view
DONE_NOTES = {"cancel": "stopped", "length": "cut off at the length limit"}


def no_vision_text(model_name: str, count: int) -> str:
    images = "an image" if count == 1 else f"{count} images"
    return (f"{model_name or 'The current model'} cannot see images, so {images} cannot be "
            "sent to it. Choose a vision model (marked “vision” in the sidebar, e.g. "
            "qwen2.5vl) or remove the images.")


def no_video_text(model_name: str, paths: list[str]) -> str:
    names = ", ".join(Path(p).name for p in paths)
    return (f"{model_name or 'The current model'} cannot read video: it sees only the first "
            f"frame of {names}. Choose a Qwen3-VL model to send an animation as a video, "
            "or send the first frame as it is.")


def latest_exchange(messages: list[StoredMessage]) -> int:
    """Where the latest question and answer start: what a reopened chat shows first (and
    what Edit, Regenerate and the panel work on)."""
    latest = [max((i for i, m in enumerate(messages) if m.role == role), default=-1)
              for role in ("user", "assistant")]
    return min((i for i in latest if i >= 0), default=0)


class ChatPage(QWidget):
    message = Signal(str, str)               # banner level, text
    tokenHovered = Signal(object)            # TokenEvent under the mouse
    tokenClicked = Signal(object)            # TokenEvent clicked (inspect it)

    def __init__(self, controller: ConversationController,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatPage")
        self.controller = controller
        self.answer: MessageWidget | None = None      # the answer being streamed
        self.color_tokens = False
        self._unbuilt: list[StoredMessage] = []     # older messages not shown yet
        self._wanted = 0                             # bubbles to build up to, then stop
        self._model_name = ""
        self._build_timer = QTimer(self, singleShot=True, interval=0)
        self._build_timer.timeout.connect(self._build_older)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.header = ConversationHeader()
        layout.addWidget(self.header)
        self.view = ChatView()
        self.view.reachedTop.connect(self._build_more)
        layout.addWidget(self.view, 1)
        self.steering = SteeringBar()
        self.steering.changed.connect(controller.set_control_vectors)
        layout.addWidget(self.steering)
        self.input = InputBox()
        layout.addWidget(self.input)
        self.input.submitted.connect(self._submitted)
        self.input.stopRequested.connect(controller.answer.stop)
        self.input.set_ready(False)
        self.input.documents.count_tokens = controller.count_tokens
        self.input.documents.message_room = controller.message_room
        controller.token.connect(self._on_token)
        controller.answerDone.connect(self._on_done)
        controller.answerFailed.connect(self._on_failed)
        controller.answerInterrupted.connect(self._on_interrupted)
        controller.sendRejected.connect(self._on_rejected)
        controller.busyChanged.connect(self._on_busy)
        controller.toolCall.connect(self._on_tool_call)

    # -- showing conversations -------------------------------------------------------------

    def show_conversation(self, messages: list[StoredMessage], model_name: str) -> None:
        """A stored conversation: its latest exchange at once, the older messages from the
        newest back over the next turns of the event loop (a long chat built in one go
        would freeze the window), up to KEPT_MESSAGES; the rest when scrolled up to."""
        self._forget_shown()
        self._unbuilt, self._model_name = list(messages), model_name
        self._wanted = KEPT_MESSAGES
        self._build_older(floor=latest_exchange(messages))
        self._resume_answer()

    def _resume_answer(self) -> None:
        """Back on a conversation still being answered (in the background meanwhile): its
        bubble streams on from what was written so far."""
        controller = self.controller
        if not controller.busy:
            return
        self.answer = next((w for w in self.view.messages
                            if w.message_id == controller.answer.message_id), None)
        if self.answer is not None:
            self.answer.tokens = []
            self.answer.unfinished = False
            self.answer.set_text(controller.answer.text, immediate=True)
            self.answer.set_status("writing…")
            self._update_actions()

    def _build_older(self, floor: int | None = None) -> None:
        """Bubbles for the newest unbuilt messages: down to ``floor`` (an index: the
        latest exchange, shown at once), else while BUILD_SLICE_S lasts; the rest on the
        next turns, until the view holds the bubbles wanted."""
        started, latest = time.perf_counter(), floor is not None

        def more() -> bool:
            if latest:
                return len(self._unbuilt) > floor
            return self._wants_more() and time.perf_counter() - started < BUILD_SLICE_S

        while self._unbuilt and more():
            widget = self.view.prepend(self._restored(self._unbuilt.pop()))
            if not latest:       # older than the latest exchange: no Edit, no Regenerate
                widget.set_action_enabled("Edit", False)
                widget.set_action_enabled("Regenerate", False)
        if self._wants_more():
            self._build_timer.start()
        if latest:
            self._update_actions()

    def _wants_more(self) -> bool:
        return bool(self._unbuilt) and len(self.view.messages) < self._wanted

    def _build_more(self) -> None:
        """The user reached the top: the next older messages, if any are not shown."""
        if self._unbuilt and not self.building:
            self._wanted = len(self.view.messages) + MORE_AT_TOP
            self._build_timer.start()

    def _let_go_of_oldest(self) -> None:
        """A chat followed at its end keeps its newest KEPT_MESSAGES bubbles (at least
        KEPT_SCREENS of them): the older ones leave (every LET_GO_SLACK messages, not on
        each answer) and are built again from the history when the user scrolls up to
        them, so a long chat does not grow the window's memory without end."""
        extra = len(self.view.messages) - KEPT_MESSAGES
        if (extra < LET_GO_SLACK or not self.view.following or self.building
                or self.view.screens_from(extra) < KEPT_SCREENS):
            return          # (what fits in the view would only be built again at once)
        stored = self.controller.history.messages(self.controller.conversation_id,
                                                  logprobs=False)
        ids = [m.id for m in stored]
        first_kept = self.view.messages[extra].message_id
        if first_kept not in ids:
            return
        self.view.drop_oldest(extra)
        self._unbuilt = stored[:ids.index(first_kept)]

    def _restored(self, stored: StoredMessage) -> MessageWidget:
        widget = self._new_widget(stored.role, stored.content, stored.images, stored.id,
                                  stored.model or self._model_name)
        if stored.thinking:
            widget.thinking.finish(stored.thinking, stored.thinking_ms)
        if stored.role == "assistant":
            self._show_answer(widget, stored)
        return widget

    def _show_answer(self, widget: MessageWidget, stored: StoredMessage) -> None:
        """A stored answer (or another of its versions) in its bubble."""
        widget.read_tokens_with(partial(self._saved_tokens, stored))
        widget.set_steering(stored.steering)
        widget.set_versions(stored.version, stored.versions)
        cut_short = stored.done_reason in DONE_NOTES       # stopped, or at the length limit
        widget.unfinished = cut_short or not stored.complete
        widget.set_status(DONE_NOTES[stored.done_reason] if cut_short else
                          "" if stored.complete else "interrupted")
        if self.color_tokens:
            widget.set_color_tokens(True)

    def _saved_tokens(self, stored: StoredMessage) -> list:
        """An answer's saved tokens, its rows read from the history now (a reopened
        conversation comes without them)."""
        return saved_tokens(replace(stored, logprobs=self.controller.history.logprobs(stored.id)))

    @property
    def building(self) -> bool:
        """Older messages of the conversation shown are being built."""
        return self._build_timer.isActive()

    @property
    def older_unbuilt(self) -> int:
        """Older messages of the conversation shown that have no bubble (yet)."""
        return len(self._unbuilt)

    def last_answer_tokens(self) -> list:
        """The latest answer's tokens (saved ones for a reopened conversation)."""
        last = next((w for w in reversed(self.view.messages) if w.role == "assistant"), None)
        return list(last.tokens) if last is not None else []

    def clear(self) -> None:
        self._forget_shown()
        self.input.cancel_edit()

    def _forget_shown(self) -> None:
        self._build_timer.stop()
        self._unbuilt = []
        self.view.clear()
        self.answer = None

    def refresh_header(self) -> None:
        """Title, model and this conversation's own settings; the empty chat's hint."""
        controller = self.controller
        stored = (controller.history.conversation(controller.conversation_id)
                  if controller.conversation_id is not None else None)
        system, options = controller.conversation_settings()
        self.steering.set_vectors(controller.control_vectors())
        self.header.show_conversation(stored.title if stored else "New chat",
                                      controller.model_name or (stored.model if stored else ""),
                                      system, options, controller.conversation_format())
        if controller.model is None and self.input.loading is not None:
            self.view.set_hint(f"Loading {self.input.loading}… type your message meanwhile: "
                               "Enter sends it when the model is ready.")
        elif controller.model is None:
            self.view.set_hint("Pick a model on the left (Ctrl+K) to start chatting.")
        else:
            self.view.set_hint(f"Ask {controller.model_name} anything: type below and press "
                               "Enter (Shift+Enter for a new line).\nCtrl+N starts a new "
                               "chat, Ctrl+K picks another model, F1 lists the shortcuts.")

    def copy_last_answer(self) -> bool:
        """Put the latest answer on the clipboard; False when there is none yet."""
        last = next((w for w in reversed(self.view.messages)
                     if w.role == "assistant" and w.text), None)
        if last is not None:
            self._copy(last)
        return last is not None

    def set_color_tokens(self, enabled: bool) -> None:
        self.color_tokens = enabled
        for widget in self.view.messages:
            if widget.role == "assistant":
                widget.set_color_tokens(enabled)

    def _add(self, role: str, text: str, images: tuple[str, ...],
             message_id: int | None) -> MessageWidget:
        widget = self._new_widget(role, text, images, message_id)
        if role == "assistant":
            widget.set_color_tokens(self.color_tokens)
        return self.view.add(widget)

    def _new_widget(self, role: str, text: str, images: tuple[str, ...],
                    message_id: int | None, model_name: str = "") -> MessageWidget:
        title = "You" if role == "user" else (model_name or self.controller.model_name
                                              or "Assistant")
        widget = MessageWidget(role, title, text, images, message_id)
        widget.copyRequested.connect(self._copy)
        widget.editRequested.connect(self._edit)
        widget.regenerateRequested.connect(self._regenerate)
        widget.continueRequested.connect(self._continue)
        widget.versionRequested.connect(self._show_version)
        widget.tokenHovered.connect(self._hovered)
        widget.tokenClicked.connect(
            lambda w, i: self.tokenClicked.emit(w.tokens[i]) if 0 <= i < len(w.tokens) else None)
        return widget

    # -- turns -----------------------------------------------------------------------------

    def _submitted(self, submission: Submission) -> None:
        if submission.images and not self.controller.vision:
            self.message.emit("warning", no_vision_text(self.controller.model_name,
                                                        len(submission.images)))
            return
        try:
            if submission.edit:
                turn = self.controller.edit_last_user(submission.text)
            else:
                turn = self.controller.send(submission.text, submission.images)
        except LanternError as error:
            self.message.emit("error", str(error))
            return
        if submission.edit:
            last_user = next(w for w in reversed(self.view.messages) if w.role == "user")
            images = last_user.images
            self.view.remove_from(last_user)
            self._add("user", submission.text, images, turn.user_id)
        else:
            self._add("user", submission.text, submission.images, turn.user_id)
        self.input.accept_submission()
        self._start_answer(turn, len(submission.images))

    def _start_answer(self, turn: Turn, images: int = 0) -> None:
        self.answer = self._add("assistant", "", (), turn.answer_id)
        stored = self.controller.history.message(turn.answer_id)
        if stored is not None:
            self.answer.set_versions(stored.version, stored.versions)
        # the vision tower runs before the first token (built on first use: seconds)
        self.answer.set_status("looking at the image…" if images == 1 else
                               f"looking at {images} images…" if images else "writing…")
        self._update_actions()

    def _regenerate(self, widget: MessageWidget) -> None:
        try:
            turn = self.controller.regenerate()
        except LanternError as error:
            self.message.emit("error", str(error))
            return
        self.view.remove_from(widget)
        self._start_answer(turn)

    def _continue(self, widget: MessageWidget) -> None:
        """The answer goes on where it stopped, in the same bubble."""
        try:
            self.controller.continue_answer()
        except LanternError as error:
            self.message.emit("error", str(error))
            return
        self.answer, widget.unfinished = widget, False
        widget.set_status("writing…")
        self._update_actions()

    def _show_version(self, widget: MessageWidget, number: int) -> None:
        """‹ ›: another version of the answer, which the conversation then goes on from."""
        try:
            stored = self.controller.show_version(widget.message_id, number)
        except LanternError as error:
            self.message.emit("error", str(error))
            return
        if stored is None:
            return
        widget.set_title(stored.model or self.controller.model_name or "Assistant")
        widget.thinking.finish(stored.thinking, stored.thinking_ms)   # (none: hidden)
        widget.set_text(stored.content, immediate=True)
        self._show_answer(widget, stored)
        self._update_actions()

    def _edit(self, widget: MessageWidget) -> None:
        self.input.begin_edit(widget.text)

    def _copy(self, widget: MessageWidget) -> None:
        QGuiApplication.clipboard().setText(widget.text)

    def _hovered(self, widget: MessageWidget, index: int) -> None:
        if 0 <= index < len(widget.tokens):
            self.tokenHovered.emit(widget.tokens[index])

    # -- controller signals ----------------------------------------------------------------

    def _on_token(self, event: TokenEvent) -> None:
        if self.answer is None:
            return
        thinking = self.answer.thinking
        if not self.answer.tokens:
            self.answer.set_status("thinking…" if event.thinking else "writing…")
        self.answer.tokens.append(event)
        if event.thinking_text or (event.thinking and thinking.isHidden()):
            thinking.stream(self.controller.answer.thinking, self.controller.answer.thinking_ms)
        if event.text and thinking.streaming:      # the answer starts: fold the thinking
            thinking.finish(self.controller.answer.thinking, self.controller.answer.thinking_ms)
            self.answer.set_status("writing…")
        self.answer.set_text(self.controller.answer.text)

    def _on_tool_call(self, event: ToolCallEvent) -> None:
        if self.answer is not None:
            self.answer.add_tool_call(*describe_call(event))

    def _on_done(self, event: DoneEvent) -> None:
        if self.answer is None:
            return
        controller = self.controller          # (a continued answer: all of it)
        self.answer.set_text(controller.answer.text, immediate=True)
        if controller.answer.thinking:
            self.answer.thinking.finish(controller.answer.thinking, controller.answer.thinking_ms)
        self.answer.set_status(DONE_NOTES.get(event.done_reason, ""))
        self.answer.unfinished = event.done_reason in DONE_NOTES
        self.answer.set_steering(event.steering)
        self.answer = None
        self._update_actions()
        self._let_go_of_oldest()

    def _on_interrupted(self, note: str) -> None:
        """The answer was given up (model switch, conversation switch): it keeps what was
        shown, with ``note`` beside it."""
        if self.answer is None:
            return
        self.answer.set_text(self.controller.answer.text, immediate=True)
        self.answer.set_status(note)
        self.answer.unfinished = True
        self.answer = None
        self._update_actions()
        self._let_go_of_oldest()

    def _on_failed(self, message: str) -> None:
        if self.answer is not None:
            earlier = self.controller.history.message(self.answer.message_id)
            if self.answer.text:
                self.answer.set_status("failed")
            elif earlier is not None:         # a regenerated version failed: the one before
                self.answer.set_text(earlier.content, immediate=True)
                self._show_answer(self.answer, earlier)
            else:
                self.view.remove_from(self.answer)
            self.answer = None
        self._update_actions()
        self.message.emit("error", message)

    def _on_rejected(self, text: str, images: tuple[str, ...]) -> None:
        """The message got no answer (the error says why): it goes back into the input
        to be shortened or fixed, and its bubble goes."""
        last_user = next((w for w in reversed(self.view.messages) if w.role == "user"), None)
        if last_user is not None and last_user.text == text:
            self.view.remove_from(last_user)
        if not self.input.editor.toPlainText().strip():
            self.input.editor.setPlainText(text)
            self.input.attach(list(images))
        self._update_actions()

    def _on_busy(self, _busy: bool) -> None:
        # an answer makes Send a Stop button; the reference check just holds sending
        self.input.set_busy(self.controller.busy)
        self.input.set_ready(self.controller.model is not None and not self.controller.checking)
        self._update_actions()

    def _update_actions(self) -> None:
        busy = self.controller.busy or self.controller.checking
        last_user = next((w for w in reversed(self.view.messages) if w.role == "user"), None)
        last = self.view.messages[-1] if self.view.messages else None
        for widget in self.view.messages:
            widget.set_action_enabled("Edit", widget is last_user and not busy)
            widget.set_action_enabled("Regenerate", widget is last and
                                      widget.role == "assistant" and not busy)
            widget.set_action_enabled("Continue", widget is last and widget.unfinished
                                      and widget.role == "assistant" and not busy)
