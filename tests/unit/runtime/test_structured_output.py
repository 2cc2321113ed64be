"""Structured output: a schema enforced while sampling (engine.runtime.constraint).

Every answer must parse and validate (jsonschema), greedy and sampled, on a tiny random
model (whose own choices are noise: the mask alone makes the JSON) and on both demo
models; drafting keeps a greedy answer; the reasons say what the schema removed; the
CLI's --format combines an output mode with a schema."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import numpy as np
import pytest

from engine.chat.answer_format import JSON, check_format, format_text, parse_format
from engine.chat.events import DoneEvent, TokenEvent
from engine.chat.options import Options
from engine.cli.format_option import split_formats
from engine.errors import GenerationError
from engine.runtime.constraint import Constraint
from engine.runtime.drafters import PromptLookup
from engine.runtime.loader import load_model
from engine.runtime.reasons import explain
from engine.runtime.sampler import Sampler, SampleTrace
from engine.runtime.session import LocalSession
from tests.fixtures.synthetic_gguf import TextSpec

ANY_OBJECT = {"type": "object"}
# bounded, so that even a random model's answer ends well within num_predict
BOUNDED = [
    {"type": "object", "properties": {
        "colour": {"enum": ["red", "green", "blue"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 99},
        "ok": {"type": "boolean"}},
     "required": ["colour", "count", "ok"], "additionalProperties": False},
    {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"enum": ["a", "ß", "東京"]}, "minItems": 1,
                 "maxItems": 3},
        "inner": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}},
                  "required": ["name"], "additionalProperties": False}},
     "required": ["tags", "inner"], "additionalProperties": False},
    {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5},
     "minItems": 2, "maxItems": 4},
]
# what a person would ask a real model for
PEOPLE = {"type": "object", "properties": {
    "people": {"type": "array", "maxItems": 3, "items": {
        "type": "object", "properties": {
            "name": {"type": "string"}, "age": {"type": "integer"},
            "height_m": {"type": "number"},
            "role": {"enum": ["engineer", "artist", "doctor", "other"]}},
        "required": ["name", "age", "height_m", "role"], "additionalProperties": False}}},
    "required": ["people"], "additionalProperties": False}
CITY = {"type": "object", "properties": {
    "city": {"type": "string"}, "country": {"type": "string"},
    "population": {"type": "integer", "minimum": 0},
    "landmarks": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
    "greeting": {"type": "string", "description": "hello in the local language"}},
    "required": ["city", "country", "population", "landmarks", "greeting"],
    "additionalProperties": False}


@pytest.fixture(scope="module")
def tiny(synthetic_gguf):
    return load_model(synthetic_gguf("qwen2", TextSpec(vocab=400), seed=5), num_ctx=512)


def answer(chat: LocalSession, prompt: str) -> tuple[str, DoneEvent, list[TokenEvent]]:
    tokens, done = [], None
    for event in chat.send(prompt):
        if isinstance(event, TokenEvent):
            tokens.append(event)
        elif isinstance(event, DoneEvent):
            done = event
    assert done is not None
    return done.text, done, tokens


def valid(text: str, schema) -> object:
    value = json.loads(text)
    jsonschema.validate(value, ANY_OBJECT if schema == JSON else schema)
    return value


@pytest.mark.parametrize("schema", BOUNDED, ids=["enum-int-bool", "nested-unicode", "array"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_random_model_writes_valid_json(tiny, schema, temperature):
    for seed in range(3):
        chat = LocalSession(tiny, Options(temperature=temperature, seed=seed, num_predict=200,
                                         top_k=0, top_p=1.0), format=schema)
        text, done, _ = answer(chat, "Answer in JSON")
        assert done.done_reason == "stop", text
        valid(text, schema)


def test_every_token_of_a_constrained_answer_says_what_the_schema_removed(tiny):
    chat = LocalSession(tiny, Options(temperature=0, num_predict=200), format=BOUNDED[0])
    _, _, tokens = answer(chat, "Answer in JSON")
    for token in tokens:
        reasons = token.reasons
        assert reasons.schema_removed is not None and reasons.schema_removed > 0
        raw_top = int(np.argmax([c.raw_logit for c in reasons.candidates]))
        forced = reasons.candidates[raw_top].id != reasons.chosen
        assert reasons.schema_forced == forced  # greedy: a lost top-1 can only be the schema's
        assert "the schema removed" in reasons.summary
        assert ("forced by the schema" in reasons.summary) == forced
        assert reasons.to_json()["schema"]["forced"] == forced
    assert any(t.reasons.schema_forced for t in tokens), "a random model is never forced?"
    plain = LocalSession(tiny, Options(temperature=0, num_predict=4))
    _, _, tokens = answer(plain, "Hi")
    assert all(t.reasons.schema_removed is None for t in tokens)
    assert "schema" not in tokens[0].reasons.to_json()


def test_the_mask_comes_before_the_samplers_transforms(tiny):
    """top-k 1 at temperature 1 keeps the best allowed token, never a disallowed one."""
    tokenizer = tiny.tokenizer
    constraint = Constraint(tokenizer, BOUNDED[0])
    allowed = constraint.allowed()
    logits = np.zeros(tokenizer.vocab_size, dtype=np.float32)
    logits[~allowed] = 50.0  # every disallowed token far ahead
    favourite = int(np.flatnonzero(allowed)[-1])
    logits[favourite] = 10.0
    trace = SampleTrace()
    token = Sampler(Options(temperature=1.0, top_k=1, seed=0), constraint).sample(
        logits, [], trace)
    assert token == favourite
    reasons = explain(trace, Options(temperature=1.0, top_k=1), tokenizer.id_to_piece)
    assert reasons.schema_forced
    assert reasons.schema_removed == int((~allowed).sum())


def test_stop_tokens_are_allowed_exactly_when_the_answer_is_complete(tiny):
    tokenizer = tiny.tokenizer
    constraint = Constraint(tokenizer, {"enum": ["yes"]})
    stops = sorted(tokenizer.stop_ids)
    path = tokenizer.encode('"yes"')
    for token in path:
        allowed = constraint.allowed()
        assert not allowed[stops].any() and not constraint.done
        assert allowed[token]
        constraint.advance(token)
    assert constraint.done and constraint.allowed()[stops].all()


@pytest.mark.parametrize("text, problem", [
    ("{not json", "not valid JSON"),
    ('["a list"]', r"JSON schema \(an object\)"),
    ('{"type": "object", "properties": {"a": {"type": "strange"}}}', "cannot be enforced"),
])
def test_a_bad_schema_says_what_is_wrong(text, problem):
    with pytest.raises(GenerationError, match=problem):
        parse_format(text)


def test_format_text_round_trips():
    assert parse_format(format_text(JSON)) == JSON
    assert parse_format(format_text(PEOPLE)) == PEOPLE
    assert format_text(None) == ""
    check_format(CITY)


@pytest.mark.slow  # the demo models, asked for by name
@pytest.mark.parametrize("size", ["05b", "15b"])
def test_demo_models_answer_valid_json_greedy_and_sampled(request, size):
    model = load_model(request.getfixturevalue(f"demo_{size}"), num_ctx=2048)
    cases = [
        (JSON, "Describe a cat as a JSON object."),
        (PEOPLE, "Invent two people and give their name, age, height in metres and role."),
        (CITY, "Tell me about Tokyo."),
        (BOUNDED[1], "Give a few tags and a short name."),
    ]
    for schema, prompt in cases:
        # sampled with Ollama's long-time default repeat penalty: without one the 0.5B model
        # can loop on a key until num_predict cuts the JSON (a model loop, not the mask's)
        for options in (Options(temperature=0, num_predict=400),
                        Options(temperature=0.8, seed=7, num_predict=400, repeat_penalty=1.1)):
            chat = LocalSession(model, options, format=schema)
            text, done, _ = answer(chat, prompt)
            assert done.done_reason == "stop", (schema, text)
            valid(text, schema)


def test_drafting_keeps_a_constrained_greedy_answer(demo_05b):
    """Prompt lookup drafts tokens the schema may refuse; each verify row is masked after
    exactly the tokens before it, so the answer equals plain decoding's."""
    model = load_model(demo_05b, num_ctx=2048)
    prompt = ('Return this record as JSON: name "Ada Lovelace", age 36, height_m 1.65, role '
              'other; then name "Alan Turing", age 41, height_m 1.78, role engineer.')
    options = Options(temperature=0, num_predict=300)
    plain_text, _, plain = answer(LocalSession(model, options, format=PEOPLE), prompt)
    drafted_text, done, drafted = answer(
        LocalSession(model, options, format=PEOPLE, drafter=PromptLookup()), prompt)
    assert done.draft_accepted > 0, "nothing was drafted: the test checks nothing"
    assert [t.id for t in drafted] == [t.id for t in plain]
    assert valid(drafted_text, PEOPLE) == valid(plain_text, PEOPLE)


