"""Runs the Reference tab's layer dumps off the GUI thread: the export of the latest
context and the comparison with another engine's dump, each a job with progress and
Cancel, never while an answer streams (one that starts streaming cancels it)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject

from app.chat.conversation import ConversationController
from app.inspector.dump_section import DumpSection
from app.workers import Job, JobRunner, ProgressJob
from engine.chat.prompt_tokens import PromptTokens
from engine.inspect.dump_compare import compare_dump, export_dump
from engine.inspect.inspection import Progress

STREAMING = "An answer is streaming: export or compare a layer dump when it has ended."


class DumpJobs(QObject):
    def __init__(self, section: DumpSection, conversation: ConversationController,
                 runner: JobRunner, context: Callable[[], PromptTokens | None],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.section, self.conversation, self.runner = section, conversation, runner
        self.context = context               # the conversation's latest context, if any
        self.job: Job | None = None
        self.folder: Path | None = None      # the running job's
        section.exportRequested.connect(self.export)
        section.compareRequested.connect(self.compare)
        section.cancelRequested.connect(self.cancel)

    def export(self, folder: Path) -> None:
        """The reference's dump of the latest context, written to ``folder``."""
        model, context = self.conversation.model, self.context()
        if model is None or context is None:
            self.section.show_status("Send a message first: the dump holds the reference's "
                                     "layers over the conversation's latest context.")
            return
        gguf, name = model.gguf, self.conversation.model_name
        self._start(lambda progress, cancel: export_dump(gguf, name, context, folder,
                                                         progress=progress, cancel=cancel),
                    folder, self._exported,
                    f"Running the reference over {len(context)} tokens for {folder}…")

    def compare(self, folder: Path) -> None:
        """Another engine's dump in ``folder`` against the reference of the loaded model."""
        model, context = self.conversation.model, self.context()
        if model is None:
            self.section.show_status("Load a model first: the dump is compared with its "
                                     "reference.")
            return
        gguf, name = model.gguf, self.conversation.model_name
        self._start(lambda progress, cancel: compare_dump(
            gguf, name, folder, expected=context, progress=progress, cancel=cancel),
            folder, self._compared, f"Comparing the dump in {folder} with the reference…")

    def _start(self, call: Callable[[Progress, threading.Event], object], folder: Path,
               done: Callable[[object], None], text: str) -> None:
        if self.conversation.busy:
            self.section.show_status(STREAMING)
            return
        self._drop()
        job = ProgressJob(call)
        # bound methods of GUI-thread objects only: the job's signals are then queued
        job.progress.connect(self.section.show_progress)
        job.result.connect(done)
        job.failed.connect(self._failed)
        self.job, self.folder = job, folder
        self.section.show_running(text)
        self.runner.start(job)

    def _exported(self, dump) -> None:
        if self.sender() is self.job:
            self.job = None
            logits = " and the logits" if dump.logits is not None else ""
            self.section.show_status(f"Wrote {len(dump.hidden_states)} hidden states of "
                                     f"{len(dump.ids)} tokens{logits} to {self.folder}.")

    def _compared(self, comparison) -> None:
        if self.sender() is self.job:
            self.job = None
            self.section.show_comparison(comparison, self.folder)

    def _failed(self, message: str) -> None:
        if self.sender() is self.job:
            self.job = None
            self.section.show_status(message)

    def cancel(self) -> None:
        if self._drop():
            self.section.show_status("Cancelled.")

    def clear(self) -> None:
        """Another conversation: a running job is dropped, the results shown too."""
        self._drop()
        self.section.clear()

    def _drop(self) -> bool:
        """Cancel the running job, whose late signals are then ignored; was there one?"""
        if self.job is None:
            return False
        self.job.cancel()
        self.job = None
        return True
