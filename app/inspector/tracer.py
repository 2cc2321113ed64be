"""Decides what the Tracing tab shows, and runs causal tracing off the GUI thread.

It follows the conversation: its latest user message is the clean text, refreshed when an
answer starts and when another conversation opens. The texts go through the model's chat
template with the conversation's system prompt (or verbatim), as `lantern trace` does; the
message's images go with both, read and encoded in the job (the token counts shown while
editing are the texts' alone), or with the corrupted text noised (engine.inspect.tracing's
``noised``), their patches restored in groups that keep an image to IMAGE_COLUMNS columns.
A trace is a cancellable job over engine.inspect.tracing, steered as the answers are, never
run while an answer streams: an answer that starts cancels it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QObject

from app.chat.conversation import ConversationController
from app.inspector.panel import DebugPanel
from app.workers import Job, JobRunner, ProgressJob
from engine.chat.backend import Capability
from engine.chat.messages import Message
from engine.chat.prompt_tokens import PromptTokens
from engine.inspect.occlusion import fitting_patch_group
from engine.inspect.tracing import IMAGE_COLUMNS, Trace, noised, trace

PLAIN_IMAGES = ("Plain text cannot carry the message's image: clear Plain text to trace "
                "it with the chat template.")
STREAMING = "An answer is streaming: trace again when it ends."


def prompt(model, text: str, plain: bool, system: str | None, images: tuple = ()) -> PromptTokens:
    """``text`` as the trace takes it: verbatim (``plain``), or in the chat template with
    ``images`` (prepared; none for the counts)."""
    if plain:
        return model.tokenize_raw(text)
    return model.tokenize_chat([Message("user", text, images)], system=system)


class Tracer(QObject):
    def __init__(self, panel: DebugPanel, conversation: ConversationController,
                 runner: JobRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.panel, self.page = panel, panel.tracing
        self.conversation, self.runner = conversation, runner
        self.job: Job | None = None
        self.shown: str | None = None            # the text of the message shown
        self.images: tuple[str, ...] = ()        # the paths of its images
        self.piece: Callable[[int], str] = str
        conversation.promptReady.connect(self.refresh)
        conversation.busyChanged.connect(self._busy)
        self.page.traceRequested.connect(self.start)
        self.page.cancelRequested.connect(self.cancel)
        self.page.textsEdited.connect(self.count)
        panel.pageShown.connect(lambda page: page is self.page and self.count())

    def refresh(self, *_prompt) -> None:
        """Show the conversation's latest message; the corrupted copy is kept while its
        text is the one shown (the same message answered again)."""
        message = self.conversation.last_user_message()
        shown = None if message is None else message.content
        if shown == self.shown:
            return
        self.shown = shown
        self.images = tuple(message.images) if message is not None else ()
        self.page.set_clean(message.content if message else "", images=len(self.images))
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

    def _texts(self) -> tuple[str, str] | None:
        """Both texts, or None where they cannot be traced (the page says why)."""
        page, conversation = self.page, self.conversation
        if not page.clean.toPlainText() or page.corrupt.isReadOnly():
            return None
        model = conversation.model
        if model is None or Capability.REFERENCE not in conversation.capabilities:
            page.counts.setText("Causal tracing needs a model whose weights are on this "
                                "computer: load one from the model list.")
            return None
        if self.images and page.plain.isChecked():
            page.show_blocked(PLAIN_IMAGES)
            return None
        texts = page.clean.toPlainText(), page.corrupt_text()
        plain, system = page.plain.isChecked(), conversation.system_prompt()
        clean, corrupt = (prompt(model, t, plain, system).ids for t in texts)
        able = page.show_counts(len(clean), len(corrupt), np.array_equal(clean, corrupt))
        return texts if able else None

    def count(self) -> None:
        """The texts' token counts, while the tab is on show (each is an exchange with the
        tokenizer's process, on the window's time); the tab counts when it comes on show."""
        if self.job is None and self.panel.showing(self.page):
            self._texts()

    def start(self) -> None:
        if self.conversation.busy:
            self.page.show_failed(STREAMING)
            return
        texts = self._texts()
        if texts is None or self.job is not None:
            return
        model, conversation, paths = self.conversation.model, self.conversation, self.images
        self.piece = model.tokenizer.id_to_piece
        max_pixels, steering = conversation.settings.max_pixels, conversation.steering_table
        plain, system = self.page.plain.isChecked(), conversation.system_prompt()
        noise = self.page.noised()

        def run(progress, cancel) -> Trace:
            progress("Reading the image" if paths else "Tokenizing", 0.0)
            images = tuple(model.prepare_image(path, max_pixels) for path in paths)
            clean = prompt(model, texts[0], plain, system, images)
            corrupt = prompt(model, texts[1], plain, system,
                             tuple(noised(image) for image in images) if noise else images)
            return trace(model.gguf, clean, corrupt, steering=steering, progress=progress,
                         patch_group=fitting_patch_group(clean, len(clean), IMAGE_COLUMNS),
                         cancel=cancel)

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
