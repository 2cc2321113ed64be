"""The one decode loop everything uses (CLI, app, tests).

It prefills only the part of the prompt that is not already in the KV cache, then steps:
a one-token step samples the next token and feeds it back at the next cache slot and
position; with a drafter, a draft-and-verify step feeds the last token and the drafter's
guesses in one forward, keeps the guesses the sampler's exact acceptance rule keeps and
drops the rest from the cache. It ends at a stop token, a stop string, num_predict, the
context limit or a cancel.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator as Steps
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from engine.chat.events import DoneEvent, Event, TokenEvent, TopToken
from engine.chat.options import Options
from engine.chat.prompt_tokens import PromptTokens
from engine.errors import GenerationError
from engine.runtime.cancel import Cancelled
from engine.runtime.constraint import Constraint
from engine.runtime.decoder import DecoderSession, DecoderStep
from engine.runtime.drafters import Drafter
from engine.runtime.reasons import explain
from engine.runtime.sampler import Sampler, SampleTrace, logprobs
from engine.runtime.stops import StopMatcher, StopResult
from engine.tokenizer import StreamDecoder, Tokenizer

MAX_TOP_LOGPROBS = 20


class Generator:
    """Runs answers against a decoder, reusing whatever prefix its KV cache holds."""

    def __init__(self, decoder: DecoderSession, tokenizer: Tokenizer | None) -> None:
        self.decoder = decoder
        self.tokenizer = tokenizer

    def prefill(self, prompt: PromptTokens, cancel: threading.Event | None = None
                ) -> tuple[DecoderStep, int]:
        """Feed the uncached tail of the prompt; returns the last step and tokens fed
        (raises Cancelled when ``cancel`` is set meanwhile: a long prefill is one run)."""
        if len(prompt) == 0:
            raise GenerationError("the prompt is empty: type a message or pass a prompt")
        # at least the last token runs, to give the logits of the first answer token
        reuse = self.decoder.keep_prefix(prompt.keys[:-1])
        ids = prompt.ids[reuse:]
        positions = prompt.positions[..., reuse:]
        keys = prompt.keys[reuse:]
        embeds = None
        if prompt.image_rows is not None and len(prompt.image_rows):
            rows = prompt.image_rows - reuse
            inside = rows >= 0
            if inside.any():
                embeds = self.decoder.embed(ids)
                embeds[rows[inside]] = prompt.image_embeds[inside]
        groups = prompt.image_groups()
        groups = None if groups is None else groups[reuse:]
        if embeds is None:
            step = self.decoder.forward(input_ids=ids, positions=positions, keys=keys,
                                        cancel=cancel, image_groups=groups)
        else:
            step = self.decoder.forward(inputs_embeds=embeds, positions=positions, keys=keys,
                                        cancel=cancel, image_groups=groups)
        return step, len(ids)

    def run(
        self,
        prompt: PromptTokens,
        options: Options,
        *,
        cancel: threading.Event | None = None,
        num_top: int = 5,
        load_duration: int = 0,
        max_cache_len: int | None = None,
        drafter: Drafter | None = None,
        constraint: Constraint | None = None,
    ) -> Iterator[Event]:
        """Prefill, then decode. With a ``drafter`` each step is a draft-and-verify step
        (logits at the fed rows only): the tokens have the distribution of plain decoding
        (greedy: the same tokens), and each event carries the target's own logits at its
        position. A ``constraint`` (structured output) masks every pick, drafted rows
        included."""
        limit = min(options.num_ctx, max_cache_len or options.num_ctx)
        if len(prompt) >= limit:
            raise GenerationError(
                f"the prompt is {len(prompt)} tokens but the context holds {limit}: "
                "shorten it or raise num_ctx"
            )
        start = time.perf_counter_ns()
        answer = _Answer(self, prompt, options, limit=limit, drafter=drafter,
                         constraint=constraint,
                         cancel=cancel or threading.Event(),
                         num_top=min(max(num_top, 1), MAX_TOP_LOGPROBS))
        try:
            step, fed = self.prefill(prompt, answer.cancel)
        except Cancelled:
            step, fed = None, 0
            answer.state.reason = "cancel"
        prompt_done = time.perf_counter_ns()
        if step is not None:
            yield from answer.decode(step, prompt_done)
        text, tail = answer.finish()
        end = time.perf_counter_ns()
        state = answer.state
        yield DoneEvent(
            done_reason=state.reason,
            text=text,
            tail=tail,
            prompt_eval_count=fed,
            prompt_eval_duration=prompt_done - start,
            eval_count=state.count,
            eval_duration=end - prompt_done,
            load_duration=load_duration,
            total_duration=end - start + load_duration,
            draft_count=state.drafted,
            draft_accepted=state.accepted,
        )


@dataclass
class AnswerState:
    """What one answer has produced so far."""

    history: list[int]              # prompt and reply ids: what the penalties read
    context: list[int]              # the same for drafters, image rows as -1
    step_start: int                 # ns, when the current token's step began
    reply: list[str] = field(default_factory=list)  # each token's shown text
    count: int = 0                  # tokens generated
    drafted: int = 0                # tokens drafters proposed
    accepted: int = 0               # of those, kept
    reason: str = ""                # why the answer ended; "" while it runs
    stop_string_hit: bool = False


class _Answer:
    """One answer's decode steps after the prefill."""

    def __init__(self, generator: Generator, prompt: PromptTokens, options: Options, *,
                 limit: int, drafter: Drafter | None, cancel: threading.Event,
                 num_top: int, constraint: Constraint | None = None) -> None:
        self.decoder, self.tokenizer = generator.decoder, generator.tokenizer
        self.prompt, self.options, self.limit = prompt, options, limit
        self.drafter, self.cancel, self.num_top = drafter, cancel, num_top
        self.sampler = Sampler(options, constraint)
        self.stream = StreamDecoder(self.tokenizer)
        self.stops = StopMatcher(options.stop)
        self.state = AnswerState(history=[int(i) for i in prompt.ids],
                                 context=draft_context(prompt), step_start=0)

    def decode(self, step: DecoderStep, started: int) -> Iterator[TokenEvent]:
        """Steps until the answer ends: each judges the rows of the last forward (one
        after a one-token step, 1 + drafts after a verify step), then feeds the next."""
        self.state.step_start = started
        rows, draft = step.logits[None], []
        while True:
            token, kept = yield from self._judge(step, rows, draft)
            if draft:
                self._drop_rejected(draft, kept)
            if self.state.reason:
                return
            draft = self._propose()
            try:
                step = self._feed(token, draft)
            except Cancelled:   # stopped mid-run: the cache is as before the step
                self.state.reason = "cancel"
                return
            rows = step.logits

    def _judge(self, step: DecoderStep, rows: np.ndarray,
               draft: list[int]) -> Steps[TokenEvent, None, tuple[int, int]]:
        """Sample row by row (row i verifies draft[i]; the last row is free) until a
        draft is rejected or the answer ends; returns the last token and drafts kept."""
        state = self.state
        token, kept = -1, 0
        for i, logits in enumerate(rows):
            if self.cancel.is_set():
                state.reason = "cancel"
                break
            trace = SampleTrace()
            if i < len(draft):
                token, accepted = self.sampler.verify(logits, state.history, draft[i], trace)
            else:
                token, accepted = int(self.sampler.sample(logits, state.history, trace)), False
            if accepted:
                kept += 1
            if token in self.tokenizer.stop_ids:
                state.reason = "stop"
                break
            last = i == len(rows) - 1
            shown = self._append(token)
            yield self._event(token, logits, trace, accepted,
                              step.layer_stats if last else None, shown.text)
            self._check_end(shown, pending=len(rows) - 1 - i)
            if state.reason or not accepted:
                break
        return token, kept

    def _append(self, token: int) -> StopResult:
        """Add ``token`` to the answer; what of its text may be shown yet."""
        shown = self.stops.push(self.stream.push(token))
        state = self.state
        state.reply.append(shown.text)
        state.history.append(token)
        state.context.append(token)
        state.count += 1
        return shown

    def _event(self, token: int, logits: np.ndarray, trace: SampleTrace, accepted: bool,
               layer_stats: np.ndarray | None, text: str) -> TokenEvent:
        piece = self.tokenizer.id_to_piece
        dist = logprobs(logits, self.num_top)
        now = time.perf_counter_ns()
        elapsed, self.state.step_start = now - self.state.step_start, now
        return TokenEvent(
            index=self.state.count - 1,
            id=token,
            piece=piece(token),
            text=text,
            logit=float(logits[token]),
            logprob=dist.of(token),
            entropy=dist.entropy,
            top=tuple(TopToken(i, piece(i), float(logits[i]), logprob) for i, logprob in dist.top),
            elapsed_ns=elapsed,
            layer_stats=layer_stats,
            reasons=explain(trace, self.options, piece),
            drafted=accepted,
        )

    def _check_end(self, shown: StopResult, pending: int) -> None:
        """A stop string, the context limit or num_predict ends the answer; ``pending``
        rows of the last forward come after this token (the cache as plain decoding)."""
        cached = self.decoder.cache_len - pending
        if shown.stopped:
            self.state.reason, self.state.stop_string_hit = "stop", True
        elif cached + 1 >= self.limit or 0 <= self.options.num_predict <= self.state.count:
            self.state.reason = "length"

    def _drop_rejected(self, draft: list[int], kept: int) -> None:
        """Count the verify step's drafts and drop the rows of those not kept."""
        self.state.drafted += len(draft)
        self.state.accepted += kept
        self.drafter.accepted(len(draft), kept)
        self.decoder.truncate(self.decoder.cache_len - (len(draft) - kept))

    def _propose(self) -> list[int]:
        """The drafter's guesses that still fit num_ctx and num_predict (as plain decoding)."""
        room = self.limit - 1 - self.decoder.cache_len
        if self.options.num_predict >= 0:
            room = min(room, self.options.num_predict - self.state.count)
        return self.drafter.propose(self.state.context, room) if self.drafter and room > 0 else []

    def _feed(self, token: int, draft: list[int]) -> DecoderStep:
        """One forward of the last token and the drafts (a one-token step without them)."""
        ids = np.array([token, *draft], dtype=np.int64)
        # after the prompt each row advances the position by one (M-RoPE: all axes)
        position = self.prompt.next_position + self.decoder.cache_len - len(self.prompt)
        return self.decoder.forward(
            input_ids=ids, positions=positions_like(self.prompt.positions, position, len(ids)),
            rows=len(ids), cancel=self.cancel)

    def finish(self) -> tuple[str, str]:
        """The whole shown text and the tail released only now (held bytes, a stop prefix)."""
        tail = ""
        if not self.state.stop_string_hit:
            released = self.stops.push(self.stream.flush())
            tail = released.text if released.stopped else released.text + self.stops.flush()
        return "".join(self.state.reply) + tail, tail


def draft_context(prompt: PromptTokens) -> list[int]:
    """The prompt's ids for drafters, image rows replaced by -1 (they match nothing)."""
    ids = prompt.ids.copy()
    if prompt.image_rows is not None and len(prompt.image_rows):
        ids[prompt.image_rows] = -1
    return [int(i) for i in ids]


def positions_like(template: np.ndarray, position: int, n: int = 1) -> np.ndarray:
    """Positions of n decode tokens from ``position`` on, in the prompt's layout ([n] or
    [3, n]: after the prompt, text tokens advance all three M-RoPE axes together)."""
    run = np.arange(position, position + n, dtype=np.int64)
    if template.ndim == 2:
        return np.broadcast_to(run, (template.shape[0], n)).copy()
    return run
