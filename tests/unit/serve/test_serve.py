"""`lantern serve` on loopback with a tiny synthetic model, driven by engine.remote's own
client: the same greedy tokens as in-process, the model kept loaded between requests and
dropped when its keep-alive ends, Ollama-style errors."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator

import pytest

from engine.catalog.importer import import_gguf
from engine.chat.events import DoneEvent, TokenEvent
from engine.errors import RemoteError
from engine.launch import EngineChoices, load_local, open_chat, options_for
from engine.remote.connection import Connection
from engine.remote.lantern_server import find_server
from engine.remote.session import open_remote_model
from engine.serve.keep_alive import BadKeepAlive, parse_keep_alive
from engine.serve.server import LanternServer
from engine.store import Store
from tests.fixtures.scripted_answers import script_answers
from tests.fixtures.serving import running_server
from tests.fixtures.synthetic_gguf import write_model

GREEDY = {"temperature": 0, "num_predict": 8, "num_ctx": 256}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    root = tmp_path_factory.mktemp("serve")
    store = Store.open(root / "models")
    import_gguf(store, write_model(root / "tiny.gguf", "qwen2", seed=7), "tiny")
    return store


@pytest.fixture
def server(store) -> Iterator[LanternServer]:
    with running_server(store) as server:
        yield server


def post(server: LanternServer, path: str, body: bytes | dict) -> tuple[int, list[dict]]:
    """A raw request (no client in between): the status and the NDJSON or JSON lines."""
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(host, port, timeout=60)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request("POST", path, data, {"Content-Type": "application/json"})
    response = connection.getresponse()
    lines = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    connection.close()
    return response.status, lines


def get(server: LanternServer, path: str) -> dict:
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(host, port, timeout=60)
    connection.request("GET", path)
    answer = json.loads(connection.getresponse().read())
    connection.close()
    return answer


def answer(chat, text: str) -> tuple[list[TokenEvent], DoneEvent]:
    events = list(chat.send(text))
    return ([e for e in events if isinstance(e, TokenEvent)],
            next(e for e in events if isinstance(e, DoneEvent)))


def test_the_server_answers_the_remote_client_with_the_in_process_tokens(store, server):
    local_model = load_local(store.get("tiny"), EngineChoices(), GREEDY["num_ctx"])
    local = open_chat(local_model, options_for(local_model, GREEDY), num_top=3)
    remote_model = open_remote_model(Connection(server.url, "ollama"), "tiny")
    remote = open_chat(remote_model, options_for(remote_model, GREEDY), num_top=3)
    for text in ("Hello there", "And again"):       # the second turn carries the first
        local_tokens, local_done = answer(local, text)
        remote_tokens, remote_done = answer(remote, text)
        assert [t.piece for t in remote_tokens] == [t.piece for t in local_tokens]
        assert remote_done.text == local_done.text and len(local_tokens) == 8
        assert [t.logprob for t in remote_tokens] == pytest.approx(
            [t.logprob for t in local_tokens], abs=1e-4)
        assert [[c.piece for c in t.top] for t in remote_tokens] == \
            [[c.piece for c in t.top] for t in local_tokens]
        assert remote_done.eval_count == 8 and remote_done.prompt_eval_count > 0
    assert remote_model.info.blob_digest == "sha256:" + store.get("tiny").model_path.name[7:]


def test_a_format_reaches_the_model_as_in_process(store, server):
    local_model = load_local(store.get("tiny"), EngineChoices(), GREEDY["num_ctx"])
    local = open_chat(local_model, options_for(local_model, GREEDY))
    remote_model = open_remote_model(Connection(server.url, "ollama"), "tiny")
    remote = open_chat(remote_model, options_for(remote_model, GREEDY))
    local.format = remote.format = "json"
    local_tokens, _ = answer(local, "Some JSON please")
    remote_tokens, _ = answer(remote, "Some JSON please")
    assert [t.piece for t in remote_tokens] == [t.piece for t in local_tokens]
    free, _ = answer(open_chat(local_model, options_for(local_model, GREEDY)),
                     "Some JSON please")
    assert [t.piece for t in free] != [t.piece for t in local_tokens]   # the format mattered


WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def ask_weather(server, stream: bool) -> tuple[str, list[dict]]:
    """The answer's content as the client joins it, and its tool calls."""
    status, lines = post(server, "/api/chat", {
        "model": "tiny", "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": WEATHER, "stream": stream, "options": GREEDY})
    assert status == 200 and lines[-1]["done"]
    return ("".join(line["message"]["content"] for line in lines),
            lines[-1]["message"].get("tool_calls", []))


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(("pieces", "content"), [
    (["```json\n", CALL[:20], CALL[20:], "\n```"], ""),
    ([CALL[:1], CALL[1:]], ""),
    (["Let me check.", "\n<tool", "_call>\n", CALL, "\n</tool_call>"], "Let me check.\n"),
])
def test_a_call_is_sent_in_tool_calls_and_not_in_the_content(server, monkeypatch, stream,
                                                               pieces, content):
    script_answers(monkeypatch, [pieces])
    text, calls = ask_weather(server, stream)
    assert text == content
    assert calls == [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]


@pytest.mark.parametrize("stream", [True, False])
def test_a_prose_answer_that_mentions_json_is_all_content(server, monkeypatch, stream):
    prose = ['It is sunny. A call looks like ', CALL, ' in JSON.']
    script_answers(monkeypatch, [prose])
    assert ask_weather(server, stream) == ("".join(prose), [])


