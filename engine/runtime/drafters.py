"""Drafters: guess the next few tokens cheaply, so one verify step can keep several.

A drafter has one job: ``propose(context, limit)`` returns up to ``limit`` token ids that
may follow ``context`` (prompt ids then the reply so far; -1 marks rows that are not text,
such as image rows, and never matches). The decode loop verifies them with the target model
and tells the drafter how many it kept (``accepted``); the output never depends on what a
drafter proposes, only the speed does.

How many to propose is a cost question (``DraftLength``): a verify of n rows costs
``verify_cost(n)`` single-token forwards (measured: docs/benchmarks-journal.md, 'Verify cost'), and
with a per-token acceptance a each extra drafted token is kept with probability a^i. The
drafter proposes the length that maximises tokens per unit of time, or nothing when no length
beats plain decoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

# Cost of one forward of n new rows on a ~300-token cache, in single-token forwards:
# DecoderSession.forward on the 1.5B demo model, 2 threads
# (docs/benchmarks-journal.md, 'Verify cost'; the 0.5B is cheaper). Interpolated linearly
# between the measured points.
VERIFY_ROWS = (1, 2, 4, 8, 16)
VERIFY_COST = (1.0, 1.52, 1.81, 2.60, 4.17)


def verify_cost(rows: int) -> float:
    return float(np.interp(rows, VERIFY_ROWS, VERIFY_COST))


class Drafter(Protocol):
    name: str

    def propose(self, context: Sequence[int], limit: int) -> list[int]: ...

    def accepted(self, proposed: int, kept: int) -> None: ...


class DraftLength:
    """Picks a draft length from the recent acceptance rate and the cost of a verify step.

    ``draft_cost`` is the drafter's own cost per proposed token, in target forwards (0 for
    prompt lookup; a draft model's per-token time over the target's). The acceptance rate
    a is a moving estimate of P(token i kept | tokens before it kept); while drafting does
    not pay it drifts back to ``prior``, so a later stretch of copying is tried again.
    """

    def __init__(self, *, max_len: int = 12, draft_cost: float = 0.0, prior: float = 0.6,
                 memory: float = 0.5):
        self.max_len = max_len
        self.draft_cost = draft_cost
        self.prior = prior
        self.memory = memory
        self.rate = prior

    def choose(self, limit: int) -> int:
        """Tokens to draft now (0: decode plainly this step)."""
        best, _ = self.best(limit)
        if best == 0:
            self.rate += 0.1 * (self.prior - self.rate)
        return best

    def best(self, limit: int) -> tuple[int, float]:
        """The draft length up to ``limit`` with the most tokens per unit of time, and that
        rate over plain decoding's; (0, 1.0) when no length beats plain decoding."""
        best, best_gain = 0, 1.0
        a = self.rate
        for k in range(1, min(limit, self.max_len) + 1):
            kept = a * (1 - a ** k) / (1 - a) if a < 1 else float(k)  # expected drafts kept
            gain = (1 + kept) / (verify_cost(k + 1) + k * self.draft_cost)
            if gain > best_gain:
                best, best_gain = k, gain
        return best, best_gain

    def update(self, proposed: int, kept: int) -> None:
        trials = kept + (1 if kept < proposed else 0)  # a rejection ends the trials
        if trials:
            observed = kept / trials
            self.rate = self.memory * self.rate + (1 - self.memory) * observed


class PromptLookup:
    """Copies from the context: finds the latest earlier occurrence of its last n tokens
    (n from ``max_ngram`` down to ``min_ngram``) and proposes what followed it.

    Edits, quotes and summaries repeat long stretches of the prompt (system text, history,
    the reply so far), which is where this pays; free text rarely matches and then nothing
    is proposed, so plain decoding costs only the search.
    """

    name = "ngram"

    def __init__(self, *, max_ngram: int = 3, min_ngram: int = 2,
                 length: DraftLength | None = None):
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.length = length or DraftLength()

    def propose(self, context: Sequence[int], limit: int) -> list[int]:
        want = self.length.choose(limit)
        if want == 0:
            return []
        ids = np.asarray(context, dtype=np.int64)
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            found = _latest_match(ids, n)
            if found is not None:
                follow = ids[found + n:found + n + want]
                stop = np.flatnonzero(follow < 0)  # never copy across an image
                if len(stop):
                    follow = follow[:stop[0]]
                if len(follow):
                    return [int(t) for t in follow]
        return []

    def accepted(self, proposed: int, kept: int) -> None:
        self.length.update(proposed, kept)


def _latest_match(ids: np.ndarray, n: int) -> int | None:
    """Start of the latest earlier occurrence of ids' last n tokens, followed by at least
    one token (so not the tail itself); None if there is none."""
    if len(ids) <= n or (ids[-n:] < 0).any():
        return None
    tail = ids[-n:]
    starts = len(ids) - n  # candidate starts 0 .. len-n-1: each has a following token
    hit = ids[:starts] == tail[0]
    for j in range(1, n):
        hit &= ids[j:starts + j] == tail[j]
    found = np.flatnonzero(hit)
    return int(found[-1]) if len(found) else None


class DraftModel:
    """A smaller model with the same vocabulary drafts greedily on its own decoder and KV
    cache (reused between steps like the target's: only new tokens are fed).

    Its greedy pick is a deterministic draft, so the target's acceptance rule is the same
    as for prompt lookup. Contexts with image rows are not drafted (it reads text only).
    """

    name = "draft model"

    def __init__(self, decoder, *, draft_cost: float, max_len: int = 8):
        self.decoder = decoder
        self.length = DraftLength(max_len=max_len, draft_cost=draft_cost)

    def propose(self, context: Sequence[int], limit: int) -> list[int]:
        limit = min(limit, self.decoder.max_cache_len - len(context) - 1)
        want = self.length.choose(limit) if limit > 0 else 0
        if want == 0 or min(context) < 0:
            return []
        ids = [int(t) for t in context]
        reuse = self.decoder.keep_prefix(ids[:-1])  # the last token runs, for its logits
        logits = self.decoder.forward(input_ids=np.asarray(ids[reuse:], np.int64)).logits
        draft: list[int] = []
        while True:
            token = int(np.argmax(logits))
            draft.append(token)
            if len(draft) == want:
                return draft
            logits = self.decoder.forward(input_ids=np.array([token], np.int64)).logits

    def accepted(self, proposed: int, kept: int) -> None:
        self.length.update(proposed, kept)
