"""Fast mode vs llama.cpp: how closely each int8 path follows exact (fp32) logits.

Teacher forcing along the exact-mode greedy path of each prompt (on the five prompts of
tests/hf_oracle.py that path equals HF transformers'; tests/integration/test_engine_vs_hf.py checks
it), both engines give their logits at every position. Printed per prompt set: top-1
agreement with the path and the RMS of the logit error against exact mode. The wider set
adds 15 prompts (code in four languages, prose, Chinese, translation) so one near-tie
moves the figure by 0.1%, not 0.6%.

A key is a demo model (chat prompts) or a family of benchmarks.families (a random-weight
Q4_K_M GGUF at a released model's widths, made on first use; raw prompts with the BOS
its GGUF asks for). Random weights give flat logits, so their top-1 figures are lower
than a trained model's for any int8 path: compare the two engines, not the families.

    .venv/bin/python -m benchmarks.agreement 0.5b 1.5b gemma3 qwen3vl phi3 llama
"""

import sys

import numpy as np

from engine.gguf import open_model
from engine.prompt import render_prompt
from engine.runtime.decoder import DecoderSession
from engine.tokenizer import load_tokenizer
from tests.fixtures.demo_models import DEMO_MODELS, fetch
from tests.hf_oracle import CONTINUATION, PROMPTS, step_through

WIDER = (
    "Explain the difference between a process and a thread in operating systems.",
    "Write a SQL query that returns the ten customers with the highest total order value.",
    "Translate to French: The weather is nice today and I would like to go for a walk.",
    "def quicksort(arr):\n    # complete this function\n",
    "What is the capital of Australia, and why is it not Sydney?",
    "用Python写一个读取CSV文件并计算每列平均值的程序。",
    "Write a bash script that finds all files larger than 100MB in the home directory.",
    "Explain what a closure is in JavaScript with an example.",
    "Refactor this code to be more readable:\nx=[i*i for i in range(10) if i%2==0];print(sum(x))",
    "Write a short poem about the sea.",
    "How do I reverse a linked list in C?",
    "List three sorting algorithms and their time complexity.",
    "Write a Rust function that parses a comma-separated list of integers.",
    "What does the `yield` keyword do in Python?",
    "Give me a regular expression that matches an email address.",
)
SETS = {"oracle (5 prompts)": range(len(PROMPTS)),
        "wider (20 prompts)": range(len(PROMPTS) + len(WIDER))}


def chat(path, texts: list[str]) -> list[list[int]]:
    template = open_model(path).config.chat_template
    tokenizer = load_tokenizer(path)
    return [tokenizer.encode_prompt(render_prompt([{"role": "user", "content": t}],
                                                  chat_template=template).segments)
            for t in texts]


def llama_logits(llm, prompt: list[int], path: list[int]) -> np.ndarray:
    llm.reset()
    llm.eval(prompt + path[:-1])
    return np.asarray(llm.scores[len(prompt) - 1: len(prompt) - 1 + len(path)])


def raw(path, texts: list[str]) -> list[list[int]]:
    tokenizer = load_tokenizer(path)
    return [tokenizer.encode_prompt([(t, False)]) for t in texts]


def exact_paths(key: str, tokens: int):
    """The model, the ids of every prompt (oracle's, then WIDER), and exact mode's greedy
    path of ``tokens`` tokens with its logits for each."""
    texts = [p.text for p in PROMPTS] + list(WIDER)
    if key in DEMO_MODELS:
        gguf = fetch(DEMO_MODELS[key])
        prompts = chat(gguf, texts)
    else:
        from benchmarks.families import family_file

        gguf = family_file(key, threads=2)
        prompts = raw(gguf, texts)
    model = open_model(gguf)
    exact = DecoderSession(model, exact=True, max_cache_len=max(map(len, prompts)) + tokens)
    return model, prompts, [step_through(exact, p, tokens) for p in prompts]


def main(keys: list[str]) -> None:
    from llama_cpp import Llama  # optional: not a Lantern dependency

    for key in keys:
        model, prompts, reference = exact_paths(key, CONTINUATION)
        cache_len = max(map(len, prompts)) + CONTINUATION
        fast = DecoderSession(model, max_cache_len=cache_len)
        llm = Llama(model_path=str(model.path), n_threads=2, n_ctx=cache_len, logits_all=True,
                    verbose=False)
        rows = []  # per prompt: (ours agree, llama agree, ours rms [N], llama rms [N])
        for prompt, (path, exact_logits) in zip(prompts, reference, strict=True):
            ours = step_through(fast, prompt, CONTINUATION, forced=path)[1]
            theirs = llama_logits(llm, prompt, path)
            rows.append(tuple((logits.argmax(-1) == path).sum() for logits in (ours, theirs))
                        + tuple(np.sqrt(((logits - exact_logits) ** 2).mean(-1))
                                for logits in (ours, theirs)))
        for label, chosen in SETS.items():
            picked = [rows[i] for i in chosen]
            total = CONTINUATION * len(picked)
            a, b = (sum(r[j] for r in picked) for j in (0, 1))
            ra, rb = (float(np.concatenate([r[j] for r in picked]).mean()) for j in (2, 3))
            print(f"{key} {label}: top-1 lantern fast {a}/{total} = {a / total:.1%}, "
                  f"llama.cpp {b}/{total} = {b / total:.1%}; RMS logit error vs exact "
                  f"lantern {ra:.3f}, llama.cpp {rb:.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