def test_a_second_request_reuses_the_loaded_model(server):
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}],
            "options": GREEDY, "stream": False}
    first = post(server, "/api/chat", body)[1][0]
    second = post(server, "/api/chat", body)[1][0]
    assert first["load_duration"] > 0 and second["load_duration"] == 0
    assert first["message"]["content"] == second["message"]["content"]
    ps = get(server, "/api/ps")
    assert ps["lantern"]["loads"] == 1 and server.keeper.loads == 1
    assert [m["name"] for m in ps["models"]] == ["tiny:latest"]
    assert ps["models"][0]["context_length"] == GREEDY["num_ctx"]
    other_ctx = {**body, "options": {**GREEDY, "num_ctx": 128}}
    assert post(server, "/api/chat", other_ctx)[1][0]["load_duration"] > 0   # reloaded
    assert server.keeper.loads == 2


def test_keep_alive_zero_unloads_after_the_answer_and_a_timer_unloads_later(server):
    body = {"model": "tiny", "prompt": "Hi", "options": GREEDY, "keep_alive": 0}
    status, lines = post(server, "/api/generate", body)
    assert status == 200 and lines[-1]["done"] and "".join(c["response"] for c in lines)
    assert get(server, "/api/ps")["models"] == []
    post(server, "/api/generate", {**body, "keep_alive": "50ms"})
    deadline = time.monotonic() + 30           # a wait for the timer, not a timing check
    while get(server, "/api/ps")["models"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert get(server, "/api/ps")["models"] == [] and server.keeper.loads == 2
    loaded = post(server, "/api/generate", {"model": "tiny", "keep_alive": -1})[1]
    assert loaded[0]["done_reason"] == "load"
    assert get(server, "/api/ps")["models"][0]["expires_at"] is None     # forever
    unloaded = post(server, "/api/generate", {"model": "tiny", "keep_alive": 0})[1]
    assert unloaded[0]["done_reason"] == "unload" and get(server, "/api/ps")["models"] == []


def test_streamed_chunks_carry_ollamas_logprobs_and_the_done_counts(server):
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}],
            "options": GREEDY, "logprobs": True, "top_logprobs": 2}
    status, lines = post(server, "/api/chat", body)
    tokens, done = lines[:-1], lines[-1]
    assert status == 200 and len(tokens) == 8 and done["done"] and "logprobs" not in done
    assert all(len(c["logprobs"]) == 1 and len(c["logprobs"][0]["top_logprobs"]) == 2
               for c in tokens)
    assert done["eval_count"] == 8 and done["done_reason"] == "length"
    whole = post(server, "/api/chat", {**body, "stream": False})[1][0]
    assert whole["message"]["content"] == "".join(c["message"]["content"] for c in tokens)
    assert [e["token"] for e in whole["logprobs"]] == \
        [c["logprobs"][0]["token"] for c in tokens]


def test_errors_are_ollama_style(server):
    status, lines = post(server, "/api/chat", b"{not json")
    assert status == 400 and "not valid JSON" in lines[0]["error"]
    status, lines = post(server, "/api/chat", {"model": "nope", "messages": []})
    assert status == 404 and "nope" in lines[0]["error"]
    status, lines = post(server, "/api/chat", {"model": "tiny", "top_logprobs": 99})
    assert status == 400 and "top_logprobs" in lines[0]["error"]
    status, lines = post(server, "/api/chat", {"model": "tiny", "options": {"bogus": 1},
                                               "messages": [{"role": "user", "content": "x"}]})
    assert status == 400 and "bogus" in lines[0]["error"]
    status, lines = post(server, "/api/generate", {"model": "tiny", "keep_alive": "soon"})
    assert status == 400 and "keep_alive" in lines[0]["error"]
    assert post(server, "/api/nothing", {})[0] == 404
    status, lines = post(server, "/api/chat", {"model": "tiny", "messages": [
        {"role": "user", "content": "What is this?", "images": ["aGk="]}]})
    assert status == 400 and "has no vision" in lines[0]["error"]
    status, lines = post(server, "/api/chat", {"model": "tiny", "messages": [
        {"role": "user", "content": "x", "images": ["not base64!"]}]})
    assert status == 400 and "base64" in lines[0]["error"]
    with pytest.raises(RemoteError, match="no model 'nope'"):
        open_remote_model(Connection(server.url, "ollama"), "nope")


def test_find_server_knows_a_lantern_server_of_this_store_only(store, server, tmp_path):
    assert find_server(server.url, store.root) is not None
    assert find_server(server.url, tmp_path) is None                  # another store
    assert find_server("http://127.0.0.1:9", store.root) is None      # nothing listens


def test_keep_alive_values_read_as_ollama_reads_them():
    assert parse_keep_alive("5m") == 300 and parse_keep_alive("1h30m") == 5400
    assert parse_keep_alive(10) == 10 and parse_keep_alive("2.5") == 2.5
    assert parse_keep_alive("0") == 0 and parse_keep_alive(-1) is None
    assert parse_keep_alive("-1m") is None and parse_keep_alive("250ms") == 0.25
    for bad in ("soon", "5 m", True, "m5"):
        with pytest.raises(BadKeepAlive):
            parse_keep_alive(bad)
