"""HF transformers as the oracle for the real demo models, computed once per model.

For each chat prompt the engine first decodes 32 greedy tokens in exact mode (fp32
activations, KV cache, one token per step as generation does). transformers then loads
the same GGUF (de-quantizing it itself), runs in fp32 over prompt + those tokens once,
and gives its logits at every position that chose one of them: HF's greedy path equals
the engine's exactly when HF's argmax at each of those positions is the engine's next
token, and where it first is not, the two paths part. One teacher-forced pass instead of
HF decoding token by token: on 2 cores an HF decode step of the 0.5B model costs ~0.4 s
of CPU (measured; the 1.5B one ~3x), so 160 greedy tokens would add ~1 and ~3 minutes
per model, while the pass costs ~20 s (0.5B) and ~30-60 s (1.5B).
The same pass records hidden states for the short prompts (the numpy reference is
checked against them) and is what the engine's fast mode is judged against, position by
position. Each stage frees its model before the next is built (the 1.5B one is ~6 GB in
fp32, for the engine's exact session and for HF alike), and everything is computed once
per test session however many modules ask.

Prompts go through the engine's own path (the GGUF's chat template, which adds Qwen's
default system prompt, and the engine's tokenizer); HF is fed the very same ids.
"""

from __future__ import annotations

import functools
import gc
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from engine.gguf import GGUFModel, open_model
from engine.prompt import render_prompt
from engine.runtime.decoder import DecoderSession
from engine.tokenizer import load_tokenizer
from tests.fixtures.hf_gguf import hf_model
from tests.unit.reference.test_reference_hf import hf_run

CONTINUATION = 32  # greedy tokens per prompt; an end-of-turn token does not stop them
FRUITS = ("apple", "banana", "cherry", "grape", "lemon", "mango", "orange", "peach",
          "pear", "plum", "kiwi", "lime")


def inventory_prompt(rows: int = 34) -> str:
    """A ~500-token request over a deterministic CSV table; answering it means reading
    values from far back in the context."""
    lines = ["id,fruit,quantity,price"] + [
        f"{i + 1},{FRUITS[i * 5 % len(FRUITS)]},{i * 37 % 90 + 10},{i * 53 % 400 / 100 + 0.5:.2f}"
        for i in range(rows)
    ]
    return "Here is an inventory table:\n\n" + "\n".join(lines) + (
        "\n\nConvert every row to a JSON object.")


@dataclass(frozen=True)
class ChatPrompt:
    name: str
    text: str
    layers: bool = True  # record HF's hidden states (short prompts only)


PROMPTS = (
    ChatPrompt("english", "Write a Python function that checks whether a number is prime."),
    ChatPrompt("chinese", "你好"),
    ChatPrompt("code", "Complete this code:\n```python\ndef fibonacci(n):\n    if n < 2:\n```"),
    ChatPrompt("japanese", "日本の四季について説明してください。"),
    ChatPrompt("long", inventory_prompt(), layers=False),
)


@dataclass(frozen=True)
class PromptRun:
    prompt: list[int]          # ids fed to the engine and to HF
    path: list[int]            # the engine's exact-mode greedy tokens [N]
    exact_logits: np.ndarray   # float32 [N, V]: the engine's row k chose path[k]
    hf_logits: np.ndarray      # float32 [N, V]: HF's logits at the same N positions
    hf_hidden: list[np.ndarray] | None  # float64 [S, H] over ``sequence``: embeddings,
    #                                      then every block before the final norm

    @property
    def sequence(self) -> list[int]:
        """The teacher-forced input: its last N positions predict the path's tokens."""
        return self.prompt + self.path[:-1]

    @property
    def hf_tokens(self) -> list[int]:
        """HF's top-1 at each path position (its greedy choice given the path so far)."""
        return self.hf_logits.argmax(-1).tolist()

    def first_divergence(self) -> int | None:
        """Index of the first token where HF's greedy path leaves the engine's, if any."""
        return next((k for k, (a, b) in enumerate(zip(self.path, self.hf_tokens, strict=True))
                     if a != b), None)


