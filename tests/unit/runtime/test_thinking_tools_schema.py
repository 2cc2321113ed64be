"""Thinking, tools and a schema together, as Qwen3's templates expect them (a tiny random
qwen3 model whose vocabulary holds Qwen3's tags as tokens of their own, with a
Qwen3-style chat template, tests/data/templates/qwen3-style.jinja).

Qwen3's template leaves ``<think>`` to the model: under a schema the answer may open
with it, think freely and close it, then either call an offered tool in Qwen's
``<tool_call>`` format (arguments per the tool's parameters) or answer the schema's JSON;
after the tool results the next round is held the same way, and the final answer
validates."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from engine.chat.events import DoneEvent, ToolCallEvent
from engine.chat.options import Options
from engine.chat.tools import Tool
from engine.runtime.constraint import Constraint
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from tests.fixtures.synthetic_gguf import TextSpec, vocabulary

TEMPLATE = (Path(__file__).parents[2] / "data" / "templates" / "qwen3-style.jinja").read_text()
TAGS = ("<think>", "</think>", "<tool_call>", "</tool_call>")
USER_DEFINED = 4    # GGUF token type of Qwen3's tags (added tokens, not control tokens)
SCHEMA = {"type": "object", "properties": {
    "mood": {"enum": ["happy", "sad"]}, "score": {"type": "integer", "minimum": 0,
                                                  "maximum": 9}},
    "required": ["mood", "score"], "additionalProperties": False}
DIGIT = {"type": "integer", "minimum": 0, "maximum": 9}
ADD = Tool("add", "Adds two digits", {"type": "object", "properties": {"a": DIGIT, "b": DIGIT},
                                      "required": ["a", "b"], "additionalProperties": False})


def add(call) -> str:
    return str(call.arguments["a"] + call.arguments["b"])


@pytest.fixture(scope="module")
def qwen3(synthetic_gguf):
    vocab = vocabulary(400)
    tokens, types = list(vocab.tokens), list(vocab.token_types)
    for offset, tag in enumerate(TAGS, start=1):    # the last padding entries become the tags
        tokens[-offset], types[-offset] = tag, USER_DEFINED
    path = synthetic_gguf("qwen3", TextSpec(vocab=400), seed=7, overrides={
        "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
        "tokenizer.chat_template": TEMPLATE})
    return load_model(path, num_ctx=2048)


def walk(constraint: Constraint, tokenizer, pieces: list[str]) -> None:
    """Each piece's tokens are allowed in turn; stop tokens exactly where the answer is
    complete (so at the end)."""
    logits = np.zeros(tokenizer.vocab_size, dtype=np.float32)
    stops = sorted(tokenizer.stop_ids)
    for token in [t for piece in pieces for t in tokenizer.encode(piece)]:
        masked, _ = constraint.mask(logits)
        assert np.isfinite(masked[token]), tokenizer.decode([token])
        assert np.isfinite(masked[stops]).all() == constraint.done
        assert np.isneginf(masked[stops]).all() == (not constraint.done)
        constraint.advance(token)
    assert constraint.done
    assert np.isfinite(constraint.mask(logits)[0][stops]).all()


def allowed_next(constraint: Constraint, tokenizer, text: str) -> np.ndarray:
    for token in tokenizer.encode(text):
        constraint.advance(token)
    return np.isfinite(constraint.mask(np.zeros(tokenizer.vocab_size, np.float32))[0])


def test_the_tags_are_tokens_and_the_template_leaves_think_to_the_model(qwen3):
    tokenizer = qwen3.tokenizer
    assert all(len(tokenizer.encode(tag)) == 1 for tag in TAGS)
    assert qwen3.may_think
    messages = [{"role": "user", "content": "Add 2 and 3"},
                {"role": "assistant", "content": "", "thinking": "I should add.",
                 "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]},
                {"role": "tool", "content": "5", "tool_name": "add"}]
    text = tokenizer.decode(qwen3.tokenize_chat(messages, tools=[ADD.api()]).ids)
    assert '"name": "add"' in text.split("\n</tools>")[0]
    # the turn still calling tools keeps its thinking (reasoning_content) and its call
    assert ('<|im_start|>assistant\n<think>\nI should add.\n</think>\n\n<tool_call>\n'
            '{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call><|im_end|>') in text
    assert text.endswith("<tool_response>\n5\n</tool_response><|im_end|>\n"
                         "<|im_start|>assistant\n")
    closed = tokenizer.decode(qwen3.tokenize_chat(messages[:1], think=False).ids)
    assert closed.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_think_then_call_a_tool_or_answer_the_schema(qwen3):
    tokenizer = qwen3.tokenizer
    call = '{"name": "add", "arguments": {"a": 2, "b": 3}}'
    walk(Constraint(tokenizer, SCHEMA, tools=[ADD], may_think=True), tokenizer,
         ["<think>", "Add them.", "</think>", "<tool_call>", "\n", call, "\n", "</tool_call>"])
    walk(Constraint(tokenizer, SCHEMA, tools=[ADD], may_think=True), tokenizer,
         ["<think>", "It is 5.", "</think>", '{"mood": "happy", "score": 5}'])
    walk(Constraint(tokenizer, SCHEMA, tools=[ADD], may_think=True), tokenizer,
         ["<tool_call>", "\n", call, "\n", "</tool_call>", "\n", "<tool_call>", "\n", call,
          "\n", "</tool_call>"])                      # two calls, and no thinking at all
    walk(Constraint(tokenizer, SCHEMA, may_think=True), tokenizer,
         ["<think>", "Hmm.", "</think>", '{"mood": "sad", "score": 0}'])   # no tools


def test_what_the_grammar_refuses(qwen3):
    tokenizer = qwen3.tokenizer
    think, call = tokenizer.encode("<think>")[0], tokenizer.encode("<tool_call>")[0]
    first = allowed_next(Constraint(tokenizer, SCHEMA, tools=[ADD], may_think=True),
                         tokenizer, "")
    assert first[think] and first[call] and first[tokenizer.encode("{")[0]]
    assert not first[tokenizer.encode("H")[0]]
    off = allowed_next(Constraint(tokenizer, SCHEMA, tools=[ADD]), tokenizer, "")
    assert not off[think] and off[call]                 # think=false: no thinking section
    plain = allowed_next(Constraint(tokenizer, SCHEMA, may_think=True), tokenizer, "")
    assert not plain[call]                              # no tools offered: no call
    after = allowed_next(Constraint(tokenizer, SCHEMA, tools=[ADD], may_think=True),
                         tokenizer, "<think>x</think>")
    assert not after[tokenizer.encode("H")[0]] and after[call]
    name = allowed_next(Constraint(tokenizer, SCHEMA, tools=[ADD]), tokenizer,
                        '<tool_call>\n{"name": "')
    assert name[tokenizer.encode("a")[0]] and not name[tokenizer.encode("b")[0]]
    digit = allowed_next(Constraint(tokenizer, SCHEMA, tools=[ADD]), tokenizer,
                         '<tool_call>\n{"name": "add", "arguments": {"a": ')
    assert digit[tokenizer.encode("7")[0]] and not digit[tokenizer.encode("-")[0]]


def chat_outcome(qwen3, think: bool, seed: int) -> str:
    """One chat's rounds, checked: each a call of the offered tool with valid arguments
    (its result fed back) or the final answer, JSON that validates; num_predict cuts only
    after a thinking section (a random model rarely closes it). Returns what happened, e.g.
    "call json" or "thought json"."""
    chat = LocalSession(qwen3, Options(temperature=1.0, seed=seed, top_k=0, top_p=1.0,
                                      num_predict=800, num_ctx=2048),
                       think=think, format=SCHEMA, tools=[ADD], run_tool=add, max_tool_rounds=2)
    events = list(chat.send("How do you feel? Add 2 and 3 first."))
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    for event in calls:
        assert event.name == "add" and not event.failed
        assert event.result == str(event.arguments["a"] + event.arguments["b"])
    answers = [m for m in chat.messages if m.role == "assistant"]
    assert [bool(m.tool_calls) for m in answers[:-1]] == [True] * (len(answers) - 1)
    steps = [step for m in answers for step, happened in
             (("thought", m.thinking), ("call", m.tool_calls)) if happened]
    done = [e for e in events if isinstance(e, DoneEvent)][-1]
    if answers[-1].tool_calls:
        assert len(answers) == 3                        # the rounds ran out
    elif done.done_reason == "stop":
        jsonschema.validate(json.loads(done.text), SCHEMA)
        steps.append("json")
    else:
        assert done.done_reason == "length" and answers[-1].thinking   # num_predict
        steps.append("cut")
    return " ".join(steps)


def test_a_chat_with_thinking_tools_and_a_schema_ends_in_valid_json(qwen3):
    """A random model's choices are noise: the grammar alone keeps each round a call or
    the schema's JSON, whichever branches the draws take; over a few seeds the draws
    take each branch (seeded, so the same ones every run)."""
    thinking = [chat_outcome(qwen3, True, seed) for seed in range(8)]
    assert any(outcome.startswith("thought") and outcome.endswith("json")
               for outcome in thinking), thinking
    plain = [chat_outcome(qwen3, False, seed) for seed in range(6)]
    assert not any("thought" in outcome for outcome in plain), plain
    assert any(outcome.startswith("call") and outcome.endswith("json")
               for outcome in plain), plain
