"""Choosing the next token: Ollama's options, llama.cpp's sampler chain, in numpy.

Ollama now runs GGUF models on llama-server and passes the options through unchanged,
so the chain here is llama.cpp's default one: penalties -> top_k -> typical_p -> top_p ->
min_p -> temperature -> draw. top_p, typical_p and min_p therefore see the distribution
at temperature 1; temperature only reshapes what survives them. (Ollama's older Go
sampler applied temperature before top_p/min_p and had no penalties.) Temperature 0 is
greedy: the argmax of the penalised logits.

Each transform is a small function over `Candidates` so tests can check its exact
output; `Sampler` strings them together. Only the full-vocabulary steps (penalties,
the top-k cut, greedy) touch all V logits; everything after works on the few survivors.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from engine.chat.options import Options
from engine.errors import GenerationError

if TYPE_CHECKING:
    from engine.runtime.constraint import Constraint

# Candidate counts the adaptive top-p tries before sorting the whole vocabulary.
_TOP_P_TRIES = (256, 4096)


@dataclass(frozen=True)
class Candidates:
    """Tokens still in the running and their (transformed) logits.

    Either sorted (logits descending, ties by ascending id) or in ascending id order.
    """

    ids: np.ndarray  # int64 [n]
    logits: np.ndarray  # float32 [n]
    is_sorted: bool = False

    @classmethod
    def all(cls, logits: np.ndarray) -> "Candidates":
        return cls(np.arange(len(logits)), logits)

    def sorted(self) -> "Candidates":
        if self.is_sorted:
            return self
        order = np.argsort(-self.logits, kind="stable")  # ids ascending: ties keep id order
        return Candidates(self.ids[order], self.logits[order], True)

    def take(self, index: np.ndarray | slice, is_sorted: bool) -> "Candidates":
        return Candidates(self.ids[index], self.logits[index], is_sorted)

    def probs(self) -> np.ndarray:
        """Softmax over the candidates, float64 [n]."""
        return softmax(self.logits)


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits.astype(np.float64) - logits.max())
    return e / e.sum()


def penalize(
    logits: np.ndarray,
    history: Sequence[int],
    *,
    repeat_penalty: float,
    last_n: int,
    presence: float,
    frequency: float,
) -> np.ndarray:
    """llama.cpp's penalties over the last `last_n` tokens of `history` (-1: all of it).

    Each token seen c times: logit / repeat_penalty if positive, * repeat_penalty if not
    (so it always becomes less likely), then - c * frequency - presence. Returns a new
    array when anything changes, the input itself otherwise.
    """
    off = repeat_penalty == 1.0 and presence == 0.0 and frequency == 0.0
    if off or last_n == 0 or not len(history):
        return logits
    recent = history if last_n < 0 else history[-last_n:]
    ids, counts = np.unique(np.asarray(recent, dtype=np.int64), return_counts=True)
    if ids[0] < 0 or ids[-1] >= len(logits):
        bad = ids[0] if ids[0] < 0 else ids[-1]
        raise GenerationError(
            f"token {bad} in the history is outside the vocabulary of {len(logits)} tokens"
        )
    out = logits.copy()
    seen = out[ids]
    seen = np.where(seen <= 0, seen * np.float32(repeat_penalty), seen / np.float32(repeat_penalty))
    out[ids] = seen - (counts.astype(np.float32) * np.float32(frequency) + np.float32(presence))
    return out


def top_k(c: Candidates, k: int) -> Candidates:
    """The k highest logits, sorted. k <= 0 keeps everything."""
    if k <= 0 or k >= len(c.ids):
        return c
    return c.take(largest(c.logits, k), True)


def typical_p(c: Candidates, p: float) -> Candidates:
    """Locally typical sampling: keep the tokens whose surprise -log p is closest to the
    entropy until their mass exceeds p. p >= 1 keeps everything."""
    if p >= 1.0:
        return c
    c = c.sorted()
    probs = c.probs()
    surprise = -np.log(probs, where=probs > 0, out=np.full_like(probs, -np.inf))  # [n]
    entropy = np.sum(probs * np.where(probs > 0, surprise, 0.0))
    order = np.argsort(np.abs(surprise - entropy), kind="stable")
    keep = _first_reaching(np.cumsum(probs[order]), p, strict=True)
    return c.take(np.sort(order[:keep]), True)


def top_p(c: Candidates, p: float) -> Candidates:
    """Nucleus: the most likely tokens until their mass reaches p. p >= 1 keeps everything.

    For a large unsorted set (top_k off) the most likely few hundred, then thousands, are
    tried first, as llama.cpp does; the whole set is sorted only if they fall short of p.
    """
    if p >= 1.0:
        return c
    if not c.is_sorted:
        log_norm = _logsumexp(c.logits)
        for n in _TOP_P_TRIES:
            if 4 * n > len(c.ids):
                break
            head = c.take(largest(c.logits, n), True)
            mass = np.cumsum(np.exp(head.logits.astype(np.float64) - log_norm))  # [n]
            if mass[-1] >= p:
                return head.take(slice(0, _first_reaching(mass, p)), True)
    c = c.sorted()
    return c.take(slice(0, _first_reaching(np.cumsum(c.probs()), p)), True)


def min_p(c: Candidates, p: float) -> Candidates:
    """Keep tokens at least p times as likely as the most likely one. p <= 0 keeps all."""
    if p <= 0.0:
        return c
    keep = c.logits >= c.logits.max() + np.float32(math.log(p))
    return c if keep.all() else c.take(keep, c.is_sorted)


def temperature(c: Candidates, t: float) -> Candidates:
    """Divide the logits by t (t > 0): below 1 sharpens, above 1 flattens."""
    if t == 1.0:
        return c
    return Candidates(c.ids, c.logits / np.float32(t), c.is_sorted)


def draw(c: Candidates, rng: np.random.Generator) -> int:
    """One token drawn with probability softmax(logits)."""
    cumulative = np.cumsum(c.probs())
    index = np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right")
    return int(c.ids[min(index, len(c.ids) - 1)])


class Sampler:
    """Picks tokens for one generation; a fixed seed makes the picks reproducible. A
    ``constraint`` (structured output) masks each step and follows every pick."""

    def __init__(self, options: Options, constraint: "Constraint | None" = None):
        self.options = options
        self.constraint = constraint
        seed = None if options.seed == -1 else options.seed % 2**64
        self.rng = np.random.default_rng(seed)

    def sample(self, logits: np.ndarray, history: Sequence[int] = (),
               trace: "SampleTrace | None" = None) -> int:
        """Next token id from the last position's logits [V] and the tokens so far
        (prompt and reply, oldest first; llama-server penalises prompt tokens too).
        ``trace`` records each step's survivors as it happens (the sampler's reasons)."""
        c = self.distribution(logits, history, trace)
        token = int(c.ids[0]) if self.options.temperature <= 0.0 else draw(c, self.rng)
        _record_pick(trace, c, token, self.options.temperature <= 0.0)
        if self.constraint is not None:
            self.constraint.advance(token)
        return token

    def verify(self, logits: np.ndarray, history: Sequence[int], drafted: int,
               trace: "SampleTrace | None" = None) -> tuple[int, bool]:
        """Speculative decoding's exact acceptance of a deterministic draft (prompt lookup,
        a draft model's greedy pick): (token, True) keeps ``drafted``, (other, False) replaces
        it, so the token has exactly the distribution ``sample`` would give.

        Greedy keeps the draft iff it is the argmax. Sampling keeps it with probability p(x),
        else draws from p without x, renormalised (the rejection rule for a draft
        distribution q concentrated on x: min(1, p/q) = p(x), residual max(0, p - q)).
        Seeded streams: one uniform draw decides, one more draws a replacement.
        """
        c = self.distribution(logits, history, trace)
        if self.options.temperature <= 0.0:
            token = int(c.ids[0])
        else:
            probs = c.probs()
            hit = np.flatnonzero(c.ids == drafted)
            p = float(probs[hit[0]]) if len(hit) else 0.0
            if p > 0.0 and self.rng.random() < p:
                token = drafted
            else:
                rest = Candidates(c.ids, np.where(c.ids == drafted, -np.inf,
                                                  c.logits).astype(np.float32))
                token = draw(rest, self.rng)
        _record_pick(trace, c, token, self.options.temperature <= 0.0)
        if self.constraint is not None:
            self.constraint.advance(token)
        return token, token == drafted

    def distribution(self, logits: np.ndarray, history: Sequence[int] = (),
                     trace: "SampleTrace | None" = None) -> Candidates:
        """The candidates ``sample`` draws from, their logits after every transform
        (temperature included); greedy leaves the argmax alone."""
        o = self.options
        if not np.isfinite(logits.max()):
            raise GenerationError(
                f"the model produced a logit of {logits.max()}; its output is unusable"
            )
        if trace is not None:
            trace.raw = logits
        if self.constraint is not None:  # before every transform: they see only valid tokens
            logits, allowed = self.constraint.mask(logits)
            if trace is not None:
                trace.allowed = allowed
        logits = penalize(
            logits,
            history,
            repeat_penalty=o.repeat_penalty,
            last_n=o.repeat_last_n,
            presence=o.presence_penalty,
            frequency=o.frequency_penalty,
        )
        record = trace.record if trace is not None else _ignore
        if trace is not None:
            trace.penalized = logits
        if o.temperature <= 0.0:
            best = int(np.argmax(logits))
            return Candidates(np.array([best]), logits[best:best + 1], True)
        c = top_k(Candidates.all(logits), o.top_k)
        record("top_k", c)
        c = typical_p(c, o.typical_p)
        record("typical_p", c)
        c = top_p(c, o.top_p)
        record("top_p", c)
        c = min_p(c, o.min_p)
        record("min_p", c)
        c = temperature(c, o.temperature)
        record("temperature", c)
        return c


class SampleTrace:
    """What one Sampler.sample call saw and kept: the raw and penalised logits [V], the
    tokens a schema allowed (bool [V], None without one), then each step's survivors in
    order, (step, candidates).

    Filled by the sampler itself while it picks, so an explanation built from it
    (engine.runtime.reasons) is the pick's own account, not a re-run. Holding the
    arrays costs nothing extra: they are the ones the sampler made anyway.
    """

    def __init__(self) -> None:
        self.raw: np.ndarray | None = None
        self.penalized: np.ndarray | None = None
        self.allowed: np.ndarray | None = None
        self.steps: list[tuple[str, Candidates]] = []

    def record(self, step: str, candidates: Candidates) -> None:
        self.steps.append((step, candidates))


def _ignore(step: str, candidates: Candidates) -> None:
    """The sampler's recorder when nobody asked for a trace."""


