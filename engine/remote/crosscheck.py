"""Cross-check: the same conversation on a server and on Lantern, token by token.

The server answers greedily with its log-probabilities; Lantern then runs the same
conversation teacher-forced along the server's tokens and computes its own
log-probability of each. Where both engines run the same weights, the gaps measure the
engines alone; the largest are marked. Same weights means: for Ollama, the server's
weights blob has the local GGUF's sha256; an OpenAI-compatible server reports no digest,
so the user asserts it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from engine.chat.messages import Message
from engine.chat.options import Options
from engine.errors import GenerationError, Remedy, RemoteError
from engine.remote.http import post_json
from engine.remote.records import ServerToken
from engine.remote.session import APIS, RemoteModel
from engine.runtime.generate import Generator, positions_like
from engine.runtime.loaded_model import LoadedModel
from engine.runtime.sampler import logprobs
from engine.tokenizer.byte_level import byte_to_char

# Largest |Lantern - server| log-probability of a greedy token seen on the 0.5B demo model,
# Lantern exact (fp32) against llama-cpp-python 0.3.36's server, with a margin: see
# BENCHMARKS.md "Cross-check tolerance" for the measurement and its command.
TOLERANCE = 0.25
MARKED = 3                       # the largest gaps marked in the table
BLOB_NAME = re.compile(r"sha256[-:]([0-9a-f]{64})$")


@dataclass(frozen=True)
class CrossCheckRow:
    index: int
    piece: str                   # the server's token (its bytes as Lantern's tokenizer shows them)
    server_logprob: float
    lantern_logprob: float
    lantern_best: str            # Lantern's most likely token where it is another; else ""
    marked: bool = False         # among the largest gaps

    @property
    def gap(self) -> float:
        return abs(self.lantern_logprob - self.server_logprob)


@dataclass(frozen=True)
class CrossCheckReport:
    model: str                   # Lantern's model
    server_model: str
    server: str                  # host (kind)
    weights: str                 # how the weights were found the same
    lantern_mode: str            # "exact" or the fast mode's weights
    prompt_tokens: int           # Lantern's prompt
    server_prompt_tokens: int    # the server's count (0: not reported)
    rows: tuple[CrossCheckRow, ...]
    tolerance: float

    @property
    def max_gap(self) -> float:
        return max((r.gap for r in self.rows), default=0.0)

    @property
    def mean_gap(self) -> float:
        return float(np.mean([r.gap for r in self.rows])) if self.rows else 0.0

    @property
    def prompts_differ(self) -> bool:
        return bool(self.server_prompt_tokens) and self.server_prompt_tokens != self.prompt_tokens

    @property
    def agrees(self) -> bool:
        return bool(self.rows) and self.max_gap <= self.tolerance and not self.prompts_differ

    @property
    def verdict(self) -> str:
        if not self.rows:
            return "the server answered nothing to compare"
        if self.prompts_differ:
            return (f"the prompts differ: Lantern's has {self.prompt_tokens} tokens, the "
                    f"server's {self.server_prompt_tokens} (their chat templates differ), so "
                    "the engines were not given the same input")
        word = "agree" if self.agrees else "DISAGREE"
        return (f"Lantern and {self.server} {word}: largest gap {self.max_gap:.4f} "
                f"(mean {self.mean_gap:.4f}) over {len(self.rows)} tokens, tolerance "
                f"{self.tolerance}")


def weights_digest(path: Path) -> str:
    """sha256 of a GGUF: from a store blob's name (the store verifies it), else hashed."""
    found = BLOB_NAME.search(Path(path).name)
    if found:
        return "sha256:" + found.group(1)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def same_weights(path: Path, name: str, remote: RemoteModel, asserted: bool) -> str:
    """How the local GGUF at ``path`` is known to be the server's weights, or a RemoteError
    saying it is not."""
    server = remote.info.blob_digest
    if server is not None:
        mine = weights_digest(path)
        if mine != server:
            raise RemoteError(
                f"{remote.name} on {remote.connection.host} is not the same weights as "
                f"{name} (server {server[:19]}…, local {mine[:19]}…): the cross-check "
                "compares engines on the same weights; pick the matching model")
        return f"same weights blob {mine[:19]}… (from the server's /api/show)"
    if asserted:
        return "same weights as asserted by the user (the server reports no digest)"
    raise RemoteError(f"{remote.connection.host} does not report which weights "
                      f"{remote.name} runs: assert that they are {name}'s to compare anyway",
                      remedy=Remedy.SAME_WEIGHTS)


