"""Fills the Compare tab: which store models can be compared with the loaded one, and the
comparison itself over the conversation's latest context (the Inspector's), off the GUI
thread. Like the inspections it is a cancellable job with progress that never runs while
an answer streams: sending cancels it, and a new answer, conversation or model clears it.
A context with an image is compared too (each model reads the picture through its own
tower); the store's models without a vision tower are then listed greyed.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject

from app.chat.conversation import ConversationController
from app.inspector.compare_page import SAME_FAMILY
from app.inspector.inspector import Inspector
from app.inspector.panel import DebugPanel
from app.workers import CallJob, Job, JobRunner, ProgressJob
from engine.chat.backend import Capability
from engine.inspect import image_grids
from engine.inspect.compare_images import picture_inputs
from engine.inspect.model_compare import Candidate, compare_candidates, compare_with
from engine.store import Store

NO_TEXT = ("Send a message first: the comparison runs over the latest prompt and answer "
           "as the template rendered them.")


class ModelComparer(QObject):
    def __init__(self, panel: DebugPanel, conversation: ConversationController,
                 inspector: Inspector, runner: JobRunner, store: Callable[[], Store],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.panel, self.page = panel, panel.compare
        self.conversation, self.inspector = conversation, inspector
        self.runner, self.store = runner, store
        self.job: Job | None = None                 # the comparison running
        self.list_job: Job | None = None            # the store's candidates being read
        self.stale = True                           # candidates not read since the last change
        self.listed_images = False                  # they were read for a context with images
        self.page.requested.connect(self.compare)
        panel.pageShown.connect(self._shown)
        self.page.cancelRequested.connect(self.cancel)
        conversation.busyChanged.connect(self._busy)

    def refresh(self) -> None:
        """List the store's models against the loaded one (their vocabularies are read off
        the GUI thread); a model without local weights offers none. Only while the tab is in
        view: reading every model's vocabulary competes with a model load or an answer for
        the cores and the GIL, and stalled the window (measured by benchmarks/ui_stalls.py)."""
        if self.list_job is not None:
            self.list_job.cancel()
            self.list_job = None
        self.stale = not self.panel.showing(self.page)
        if self.stale:
            return
        model = self.conversation.model
        if model is None or Capability.LENS not in self.conversation.capabilities:
            self.page.set_candidates([])
            return
        store, path, name = self.store, model.gguf.path, model.name
        images = self.listed_images = self._has_images()
        job = CallJob(lambda: compare_candidates(store(), path, name, images))
        job.result.connect(self._listed)
        job.failed.connect(self._list_failed)
        self.list_job = job
        self.page.show_listing()
        self.runner.start(job)

    def _has_images(self) -> bool:
        context = self.inspector.context
        return context is not None and bool(image_grids(context))

    def _shown(self, page) -> None:
        if page is self.page and self.stale:
            self.refresh()

    def _listed(self, candidates: list[Candidate]) -> None:
        if self.sender() is self.list_job:
            self.list_job = None
            self.page.set_candidates(candidates)

    def _list_failed(self, message: str) -> None:
        if self.sender() is self.list_job:
            self.list_job = None
            self.page.set_candidates([])
            self.page.show_failed(f"The store's models could not be read: {message}")

    def model_changed(self) -> None:
        """Another model loaded: A changed, and so did which models can be B."""
        self.clear()
        self.refresh()

    def clear(self) -> None:
        """Another conversation (or answer): a running comparison is given up, the rows go."""
        if self.job is not None:
            self.job.cancel()
            self.job = None
        self.page.clear()

    def _busy(self, busy: bool) -> None:
        if busy and self.conversation.busy:      # the stream comes first
            self.clear()
        elif not busy and self._has_images() != self.listed_images:
            self.refresh()                       # which models can read it changed

    def compare(self, other: Candidate) -> None:
        model, context = self.conversation.model, self.inspector.context
        if other.reason:
            self.page.show_failed(f"{other.name} cannot be compared with "
                                  f"{self.conversation.model_name}: {other.reason}; "
                                  f"{SAME_FAMILY}.")
            return
        if model is None or context is None:
            self.page.show_failed(NO_TEXT)
            return
        if self.conversation.busy:
            self.page.show_failed("An answer is streaming: compare once it has ended.")
            return
        self.cancel()
        gguf, name, piece = model.gguf, model.name, self.inspector.piece
        # the disagreements that matter are the answer's: nobody predicts template markup
        answer = len(self.inspector.prompt) if self.inspector.events else 1
        pictures = picture_inputs(self._attachments())

        def run(progress, cancel):
            return compare_with(gguf, name, other, context, piece, pictures,
                                marked_from=answer, progress=progress, cancel=cancel)

        job = ProgressJob(run)
        job.progress.connect(self.page.show_progress)
        job.result.connect(self._compared)
        job.failed.connect(self._failed)
        self.job = job
        self.page.show_running(other.name)
        self.runner.start(job)

    def _attachments(self) -> list:
        """The conversation's images, oldest first, as the model was given them."""
        session = self.conversation.session
        messages = session.messages if session is not None else []
        return [image for m in messages for image in m.images]

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self.job = None
            self.page.show_failed("Cancelled.")

    def _compared(self, result) -> None:
        if self.sender() is self.job:
            self.job = None
            self.page.show_comparison(result)

    def _failed(self, message: str) -> None:
        if self.sender() is self.job:
            self.job = None
            self.page.show_failed(f"The comparison could not run: {message}")