def _record_pick(trace: SampleTrace | None, c: Candidates, token: int, greedy: bool) -> None:
    """The last step of a trace: the argmax (greedy: ``c`` is just it) or the token drawn."""
    if trace is None:
        return
    if greedy:
        trace.record("greedy", c)
    else:
        trace.record("draw", Candidates(np.array([token]), c.logits[c.ids == token][:1]))


@dataclass(frozen=True)
class LogProbs:
    """Log-softmax of the raw logits (before any sampling transform), as Ollama reports."""

    logits: np.ndarray = field(repr=False, compare=False)  # float32 [V], not copied
    log_norm: float  # log-sum-exp of the logits
    entropy: float  # nats
    top: tuple[tuple[int, float], ...]  # k most likely (token id, log-prob), best first

    def of(self, token_id: int) -> float:
        """Log-probability of any token, e.g. the one that was sampled."""
        return float(self.logits[token_id]) - self.log_norm


def logprobs(logits: np.ndarray, k: int) -> LogProbs:
    """Top-k log-probabilities and the entropy of the model's own distribution."""
    peak = logits.max()
    shifted = logits - peak  # [V], <= 0
    weights = np.exp(shifted)
    total = float(weights.sum(dtype=np.float64))
    with np.errstate(invalid="ignore"):
        weighted = float(np.dot(weights, shifted))  # NaN if a logit is -inf (0 * -inf)
    if math.isnan(weighted):
        weighted = float(np.dot(weights, np.where(weights > 0, shifted, np.float32(0))))
    entropy = math.log(total) - weighted / total
    log_norm = float(peak) + math.log(total)
    best = largest(logits, k) if k > 0 else np.empty(0, np.int64)
    top = tuple((int(i), float(logits[i]) - log_norm) for i in best)
    return LogProbs(logits=logits, log_norm=log_norm, entropy=max(entropy, 0.0), top=top)


