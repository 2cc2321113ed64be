"""The one decode loop everything uses (CLI, app, tests).

It prefills only the part of the prompt that is not already in the KV cache, then
samples token by token, feeding each token back at the next cache slot and position,
until a stop token, a stop string, num_predict, the context limit or a cancel.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from engine.errors import GenerationError
from engine.runtime.events import DoneEvent, Event, TokenEvent, TopToken
from engine.runtime.reasons import explain
from engine.runtime.sampler import Options, Sampler, SampleTrace, logprobs
from engine.runtime.stops import StopMatcher
from engine.tokenizer import StreamDecoder

if TYPE_CHECKING:
    from engine.runtime.constraint import Constraint
    from engine.runtime.drafters import Drafter

MAX_TOP_LOGPROBS = 20


@dataclass(frozen=True)
class PromptTokens:
    """A tokenized prompt, ready for the decoder.

    `keys` identify what sits in each cache slot (token id, or (id, image digest, row) for
    image rows) so a later turn can reuse the longest common prefix. `positions` is [S]
    or [3, S] (M-RoPE); `next_position` is where the first generated token goes (for
    M-RoPE it is max position + 1, not S).
    """

    ids: np.ndarray                         # int64 [S]
    positions: np.ndarray                   # int64 [S] or [3, S]
    keys: tuple[Hashable, ...]
    next_position: int
    image_rows: np.ndarray | None = None    # int64 [R]: rows whose embedding is replaced
    image_embeds: np.ndarray | None = None  # float32 [R, H]

    @classmethod
    def text(cls, ids: Sequence[int]) -> PromptTokens:
        array = np.asarray(ids, dtype=np.int64)
        return cls(array, np.arange(len(array), dtype=np.int64), tuple(int(i) for i in array),
                   len(array))

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class CacheState:
    """What the decoder's KV cache currently holds, slot by slot."""

    keys: list[Hashable] = field(default_factory=list)

    def common_prefix(self, keys: Sequence[Hashable]) -> int:
        n = 0
        for a, b in zip(self.keys, keys, strict=False):
            if a != b:
                break
            n += 1
        return n


