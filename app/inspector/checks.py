"""The two checks of the loaded model on the conversation shown: the engine against the
numpy reference on its last prompt (the Reference tab), and against a server running the
same weights (the cross-check dialog). Each runs as a job on the conversation's engine,
which holds it as it holds an answer: sending waits for it, and leaving the conversation
or the model gives it up (its late result is dropped).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal, SignalInstance

from app.chat.conversation import ConversationController
from app.chat.running_answer import restore_messages
from app.workers import CallJob
from engine.chat.backend import Capability, unavailable_reason
from engine.errors import GenerationError
from engine.remote.crosscheck import cross_check
from engine.remote.session import RemoteModel


class Checks(QObject):
    checkDone = Signal(object)               # engine.runtime.check.CheckReport
    checkFailed = Signal(str)
    crossCheckDone = Signal(object)          # engine.remote.crosscheck.CrossCheckReport
    crossCheckFailed = Signal(str)

    def __init__(self, conversation: ConversationController,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.conversation = conversation
        self._report: tuple[SignalInstance, SignalInstance] | None = None  # the running one's

    def check(self) -> None:
        """Compare engine and numpy reference on the current context (off the GUI thread)."""
        conversation = self.conversation
        conversation.require_idle()
        if Capability.REFERENCE not in conversation.capabilities:
            raise GenerationError(unavailable_reason(Capability.REFERENCE,
                                                     conversation.model_name, conversation.where))
        if (conversation.session is None or conversation.session.last_prompt is None) and \
                conversation.last_user_message() is None:
            raise GenerationError("send a message first: the check runs on the last prompt")
        session = conversation.open_session()
        pending = conversation.take_pending()
        before = conversation.given_up.running()
        max_pixels, vision = conversation.settings.max_pixels, conversation.vision

        def run_check(cancel: threading.Event) -> object:
            for ended in before:
                ended.wait()
            if pending is not None:      # a conversation reopened: restored here first
                session.messages, _ = restore_messages(pending, max_pixels, vision,
                                                       session.prepare_image)
            return session.check_against_reference(cancel)

        self._start(run_check, self.checkDone, self.checkFailed)

    def cross_check(self, remote: RemoteModel, same_weights: bool, num_predict: int) -> None:
        """The server's greedy answer to this conversation against Lantern's own
        log-probabilities along it (off the GUI thread; sending waits for it)."""
        conversation = self.conversation
        conversation.require_idle()
        if Capability.LOGITS not in conversation.capabilities:
            raise GenerationError("the cross-check compares Lantern's own engine with a "
                                  "server: load a model from this computer first")
        session = conversation.session
        if session is None or not any(m.role == "user" for m in session.messages):
            raise GenerationError("send a message first: the cross-check answers the "
                                  "conversation's last user message again")
        messages = list(session.messages)
        while messages[-1].role != "user":
            messages.pop()
        if any(m.images for m in messages):
            raise GenerationError("the cross-check compares text conversations: start a "
                                  "new chat without images")
        model, system = conversation.model, session.system
        before = conversation.given_up.running()

        def run_cross_check(_: threading.Event) -> object:
            for ended in before:
                ended.wait()
            return cross_check(model, remote, messages, system, num_predict=num_predict,
                               same_weights_asserted=same_weights, num_ctx=model.num_ctx)

        self._start(run_cross_check, self.crossCheckDone, self.crossCheckFailed)

    def _start(self, call: Callable[[threading.Event], object], done: SignalInstance,
               failed: SignalInstance) -> None:
        """``call(cancel)`` as the check's job on the conversation's engine; its result or
        failure goes to ``done`` or ``failed`` unless the check was given up meanwhile."""
        job = CallJob(lambda: call(job.cancel_event))
        # bound methods of GUI-thread objects only: the job's signals are then queued
        job.result.connect(self._result)
        job.failed.connect(self._failed)
        self._report = (done, failed)
        self.conversation.start_check(job)

    def _result(self, report: object) -> None:
        if self.conversation.end_check(self.sender()):
            self._report[0].emit(report)

    def _failed(self, message: str) -> None:
        if self.conversation.end_check(self.sender()):
            self._report[1].emit(message)
