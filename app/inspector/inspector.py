"""Decides what the Inside and llama.cpp tabs show, and computes it off the GUI thread
(the Reference tab's layer dumps too, through app/inspector/dump_jobs.py; the Tracing tab
through its Tracer, which it owns).

It follows the conversation: the prompt of the latest answer and its tokens. Selecting a
reply token inspects the step that chose it (the row before it); selecting a prompt row
inspects that row. Inspections run as cancellable jobs and never while an answer streams:
a request made then waits for the answer's end, and sending cancels a running one.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject

from app.chat.conversation import ConversationController
from app.inspector.dump_jobs import DumpJobs
from app.inspector.inside_page import position_title
from app.inspector.panel import DebugPanel
from app.inspector.tracer import Tracer
from app.workers import Job, JobRunner, ProgressJob
from engine.chat.events import TokenEvent
from engine.chat.prompt_tokens import PromptTokens
from engine.inspect import Inspection, continued, image_grids, inspect_context
from engine.inspect.llama_layers import llama_layers
from engine.inspect.llama_pair import llama_text
from engine.inspect.llama_pictures import llama_pictures
from engine.inspect.occlusion import fitting_patch_group, occlusion
from engine.inspect.second_opinion import missing, second_opinion
from engine.vision.video import pictures

FAST_NOTE = ("Computed by the numpy fp32 reference (exact). The engine streams in fast "
             "mode, whose numbers differ slightly: the Reference tab shows by how much.")
EXACT_NOTE = "Computed by the numpy fp32 reference, which exact mode matches."


class Inspector(QObject):
    def __init__(self, panel: DebugPanel, conversation: ConversationController,
                 runner: JobRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.panel, self.conversation, self.runner = panel, conversation, runner
        self.prompt: PromptTokens | None = None
        self.piece: Callable[[int], str] = str
        self.events: list[TokenEvent] = []
        self.job: Job | None = None
        self.pending: tuple[int, str] | None = None     # (row, where) waiting for the answer
        self.inspection: Inspection | None = None
        self.inspection_steering = ""     # the control vectors it ran with, in words
        self._shown: tuple[str, str, list, str] = ("", "", [], "")  # how to show the job's result
        self.opinion_job: Job | None = None
        self.layers_job: Job | None = None
        self.layers_steering = ""         # the control vectors the layers run with, in words
        self.dumps = DumpJobs(panel.dump, conversation, runner, lambda: self.context, self)
        conversation.promptReady.connect(self._prompt)
        conversation.token.connect(self._token)
        conversation.busyChanged.connect(self._busy)
        panel.inside.inspectRequested.connect(self.inspect_latest)
        panel.inside.attributionRequested.connect(self.attribute)
        panel.inside.cancelRequested.connect(self.cancel)
        panel.inside.positionClicked.connect(lambda row: self.select_row(row, "clicked"))
        panel.promptRowClicked.connect(lambda row: self.select_row(row, "prompt token"))
        panel.replyPointClicked.connect(self.select_reply)
        panel.opinion.requested.connect(self.ask_llama)
        panel.opinion.cancelRequested.connect(self.cancel_opinion)
        panel.opinion.layers.requested.connect(self.compare_layers)
        panel.opinion.layers.cancelRequested.connect(self.cancel_layers)
        if (hint := missing()) is not None:
            panel.opinion.show_missing(hint)
        self.tracer = Tracer(panel, conversation, runner, self)

    # -- following the conversation ---------------------------------------------------------

    def _prompt(self, prompt: PromptTokens, piece: Callable[[int], str]) -> None:
        self.prompt, self.piece, self.events = prompt, piece, []
        self.panel.start_reply()

    def _token(self, event: TokenEvent) -> None:
        self.events.append(event)
        self.panel.stream_token(event)

    def _busy(self, busy: bool) -> None:
        if busy and self.conversation.busy:
            self.cancel()            # the stream comes first
            self.cancel_layers()
            self.dumps.cancel()
            self.prompt, self.events = None, []      # a server's answer brings no prompt
            self.panel.start_reply()
            self.panel.clear_check()   # a verdict (or its error) was about the last answer
        elif not busy and self.pending is not None:
            row, where = self.pending
            self.pending = None
            self.select_row(row, where)

    def clear(self) -> None:
        """Another conversation: what runs for the previous one is cancelled, its results
        dropped when they come."""
        self.cancel()
        if self.opinion_job is not None:
            self.opinion_job.cancel()
            self.opinion_job = None
        self.cancel_layers()
        self.dumps.clear()
        self.tracer.clear()
        self.prompt, self.events, self.inspection, self.pending = None, [], None, None

    # -- choosing a position --------------------------------------------------------------

    @property
    def context(self) -> PromptTokens | None:
        if self.prompt is None:
            return None
        return continued(self.prompt, [e.id for e in self.events])

    def inspect_latest(self) -> None:
        context = self.context
        if context is None:
            self.panel.inside.show_failed("Send a message first: inspection looks at the "
                                          "latest answer's context.")
            return
        self.select_row(len(context) - 1, "the latest token")

    def select_token(self, event: TokenEvent) -> None:
        """A token clicked in the chat: inspect it if it belongs to the latest answer."""
        index = next((i for i, e in enumerate(self.events) if e is event), None)
        if index is None:
            self.panel.inside.show_failed("That token is from an earlier answer; inspection "
                                          "follows the latest answer.")
            return
        self.select_reply(index)

    def select_reply(self, index: int) -> None:
        if not 0 <= index < len(self.events):
            return
        event = self.events[index]
        self.panel.show_token(event, latest=False)
        self.panel.reply_chart.set_selected(index)
        if self.prompt is None:
            return
        self.select_row(len(self.prompt) + index - 1, f"the step that chose reply token "
                        f"#{index + 1}")

    def select_row(self, row: int, where: str) -> None:
        context, model = self.context, self.conversation.model
        if context is None or model is None:
            return
        self.cancel()
        if self.conversation.busy:
            self.pending = (row, where)
            self.panel.inside.show_waiting(f"Position {row} ({where}) will be inspected when "
                                           "the answer ends.")
            return
        note = EXACT_NOTE if model.exact else FAST_NOTE
        pictures = self._context_pictures(context)
        gguf, piece, steering = model.gguf, self.piece, self.conversation.steering_table
        label = self.conversation.answer_steering if steering is not None else ""

        def run(progress, cancel) -> Inspection:
            return inspect_context(gguf, context, piece, row, progress=progress, cancel=cancel,
                                   steering=steering)

        job = ProgressJob(run)
        # bound methods of GUI-thread objects only: the job's signals are then queued
        job.progress.connect(self.panel.inside.show_progress)
        job.result.connect(self._inspected)
        job.failed.connect(self._failed)
        self.job, self._shown = job, (where, note, pictures, label)
        self.panel.inside.show_running(f"Inspecting position {row} ({where})…")
        self.runner.start(job)

    def attribute(self) -> None:
        """Occlusion of the inspected position over the same context (a job like the
        inspection: progress, cancel, never while an answer streams)."""
        context, model, inspection = self.context, self.conversation.model, self.inspection
        if context is None or model is None or inspection is None \
                or len(context) <= inspection.position or self.conversation.busy:
            self.panel.inside.show_failed("Inspect a position first; attribution runs over "
                                          "its context when no answer is streaming.")
            return
        self.cancel()
        gguf, row, steering = model.gguf, inspection.position, self.conversation.steering_table
        group = fitting_patch_group(context, row)

        def run(progress, cancel):
            return occlusion(gguf, context, row, patch_group=group, progress=progress,
                             cancel=cancel, steering=steering)

        job = ProgressJob(run)
        job.progress.connect(self.panel.inside.show_progress)
        job.result.connect(self._attributed)
        job.failed.connect(self._failed)
        self.job = job
        self.panel.inside.show_attributing()
        self.runner.start(job)

    def _attributed(self, attribution) -> None:
        if self.sender() is not self.job:
            return
        self.job = None
        self.panel.inside.show_attribution(attribution)

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self.job = None
            self.panel.inside.show_failed("Cancelled.")

    def _inspected(self, inspection: Inspection) -> None:
        if self.sender() is not self.job:     # a result that was cancelled meanwhile
            return
        where, note, pictures, self.inspection_steering = self._shown
        self.job, self.inspection = None, inspection
        self.panel.inside.show_inspection(inspection, position_title(inspection, where), note,
                                          pictures[:len(inspection.images)])

    def _failed(self, message: str) -> None:
        if self.sender() is self.job:
            self.job = None
            self.panel.inside.show_failed(f"The inspection could not run: {message}")

    def _context_pictures(self, context: PromptTokens | None) -> list:
        """The pictures of ``context``'s images: the conversation's latest ones."""
        images = len(image_grids(context)) if context is not None else 0
        return self._pictures()[-images:] if images else []

    def _pictures(self) -> list:
        """The pictures of the conversation's images, oldest first, as the model saw them."""
        session = self.conversation.session
        messages = session.messages if session is not None else []
        return [picture for m in messages for image in m.images for picture in pictures(image)]

    # -- llama.cpp ------------------------------------------------------------------------

    def ask_llama(self) -> None:
        """llama.cpp over the inspected context, or else the latest one (inspected on the
        way: the comparison needs the reference's log-probabilities), steered as it was."""
        model, inspection, context = self.conversation.model, self.inspection, self.context
        if model is None or (inspection is None and context is None):
            self.panel.opinion.show_failed("Send a message first: llama.cpp is compared over "
                                           "the conversation's latest context.")
            return
        piece, gguf, steering = self.piece, model.gguf, self.conversation.steering_table
        label = self.inspection_steering if inspection else self.conversation.answer_steering
        seen = self._context_pictures(context)

        def run(progress, cancel) -> tuple:
            inspected = inspection or inspect_context(gguf, context, piece, len(context) - 1,
                                                      progress=progress, cancel=cancel,
                                                      steering=steering)
            pictures = llama_pictures(gguf, context, seen) if context is not None else None
            progress("llama.cpp over the same context", 0.9)
            return (second_opinion(llama_text(gguf), inspected, piece, pictures=pictures),
                    inspected.tokens, label)

        job = ProgressJob(run)
        job.progress.connect(self.panel.opinion.show_progress)
        job.result.connect(self._opinion)
        job.failed.connect(self._opinion_failed)
        self.opinion_job = job
        self.panel.opinion.show_running()
        self.runner.start(job)

    def cancel_opinion(self) -> None:
        """Give up llama.cpp's opinion: its result is dropped (llama.cpp's own run ends by
        itself)."""
        if self.opinion_job is not None:
            self.opinion_job.cancel()
            self.opinion_job = None
            self.panel.opinion.show_failed("Cancelled.")

    def _opinion(self, result: tuple) -> None:
        if self.sender() is self.opinion_job:
            self.opinion_job = None
            self.panel.opinion.show_opinion(*result)

    def _opinion_failed(self, message: str) -> None:
        if self.sender() is self.opinion_job:
            self.opinion_job = None
            self.panel.opinion.show_failed(message)

    def compare_layers(self) -> None:
        """Every block's output in llama.cpp and in the reference over the latest context
        (a job with progress and cancel, never while an answer streams)."""
        model, context, section = self.conversation.model, self.context, self.panel.opinion.layers
        if model is None or context is None or self.conversation.busy:
            section.show_failed("Send a message first; the layers are compared over the "
                                "latest context when no answer is streaming.")
            return
        self.cancel_layers()
        gguf, ids, steering = model.gguf, list(context.ids), self.conversation.steering_table
        self.layers_steering = self.conversation.answer_steering if steering is not None else ""
        seen = self._context_pictures(context)

        def run(progress, cancel):
            return llama_layers(llama_text(gguf), gguf, ids, progress=progress, cancel=cancel,
                                steering=steering, pictures=llama_pictures(gguf, context, seen))

        job = ProgressJob(run)
        job.progress.connect(section.show_progress)
        job.result.connect(self._layers)
        job.failed.connect(self._layers_failed)
        self.layers_job = job
        section.show_running()
        self.runner.start(job)

    def cancel_layers(self) -> None:
        if self.layers_job is not None:
            self.layers_job.cancel()
            self.layers_job = None
            self.panel.opinion.layers.show_failed("Cancelled.")

    def _layers(self, layers) -> None:
        if self.sender() is self.layers_job:
            self.layers_job = None
            self.panel.opinion.layers.show_layers(layers, self.layers_steering)

    def _layers_failed(self, message: str) -> None:
        if self.sender() is self.layers_job:
            self.layers_job = None
            self.panel.opinion.layers.show_failed(message)
