"""Ollama's OpenAI-compatible routes on `lantern serve`, driven by the official ``openai``
client: /v1/models, /v1/chat/completions streamed and not (the same tokens as /api/chat),
sampling fields, stop, seed, usage, logprobs, tool calls, and OpenAI's error shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from engine.catalog.importer import import_gguf
from engine.serve.server import LanternServer
from engine.store import Store
from tests.fixtures.serving import running_server
from tests.fixtures.synthetic_gguf import TextSpec, vocabulary
from tests.unit.serve.test_serve import post

TEMPLATE = (Path(__file__).parents[2] / "data" / "templates" / "qwen3-style.jinja").read_text()
TAGS = ("<think>", "</think>", "<tool_call>", "</tool_call>")
USER_DEFINED = 4    # GGUF token type of Qwen3's tags
DIGIT = {"type": "integer", "minimum": 0, "maximum": 9}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Adds two digits",
    "parameters": {"type": "object", "properties": {"a": DIGIT, "b": DIGIT},
                   "required": ["a", "b"], "additionalProperties": False}}}
SCHEMA = {"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]}},
          "required": ["mood"], "additionalProperties": False}
HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def store(tmp_path_factory, synthetic_gguf) -> Store:
    store = Store.open(tmp_path_factory.mktemp("openai") / "models")
    import_gguf(store, synthetic_gguf("qwen2", seed=7), "tiny")
    vocab = vocabulary(400)
    tokens, types = list(vocab.tokens), list(vocab.token_types)
    for offset, tag in enumerate(TAGS, start=1):    # Qwen3's tags as tokens of their own
        tokens[-offset], types[-offset] = tag, USER_DEFINED
    import_gguf(store, synthetic_gguf("qwen3", TextSpec(vocab=400), seed=7, overrides={
        "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
        "tokenizer.chat_template": TEMPLATE}), "tools", params={"top_k": 0})
    return store


@pytest.fixture(scope="module")
def server(store) -> Iterator[LanternServer]:
    with running_server(store) as server:
        yield server


@pytest.fixture
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def test_models_lists_the_store(client):
    models = client.models.list()
    assert sorted(m.id for m in models.data) == ["tiny:latest", "tools:latest"]
    assert all(m.owned_by == "library" and m.created > 0 for m in models.data)


def test_a_completion_is_the_same_answer_as_api_chat_streamed_or_not(server, client):
    ollama_answer = post(server, "/api/chat", {
        "model": "tiny", "messages": HI, "stream": False, "logprobs": True, "top_logprobs": 2,
        "options": {"temperature": 0, "num_predict": 8}})[1][0]
    whole = client.chat.completions.create(model="tiny", messages=HI, temperature=0,
                                           max_tokens=8, logprobs=True, top_logprobs=2)
    choice = whole.choices[0]
    assert choice.message.content == ollama_answer["message"]["content"]
    assert choice.finish_reason == "length" and whole.object == "chat.completion"
    assert whole.usage.completion_tokens == 8
    # the tokens run, as Ollama's prompt_eval_count counts them: the cache held the rest
    assert whole.usage.prompt_tokens >= 1 and whole.usage.total_tokens == \
        whole.usage.prompt_tokens + 8
    assert [e.token for e in choice.logprobs.content] == \
        [e["token"] for e in ollama_answer["logprobs"]]
    assert [e.logprob for e in choice.logprobs.content] == pytest.approx(
        [e["logprob"] for e in ollama_answer["logprobs"]], abs=1e-4)
    assert all(len(e.top_logprobs) == 2 and bytes(e.bytes).decode() == e.token
               for e in choice.logprobs.content)

    chunks = list(client.chat.completions.create(
        model="tiny", messages=HI, temperature=0, max_completion_tokens=8, logprobs=True,
        top_logprobs=2, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content
    streamed = [e.token for c in chunks if c.choices and c.choices[0].logprobs
                for e in c.choices[0].logprobs.content]
    assert streamed == [e.token for e in choice.logprobs.content]
    finish = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finish[-1] == "length" and set(finish[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 8
    assert len({c.id for c in chunks}) == 1


def test_stop_seed_and_top_p_reach_the_sampler(client):
    greedy = client.chat.completions.create(model="tiny", messages=HI, temperature=0,
                                            max_tokens=8).choices[0].message.content
    stop = greedy[len(greedy) // 2:][:2]
    cut = client.chat.completions.create(model="tiny", messages=HI, temperature=0,
                                         max_tokens=8, stop=[stop]).choices[0]
    assert cut.finish_reason == "stop" and cut.message.content == greedy[:greedy.index(stop)]

    def sampled(seed: int) -> str:
        return client.chat.completions.create(
            model="tiny", messages=HI, temperature=1.5, top_p=1.0, seed=seed,
            max_tokens=8).choices[0].message.content

    assert sampled(5) == sampled(5)
    assert len({sampled(seed) for seed in range(4)}) > 1         # the seed mattered
    # unset, temperature and top_p are OpenAI's 1.0 (as Ollama's /v1), not the model's
    unset = client.chat.completions.create(model="tiny", messages=HI, seed=3, max_tokens=8)
    ones = client.chat.completions.create(model="tiny", messages=HI, seed=3, max_tokens=8,
                                          temperature=1.0, top_p=1.0)
    assert unset.choices[0].message.content == ones.choices[0].message.content


def test_offered_tools_come_back_as_tool_calls(client):
    """A random model's draws decide between a call and the schema's JSON (the grammar
    admits only those); over a few seeds one of them calls the tool."""
    calls = []
    for seed in range(8):
        choice = client.chat.completions.create(
            model="tools", messages=[{"role": "user", "content": "Add 2 and 3."}],
            tools=[ADD], temperature=1.0, seed=seed, max_tokens=300,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "mood", "schema": SCHEMA}}).choices[0]
        if choice.finish_reason == "tool_calls":
            calls = choice.message.tool_calls
            break
    assert calls, "no seed called the tool"
    call = calls[0]
    assert call.type == "function" and call.function.name == "add" and call.id
    arguments = json.loads(call.function.arguments)
    assert set(arguments) == {"a", "b"} and all(0 <= v <= 9 for v in arguments.values())

    # the call and its result go back as OpenAI spells them
    follow = client.chat.completions.create(model="tools", max_tokens=4, temperature=0,
                                            messages=[
        {"role": "user", "content": "Add 2 and 3."},
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "5"}])
    assert follow.choices[0].finish_reason in ("stop", "length")


def test_errors_are_openais_shape(server, client):
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nope", messages=HI)
    assert "nope" in missing.value.body["message"]
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="tiny", messages=HI, temperature=-1)
    assert bad.value.body["type"] == "invalid_request_error"
    assert "temperature" in bad.value.body["message"]
    status, lines = post(server, "/v1/chat/completions", b"{not json")
    assert status == 400 and "not valid JSON" in lines[0]["error"]["message"]
    status, lines = post(server, "/v1/chat/completions", {"model": "tiny", "messages": []})
    assert status == 400 and "messages" in lines[0]["error"]["message"]
    with pytest.raises(openai.BadRequestError, match="n must be 1"):
        client.chat.completions.create(model="tiny", messages=HI, n=2)
    assert client.chat.completions.create(model="tiny", messages=HI, n=None,
                                          max_tokens=1).choices[0].finish_reason == "length"
    status, lines = post(server, "/v1/nothing", {})
    assert status == 404 and lines[0]["error"]["type"] == "not_found_error"