class Generator:
    """Runs one answer against a decoder, reusing its cache through a CacheState."""

    def __init__(self, decoder, tokenizer, cache: CacheState | None = None) -> None:
        self.decoder = decoder
        self.tokenizer = tokenizer
        self.cache = cache or CacheState()

    def prefill(self, prompt: PromptTokens) -> tuple[np.ndarray, int]:
        """Feed the uncached tail of the prompt; returns the last logits and tokens fed."""
        if len(prompt) == 0:
            raise GenerationError("the prompt is empty: type a message or pass a prompt")
        reuse = self.cache.common_prefix(prompt.keys)
        reuse = min(reuse, len(prompt) - 1)  # at least one token must run to get logits
        self.decoder.truncate(reuse)
        del self.cache.keys[reuse:]
        ids = prompt.ids[reuse:]
        positions = prompt.positions[..., reuse:]
        embeds = None
        if prompt.image_rows is not None and len(prompt.image_rows):
            rows = prompt.image_rows - reuse
            inside = rows >= 0
            if inside.any():
                embeds = self.decoder.embed(ids)
                embeds[rows[inside]] = prompt.image_embeds[inside]
        if embeds is None:
            step = self.decoder.forward(input_ids=ids, positions=positions)
        else:
            step = self.decoder.forward(inputs_embeds=embeds, positions=positions)
        self.cache.keys.extend(prompt.keys[reuse:])
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
        """Prefill, then decode. With a ``drafter`` each step feeds the last token plus the
        drafter's guesses in one verify forward (logits at those rows only), keeps the
        guesses the sampler's exact acceptance rule keeps, and rolls the cache back over
        the rest: the tokens have the distribution of plain decoding (greedy: the same
        tokens), and each event carries the target's own logits at its position. A
        ``constraint`` (structured output) masks every pick, drafted rows included."""
        cancel = cancel or threading.Event()
        num_top = min(max(num_top, 1), MAX_TOP_LOGPROBS)
        limit = min(options.num_ctx, max_cache_len or options.num_ctx)
        if len(prompt) >= limit:
            raise GenerationError(
                f"the prompt is {len(prompt)} tokens but the context holds {limit}: "
                "shorten it or raise num_ctx"
            )
        start = time.perf_counter_ns()
        sampler = Sampler(options, constraint)
        stream = StreamDecoder(self.tokenizer)
        stops = StopMatcher(options.stop)
        history = [int(i) for i in prompt.ids]
        context = draft_context(prompt)  # what drafters read: image rows are -1
        step, fed = self.prefill(prompt)
        prompt_done = time.perf_counter_ns()
        reply: list[str] = []
        count = drafted = kept_total = 0
        reason = ""
        stop_string_hit = False
        step_start = prompt_done
        draft: list[int] = []
        rows = step.logits[None]  # [n, V]: row i judges draft[i]; the last one is free
        while True:
            token = -1
            kept = 0
            for i, logits in enumerate(rows):
                if cancel.is_set():
                    reason = "cancel"
                    break
                trace = SampleTrace()
                if i < len(draft):
                    token, accepted = sampler.verify(logits, history, draft[i], trace)
                else:
                    token, accepted = int(sampler.sample(logits, history, trace)), False
                if accepted:
                    kept += 1
                if token in self.tokenizer.stop_ids:
                    reason = "stop"
                    break
                dist = logprobs(logits, num_top)
                shown = stops.push(stream.push(token))
                reply.append(shown.text)
                history.append(token)
                context.append(token)
                count += 1
                now = time.perf_counter_ns()
                yield TokenEvent(
                    index=count - 1,
                    id=token,
                    piece=self.tokenizer.id_to_piece(token),
                    text=shown.text,
                    logit=float(logits[token]),
                    logprob=dist.of(token),
                    entropy=dist.entropy,
                    top=tuple(
                        TopToken(i, self.tokenizer.id_to_piece(i), float(logits[i]), logprob)
                        for i, logprob in dist.top
                    ),
                    elapsed_ns=now - step_start,
                    layer_stats=step.layer_stats if i == len(rows) - 1 else None,
                    reasons=explain(trace, options, self.tokenizer.id_to_piece),
                    drafted=accepted,
                )
                step_start = now
                cached = self.decoder.cache_len - (len(rows) - 1 - i)  # as plain decoding
                if shown.stopped:
                    reason, stop_string_hit = "stop", True
                elif cached + 1 >= limit or 0 <= options.num_predict <= count:
                    reason = "length"
                if reason or not accepted:
                    break
            if draft:  # roll back the rows of drafts that were not kept
                drafted += len(draft)
                kept_total += kept
                drafter.accepted(len(draft), kept)
                keep = self.decoder.cache_len - (len(draft) - kept)
                self.decoder.truncate(keep)
                del self.cache.keys[keep:]
            if reason:
                break
            cached = self.decoder.cache_len
            room = limit - 1 - cached  # drafts that still fit num_ctx (as plain decoding)
            if options.num_predict >= 0:
                room = min(room, options.num_predict - count)
            draft = drafter.propose(context, room) if drafter and room > 0 else []
            fed_ids = np.array([token, *draft], dtype=np.int64)
            # after the prompt each row advances the position by one (M-RoPE: all axes)
            position = prompt.next_position + self.decoder.cache_len - len(prompt)
            step = self.decoder.forward(
                input_ids=fed_ids,
                positions=_positions_like(prompt.positions, position, len(fed_ids)),
                rows=len(fed_ids),
            )
            rows = step.logits
            self.cache.keys.extend(int(t) for t in fed_ids)
        tail_text = ""
        if not stop_string_hit:
            released = stops.push(stream.flush())
            tail_text = released.text if released.stopped else released.text + stops.flush()
        end = time.perf_counter_ns()
        text = "".join(reply) + tail_text
        yield DoneEvent(
            done_reason=reason,
            text=text,
            tail=tail_text,
            prompt_eval_count=fed,
            prompt_eval_duration=prompt_done - start,
            eval_count=count,
            eval_duration=end - prompt_done,
            load_duration=load_duration,
            total_duration=end - start + load_duration,
            draft_count=drafted,
            draft_accepted=kept_total,
        )


def draft_context(prompt: PromptTokens) -> list[int]:
    """The prompt's ids for drafters, image rows replaced by -1 (they match nothing)."""
    ids = prompt.ids.copy()
    if prompt.image_rows is not None and len(prompt.image_rows):
        ids[prompt.image_rows] = -1
    return [int(i) for i in ids]


def _positions_like(template: np.ndarray, position: int, n: int = 1) -> np.ndarray:
    """Positions of n decode tokens from ``position`` on, in the prompt's layout ([n] or
    [3, n]: after the prompt, text tokens advance all three M-RoPE axes together)."""
    run = np.arange(position, position + n, dtype=np.int64)
    if template.ndim == 2:
        return np.broadcast_to(run, (template.shape[0], n)).copy()
    return run