def largest(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values, largest first (ties: lower index first).

    Faster than argpartition over a 152k vocabulary: the k-th largest of 128-wide block
    maxima is a lower bound for the k-th largest value, and few values pass it.
    """
    n = len(values)
    k = min(k, n)
    block = 128
    full = n // block * block
    if full // block >= 2 * k:
        maxima = values[:full].reshape(-1, block).max(axis=1)  # [n // block]
        if full < n:
            maxima = np.append(maxima, values[full:].max())
        bound = np.partition(maxima, len(maxima) - k)[len(maxima) - k]
    else:
        bound = np.partition(values, n - k)[n - k]  # the k-th largest itself
    pool = np.flatnonzero(values >= bound)  # every value that can be in the top k, ties too
    order = np.lexsort((pool, -values[pool]))[:k]
    return pool[order]


def _first_reaching(cumulative: np.ndarray, p: float, strict: bool = False) -> int:
    """How many leading entries it takes for the running sum to reach p (exceed it if
    strict); all of them if it never does. Always at least one."""
    side = "right" if strict else "left"
    return int(min(np.searchsorted(cumulative, p, side=side) + 1, len(cumulative)))


def _logsumexp(logits: np.ndarray) -> float:
    peak = float(logits.max())
    return peak + math.log(float(np.exp(logits - peak).sum(dtype=np.float64)))