@pytest.mark.parametrize("schema", BOUNDED, ids=["enum-int-bool", "nested-unicode", "array"])
def test_drafting_under_the_mask_is_exact_on_a_tiny_model(tiny, schema):
    """Prompt lookup copies JSON from the prompt: keys the schema forces are kept, values it
    does not choose are rejected, and the greedy answer is plain decoding's, token for
    token; sampled with drafts, every answer still validates."""
    prompt = ('Return {"colour": "red", "count": 12, "ok": true} and {"colour": "blue", '
              '"count": 3, "ok": false} as JSON')
    options = Options(temperature=0, num_predict=200)
    _, _, plain = answer(LocalSession(tiny, options, format=schema), prompt)
    text, done, drafted = answer(
        LocalSession(tiny, options, format=schema, drafter=PromptLookup()), prompt)
    assert 0 < done.draft_accepted < done.draft_count, "drafts all kept or none: no test"
    assert [t.id for t in drafted] == [t.id for t in plain]
    valid(text, schema)
    for seed in range(3):
        sampled = LocalSession(tiny, Options(temperature=1.0, seed=seed, num_predict=200,
                                            top_k=0, top_p=1.0),
                              format=schema, drafter=PromptLookup())
        text, done, _ = answer(sampled, prompt)
        assert done.done_reason == "stop", text
        valid(text, schema)


