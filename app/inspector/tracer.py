"""Decides what the Tracing tab shows, and runs causal tracing off the GUI thread.

It follows the conversation: its latest user message is the clean text, refreshed when an
answer starts and when another conversation opens. The texts go through the model's chat
template with the conversation's system prompt (or verbatim), as `lantern trace` does. A
trace is a cancellable job over engine.inspect.tracing, never run while an answer streams:
an answer that starts cancels it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject

from app.chat.conversation import ConversationController
from app.inspector.tracing_page import TracingPage
from app.workers import Job, JobRunner, ProgressJob
from engine.chat.backend import Capability
from engine.chat.messages import Message
from engine.inspect.tracing import Trace, trace

IMAGES = ("This message holds an image: causal tracing compares two token sequences of text "
          "only, so it cannot trace it. Send a text message to trace it.")
STREAMING = "An answer is streaming: trace again when it ends."


class Tracer(QObject):
    def __init__(self, page: TracingPage, conversation: ConversationController,
                 runner: JobRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.page, self.conversation, self.runner = page, conversation, runner
        self.job: Job | None = None
        self.shown: str | None = None            # the text of the message shown
        self.piece: Callable[[int], str] = str
        conversation.promptReady.connect(self.refresh)
        conversation.busyChanged.connect(self._busy)
        page.traceRequested.connect(self.start)
        page.cancelRequested.connect(self.cancel)
        page.textsEdited.connect(self.count)

    def refresh(self, *_prompt) -> None:
        """Show the conversation's latest message; the corrupted copy is kept while its
        text is the one shown (the same message answered again)."""
        message = self.conversation.last_user_message()
        shown = None if message is None else message.content
        if shown == self.shown:
            return
        self.shown = shown
        self.page.set_clean(message.content if message else "",
                            IMAGES if message is not None and message.images else "")
        self.count()

    def clear(self) -> None:
        """Another conversation: a running trace is cancelled, its result dropped."""
        self.cancel()
        self.shown = None
        self.page.clear()
        self.refresh()

    def _busy(self, busy: bool) -> None:
        if busy and self.conversation.busy:
            self.cancel(STREAMING)

    def _ids(self, text: str) -> list[int]:
        model = self.conversation.model
        if self.page.plain.isChecked():
            return list(model.tokenize_raw(text).ids)
        return list(model.tokenize_chat([Message("user", text)],
                                        system=self.conversation.system_prompt()).ids)

    def _texts(self) -> tuple[list[int], list[int]] | None:
        """Both texts' token ids, or None where they cannot be traced (the page says why)."""
        page, conversation = self.page, self.conversation
        if not page.clean.toPlainText() or page.corrupt.isReadOnly():
            return None
        if conversation.model is None or Capability.REFERENCE not in conversation.capabilities:
            page.counts.setText("Causal tracing needs a model whose weights are on this "
                                "computer: load one from the model list.")
            return None
        clean, corrupt = self._ids(page.clean.toPlainText()), self._ids(page.corrupt_text())
        able = page.show_counts(len(clean), len(corrupt), clean == corrupt)
        return (clean, corrupt) if able else None

    def count(self) -> None:
        if self.job is None:
            self._texts()

    def start(self) -> None:
        if self.conversation.busy:
            self.page.show_failed(STREAMING)
            return
        texts = self._texts()
        if texts is None or self.job is not None:
            return
        model = self.conversation.model
        gguf, self.piece = model.gguf, model.tokenizer.id_to_piece
        clean, corrupt = texts

        def run(progress, cancel) -> Trace:
            return trace(gguf, clean, corrupt, progress=progress, cancel=cancel)

        job = ProgressJob(run)
        # bound methods of GUI-thread objects only: the job's signals are then queued
        job.progress.connect(self._progress)
        job.result.connect(self._traced)
        job.failed.connect(self._failed)
        self.job = job
        self.page.show_running()
        self.runner.start(job)

    def cancel(self, note: str = "Cancelled.") -> None:
        if self.job is not None:
            self.job.cancel()
            self.job = None
            self.page.show_failed(note)

    def _progress(self, stage: str, fraction: float) -> None:
        if self.sender() is self.job:     # a cancelled job's late report would hide why
            self.page.show_progress(stage, fraction)

    def _traced(self, result: Trace) -> None:
        if self.sender() is self.job:     # not a result cancelled meanwhile
            self.job = None
            self.page.show_result(result, self.piece)

    def _failed(self, message: str) -> None:
        if self.sender() is self.job:
            self.job = None
            self.page.show_failed(f"The trace could not run: {message}")