def cross_check(local: LoadedModel, remote: RemoteModel, messages: list[Message],
                system: str | None = None, *, num_predict: int = 32, top: int = 5,
                tolerance: float = TOLERANCE, same_weights_asserted: bool = False,
                num_ctx: int = 4096) -> CrossCheckReport:
    """Ask the server for a greedy answer to ``messages`` (ending with a user message), then
    run Lantern teacher-forced along the server's tokens."""
    if not messages or messages[-1].role != "user":
        raise GenerationError("the cross-check answers the last user message: send one first")
    weights = same_weights(local.gguf.path, local.name, remote, same_weights_asserted)
    connection = remote.connection
    api = APIS[connection.kind]
    options = Options(temperature=0.0, top_k=1, num_predict=num_predict, seed=0, num_ctx=num_ctx)
    request = [{"role": "system", "content": system}] if system else []
    request += [{"role": m.role, "content": m.content} for m in messages]
    answer = post_json(connection, api.CHAT_PATH,
                       api.chat_body(remote.name, request, options, top, stream=False),
                       read_timeout=None)
    delta, finish = api.parse_answer(answer, connection.host)
    if delta.text and not delta.tokens:
        raise RemoteError(f"{connection.host} sent no log-probabilities for {remote.name}: "
                          "the cross-check needs a server that supports logprobs")
    ids = token_ids(local, delta.tokens, delta.text, connection.host)
    prompt = local.tokenize_chat(messages, system=system)
    ours = teacher_forced(local, prompt, ids)
    piece = local.tokenizer.id_to_piece
    rows = [CrossCheckRow(i, piece(token_id), token.logprob, lp,
                          "" if best == token_id else piece(best))
            for i, (token, token_id, (lp, best)) in enumerate(zip(delta.tokens, ids, ours,
                                                                  strict=True))]
    largest = set(sorted(range(len(rows)), key=lambda i: -rows[i].gap)[:MARKED])
    rows = [replace(r, marked=r.index in largest) for r in rows]
    return CrossCheckReport(
        model=local.name, server_model=remote.name,
        server=f"{connection.host} ({connection.kind})", weights=weights,
        lantern_mode="exact" if local.exact else local.weights + ", fast activations",
        prompt_tokens=len(prompt), server_prompt_tokens=finish.prompt_eval_count if finish else 0,
        rows=tuple(rows), tolerance=tolerance)


def teacher_forced(model: LoadedModel, prompt, ids: list[int]) -> list[tuple[float, int]]:
    """Lantern's log-probability of each given token after the prompt and the tokens before
    it, with its own most likely token at each step."""
    generator = Generator(model.decoder, model.tokenizer)
    step, _ = generator.prefill(prompt)
    out = []
    for n, token in enumerate(ids):
        dist = logprobs(step.logits, 1)
        out.append((dist.of(token), dist.top[0][0]))
        if n + 1 < len(ids):
            step = model.decoder.forward(
                input_ids=np.array([token], dtype=np.int64),
                positions=positions_like(prompt.positions, prompt.next_position + n))
    return out


def token_ids(model: LoadedModel, tokens: Sequence[ServerToken], text: str,
              host: str) -> list[int]:
    """Lantern's ids of the server's tokens, which together spell the answer's bytes.

    Ollama sends each token's bytes. llama-cpp-python sends only its text, decoded with
    the bytes of a split character dropped ("" for the tail of 春, " " for a space and its
    head). So each token is matched to a slice of the answer's bytes that is a vocabulary
    entry and decodes, so cut, to the token's text; a search over slice lengths finds the
    segmentation that covers the answer exactly."""
    data = text.encode("utf-8")
    table = byte_to_char()
    ways: list[dict[int, tuple[int, int]]] = [{0: (0, -1)}]   # per token: end -> (start, id)
    for i, token in enumerate(tokens):
        reached: dict[int, tuple[int, int]] = {}
        for start in ways[-1]:
            if token.data is not None:
                lengths: Sequence[int] = [len(token.data)] \
                    if data.startswith(token.data, start) else []
            else:
                size = len(token.piece.encode("utf-8"))
                lengths = range(max(size, 1), size + 7)      # up to 3 cut bytes at each end
            for length in lengths:
                piece = data[start:start + length]
                if len(piece) < length or (token.data is None and piece.decode(
                        "utf-8", "ignore") != token.piece):
                    continue
                found = model.tokenizer.token_to_id("".join(table[b] for b in piece))
                if found is not None:
                    reached.setdefault(start + length, (start, found))
        if not reached:
            raise RemoteError(f"{host}'s token #{i} {token.piece!r} does not match "
                              f"{model.name}'s vocabulary along the answer: the server runs "
                              "another tokenizer, so it is not the same model")
        ways.append(reached)
    if len(data) not in ways[-1]:
        raise RemoteError(f"{host}'s tokens do not spell its answer in {model.name}'s "
                          "vocabulary: the server runs another tokenizer")
    ids, end = [], len(data)
    for reached in reversed(ways[1:]):
        end, found = reached[end]
        ids.append(found)
    return ids[::-1]


def format_table(report: CrossCheckReport) -> str:
    """The per-token table the CLI prints, the largest gaps marked with *."""
    lines = [f"{report.model} (Lantern, {report.lantern_mode}) vs {report.server_model} on "
             f"{report.server}", f"weights: {report.weights}",
             f"{'#':>4}  {'token':<20} {'server':>10} {'lantern':>10} {'gap':>8}  lantern's best"]
    for r in report.rows:
        best = repr(r.lantern_best) if r.lantern_best else ""
        lines.append(f"{r.index:>4}  {r.piece!r:<20} {r.server_logprob:>10.4f} "
                     f"{r.lantern_logprob:>10.4f} {r.gap:>8.4f}{' *' if r.marked else '  '}"
                     f"{best}")
    lines.append(report.verdict)
    return "\n".join(lines)