def test_format_flag_combines_an_output_mode_and_a_schema(tmp_path):
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(CITY))
    assert split_formats([]) == ("text", None)
    assert split_formats(["jsonl"]) == ("jsonl", None)
    assert split_formats(["json"]) == ("text", JSON)
    assert split_formats(["jsonl", str(schema_file)]) == ("jsonl", CITY)
    assert split_formats(['{"type": "array"}', "text"]) == ("text", {"type": "array"})
    for bad, problem in ((["text", "jsonl"], "both choose the output"),
                         (["json", "json"], "already has a format"),
                         ([str(tmp_path / "missing.json")], "not text, jsonl, json")):
        with pytest.raises(GenerationError, match=problem):
            split_formats(bad)


def test_cli_prints_a_valid_answer_and_per_token_lines(demo_05b, tmp_path):
    schema_file = tmp_path / "city.json"
    schema_file.write_text(json.dumps(CITY))
    base = [sys.executable, "-m", "engine.cli", "run", str(demo_05b), "Tell me about Lisbon.",
            "--temperature", "0", "--num-predict", "400"]
    text = subprocess.run([*base, "--format", str(schema_file)], capture_output=True,
                          text=True, timeout=300, check=True).stdout
    expected = valid(text, CITY)
    lines = subprocess.run([*base, "--format", "jsonl", "--format", str(schema_file)],
                           capture_output=True, text=True, timeout=300, check=True).stdout
    records = [json.loads(line) for line in lines.splitlines()]
    assert records[-1]["done"] is True and records[-1]["done_reason"] == "stop"
    ids = [r["id"] for r in records[:-1]]
    tokenizer = load_model(demo_05b, num_ctx=512).tokenizer
    assert valid(tokenizer.decode(ids), CITY) == expected
    bad = subprocess.run([*base, "--format", "{oops"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 1 and "not valid JSON" in bad.stderr and "fix the schema" in bad.stderr


def test_remote_engines_get_the_format_as_their_api_spells_it():
    from engine.remote import ollama_api, openai_api

    messages = [{"role": "user", "content": "Hi"}]
    assert "format" not in ollama_api.chat_body("m", messages, Options(), 0)
    assert ollama_api.chat_body("m", messages, Options(), 0, answer_format=JSON)["format"] == JSON
    assert ollama_api.chat_body("m", messages, Options(), 0,
                                answer_format=CITY)["format"] == CITY
    assert "response_format" not in openai_api.chat_body("m", messages, Options(), 0)
    assert openai_api.chat_body("m", messages, Options(), 0, answer_format=JSON)[
        "response_format"] == {"type": "json_object"}
    body = openai_api.chat_body("m", messages, Options(), 0, answer_format=CITY)
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "answer", "schema": CITY, "strict": True}}
    # a server that refused json_schema gets the older form once more (the real one:
    # tests/integration/test_remote_llama_server.py)
    refusal = "answered /v1/chat/completions with 500: 'input': 'json_schema'"
    again = openai_api.schema_beside_json_object(body, refusal)
    assert again["response_format"] == {"type": "json_object", "schema": CITY}
    assert {k: v for k, v in again.items() if k != "response_format"} == {
        k: v for k, v in body.items() if k != "response_format"}
    assert openai_api.schema_beside_json_object(body, "answered with 500: out of memory") is None
    json_body = openai_api.chat_body("m", messages, Options(), 0, answer_format=JSON)
    assert openai_api.schema_beside_json_object(json_body, refusal) is None