@dataclass(frozen=True)
class Oracle:
    runs: dict[str, PromptRun]  # by ChatPrompt.name
    exact_seconds: float        # engine exact session: build + greedy decoding
    hf_load_seconds: float
    hf_run_seconds: float
    peak_rss_gb: float          # of the test process so far

    def summary(self, label: str) -> str:
        tokens = sum(len(r.prompt) for r in self.runs.values())
        return (f"{label}: {len(self.runs)} prompts ({tokens} prompt tokens), "
                f"{CONTINUATION} tokens each; engine exact build + greedy "
                f"{self.exact_seconds:.0f} s, HF load {self.hf_load_seconds:.0f} s + "
                f"teacher-forced pass {self.hf_run_seconds:.0f} s; "
                f"peak RSS so far {self.peak_rss_gb:.1f} GB")


def chat_ids(path: Path) -> dict[str, list[int]]:
    """Every prompt rendered with the GGUF's chat template and tokenized by the engine."""
    template = open_model(path).config.chat_template
    tokenizer = load_tokenizer(path)
    return {
        p.name: tokenizer.encode_prompt(render_prompt(
            [{"role": "user", "content": p.text}], chat_template=template).segments)
        for p in PROMPTS
    }


def step_through(session: DecoderSession, prompt: list[int], n: int,
                 forced: Sequence[int] | None = None) -> tuple[list[int], np.ndarray]:
    """Prefill, then single-token steps as generation takes them, feeding ``forced[k]``
    (teacher forcing) or, without it, the argmax (greedy). Returns the argmax at the n
    positions after the prompt [n] and their logits [n, V]."""
    session.reset()
    rows = [session.forward(input_ids=prompt).logits]
    tokens = [int(rows[0].argmax())]
    for k in range(n - 1):
        fed = tokens[k] if forced is None else forced[k]
        rows.append(session.forward(input_ids=[fed]).logits)
        tokens.append(int(rows[-1].argmax()))
    return tokens, np.stack(rows)


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


def exact_greedy(model: GGUFModel, ids: dict[str, list[int]]) -> dict[str, tuple[list[int],
                                                                                np.ndarray]]:
    longest = max(map(len, ids.values()))
    session = DecoderSession(model, exact=True, max_cache_len=longest + CONTINUATION)
    return {name: step_through(session, prompt, CONTINUATION) for name, prompt in ids.items()}


@torch.inference_mode()
def hf_pass(hf: torch.nn.Module, sequence: list[int],
            keep_hidden: bool) -> tuple[np.ndarray, list[np.ndarray] | None]:
    states, out = hf_run(hf, hf.model.layers, input_ids=torch.tensor([sequence]),
                         logits_to_keep=CONTINUATION)
    return out.logits[0].numpy(), states if keep_hidden else None


@functools.cache
def hf_oracle(path: Path) -> Oracle:
    """Engine exact greedy paths, then HF along them (see the module docstring)."""
    model = open_model(path)
    ids = chat_ids(path)
    started = time.perf_counter()
    paths = exact_greedy(model, ids)  # the session is gone when this returns
    gc.collect()
    exact_done = time.perf_counter()
    hf = hf_model(path)
    hf_loaded = time.perf_counter()
    runs = {}
    for p in PROMPTS:
        tokens, exact_logits = paths[p.name]
        logits, hidden = hf_pass(hf, ids[p.name] + tokens[:-1], p.layers)
        runs[p.name] = PromptRun(ids[p.name], tokens, exact_logits, logits, hidden)
    hf_done = time.perf_counter()
    del hf
    gc.collect()
    return Oracle(runs, exact_done - started, hf_loaded - exact_done, hf_done - hf_loaded,
                  peak_rss_gb())