def test_a_prompt_that_opens_thinking_gets_the_schema_after_think(tiny):
    tokenizer = tiny.tokenizer
    stops = sorted(tokenizer.stop_ids)
    constraint = Constraint(tokenizer, BOUNDED[0], after="</think>")
    logits = np.ones(tokenizer.vocab_size, dtype=np.float32)
    for token in tokenizer.encode("Let me think. </think>"):
        masked, allowed = constraint.mask(logits)
        assert allowed is None and not constraint.done
        assert np.isneginf(masked[stops]).all() and np.isfinite(np.delete(masked, stops)).all()
        constraint.advance(token)
    masked, allowed = constraint.mask(logits)
    assert allowed is not None and allowed.sum() < 20         # now only JSON's first tokens
    chat = LocalSession(tiny, Options(temperature=0), format=BOUNDED[0])
    thinking = tiny.tokenize_raw("<|im_start|>assistant\n<think>\n")
    assert chat._constraint(thinking)._waiting == b"</think>"
    assert chat._constraint(tiny.tokenize_raw("<|im_start|>assistant\n"))._waiting is None


def test_interactive_set_format_and_noformat(capsys, tmp_path):
    from types import SimpleNamespace

    from engine.cli.run_command import _command

    chat = SimpleNamespace(format=None)
    _command(chat, "/set format json", {})
    assert chat.format == JSON and "Set format." in capsys.readouterr().out
    (tmp_path / "s.json").write_text(json.dumps(CITY))
    _command(chat, f"/set format {tmp_path / 's.json'}", {})
    assert chat.format == CITY
    _command(chat, '/set format {"type": "nope"}', {})
    assert chat.format == CITY and "cannot be enforced" in capsys.readouterr().out
    _command(chat, "/set format jsonl", {})
    assert chat.format == CITY and "takes json" in capsys.readouterr().out
    _command(chat, "/set noformat", {})
    assert chat.format is None


def test_lantern_run_sends_the_format_to_an_ollama_server(tmp_path, capsys):
    from engine.cli import main
    from tests.fixtures.fake_servers import BLOB, FakeOllama

    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(CITY))
    with FakeOllama({"tiny:latest": {"blob": BLOB, "vision": False}}) as ollama:
        assert main(["run", "--server", ollama.url, "tiny", "Hi", "--format", "jsonl",
                     "--format", str(schema_file)]) == 0
        assert ollama.requests[-1][2]["format"] == CITY
        assert main(["run", "--server", ollama.url, "tiny", "Hi", "--format", "json"]) == 0
        assert ollama.requests[-1][2]["format"] == JSON
    lines = capsys.readouterr().out.splitlines()
    assert json.loads(lines[0])["token"] and json.loads(lines[-2])["done"] is True
