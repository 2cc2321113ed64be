"""Remote engines without a model: Ollama's native API against a loopback server that
answers with the request/response shapes of Ollama's api/types.go (no Ollama server can be
installed on the test machine, so this is NOT a real Ollama), and every failure a user
can meet — server down, wrong URL, 401, model missing, no logprobs, a stream cut
mid-answer, Stop during a slow answer — as one message, never a hang.

The OpenAI-compatible path is proven against a real server in test_remote_llama_server.py.
"""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine.chat.backend import Capability, ChatBackend
from engine.chat.events import DoneEvent, NoticeEvent, TokenEvent
from engine.chat.options import Options
from engine.cli import main
from engine.errors import GenerationError, Remedy, RemoteError, StreamCut
from engine.launch import open_chat
from engine.remote import openai_api
from engine.remote.connection import Connection
from engine.remote.http import detect_kind
from engine.remote.session import list_remote_models, open_remote_model
from tests.fixtures.fake_servers import ANSWER, BLOB, FakeOllama

GREEDY = Options(temperature=0.0)


@pytest.fixture
def ollama():
    with FakeOllama({"tiny:latest": {"blob": BLOB, "vision": False},
                     "eyes:latest": {"blob": "sha256:" + "ef" * 32, "vision": True}}) as fake:
        yield fake


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]        # nothing listens there once the socket closes


def answer(session, text="hi"):
    events = list(session.send(text))
    return [e for e in events if isinstance(e, TokenEvent)], events[-1]


def test_a_server_answer_is_not_continued_and_says_what_to_do(ollama):
    session = open_chat(open_remote_model(Connection(ollama.url), "tiny"), GREEDY)
    answer(session)
    with pytest.raises(GenerationError, match="needs a model on this computer.*Regenerate"):
        session.continue_answer()


def test_ollama_kind_is_detected_and_models_described(ollama):
    connection, models = list_remote_models(Connection(ollama.url))
    assert connection.kind == "ollama"
    by_name = {m.name: m for m in models}
    assert by_name["tiny:latest"].blob_digest == BLOB
    assert by_name["eyes:latest"].vision and not by_name["tiny:latest"].vision
    assert by_name["tiny:latest"].details == "494M · qwen2 · Q4_K_M"


def test_ollama_chat_streams_the_servers_logprobs(ollama):
    model = open_remote_model(Connection(ollama.url), "tiny")     # ":latest" resolved by show
    session = open_chat(model, GREEDY, system="Be brief.", num_top=3)
    assert isinstance(session, ChatBackend)
    assert session.capabilities == {Capability.LOGPROBS}
    tokens, done = answer(session)
    assert [(t.piece, t.logprob) for t in tokens] == ANSWER
    assert all(t.logit is None and t.id == -1 for t in tokens)     # never invented
    assert [t.piece for t in tokens[0].top] == ["Hello", "alt0", "alt1"]
    assert isinstance(done, DoneEvent) and done.text == "Hello, world!"
    assert (done.prompt_eval_count, done.eval_count, done.eval_duration) == (12, 4, 5_000_000)
    path, headers, body = ollama.requests[-1]
    assert path == "/api/chat" and body["stream"] is True
    assert (body["logprobs"], body["top_logprobs"]) == (True, 3)
    assert body["options"] == {"temperature": 0.0}               # the server keeps the rest
    assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "hi"}]


def test_ollama_regenerate_and_edit_resend_the_conversation(ollama):
    session = open_chat(open_remote_model(Connection(ollama.url), "tiny"), GREEDY)
    answer(session, "first")
    list(session.regenerate())
    assert [m["content"] for m in ollama.requests[-1][2]["messages"]] == ["first"]
    list(session.edit_last_user("changed"))
    assert [m["content"] for m in ollama.requests[-1][2]["messages"]] == ["changed"]
    answer(session, "second")
    assert [m["content"] for m in ollama.requests[-1][2]["messages"]] == [
        "changed", "Hello, world!", "second"]


def test_images_go_as_base64_to_a_vision_model(ollama, tmp_path):
    from PIL import Image

    Image.new("RGB", (40, 30), "red").save(tmp_path / "red.png")
    model = open_remote_model(Connection(ollama.url), "eyes")
    session = open_chat(model, GREEDY)
    assert Capability.IMAGES in session.capabilities
    image = session.prepare_image(str(tmp_path / "red.png"), 1_000_000)
    list(session.send("what colour?", (image,)))
    [message] = ollama.requests[-1][2]["messages"]
    import base64
    import io

    sent = Image.open(io.BytesIO(base64.b64decode(message["images"][0])))
    assert sent.size == (40, 30) and sent.getpixel((0, 0)) == (255, 0, 0)


def test_openai_images_are_data_urls():
    from engine.remote.images import RemoteImage

    body = openai_api.chat_body("m", [{"role": "user", "content": "look",
                                       "images": [RemoteImage("image/png", b"\x89PNG")]}],
                                GREEDY, 0)
    text, image = body["messages"][0]["content"]
    assert text == {"type": "text", "text": "look"}
    assert image["image_url"]["url"] == "data:image/png;base64,iVBORw=="
    assert "logprobs" not in body


def test_server_down_is_a_message():
    connection = Connection(f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(RemoteError, match="cannot reach 127.0.0.1:.*connection refused"):
        list_remote_models(connection)


class NotAnEngine(BaseHTTPRequestHandler):
    """A web server that is not a model server (a wrong URL)."""

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802
        data = b"<html>hello</html>"
        self.send_response(404 if "api" in self.path or "v1" in self.path else 200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_wrong_url_is_a_message():
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotAnEngine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RemoteError, match="answered neither Ollama's /api/tags nor an "
                                              "OpenAI-compatible /v1/models: check the URL"):
            detect_kind(Connection(f"http://127.0.0.1:{server.server_address[1]}"))
    finally:
        server.shutdown()
        server.server_close()


def test_401_names_the_key_and_never_shows_it():
    with FakeOllama(api_key="right-key") as fake:
        with pytest.raises(RemoteError) as caught:
            open_remote_model(Connection(fake.url, "ollama", "wrong-key"), "tiny")
        assert "401" in str(caught.value) and "API key" in str(caught.value)
        assert "wrong-key" not in str(caught.value)
        assert "wrong-key" not in repr(Connection(fake.url, "ollama", "wrong-key"))
        model = open_remote_model(Connection(fake.url, "ollama", "right-key"), "tiny")
        tokens, _ = answer(open_chat(model, GREEDY))
        assert len(tokens) == 4
        assert fake.requests[-1][1]["Authorization"] == "Bearer right-key"


def test_missing_model_is_a_message(ollama):
    with pytest.raises(RemoteError, match="has no model 'nope'.*ollama pull"):
        open_remote_model(Connection(ollama.url), "nope")


def test_server_without_logprobs_says_so(ollama):
    ollama.mode = "no_logprobs"
    session = open_chat(open_remote_model(Connection(ollama.url), "tiny"), GREEDY)
    events = list(session.send("hi"))
    notices = [e.message for e in events if isinstance(e, NoticeEvent)]
    assert len(notices) == 1 and "sent no log-probabilities" in notices[0]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert "".join(t.text for t in tokens) == "Hello, world!"
    assert all(t.top == () for t in tokens)


def test_stream_cut_keeps_the_partial_answer(ollama):
    ollama.mode = "cut"
    session = open_chat(open_remote_model(Connection(ollama.url), "tiny"), GREEDY)
    seen = []
    with pytest.raises(StreamCut, match="cut off after 2 token.*partial answer is kept"):
        for event in session.send("hi"):
            seen.append(event)
    assert "".join(e.text for e in seen) == "Hello,"
    assert session.messages[-1].role == "assistant" and session.messages[-1].content == "Hello,"


def test_openai_stream_cut_before_done_is_detected():
    lines = [b'data: {"choices": [{"delta": {"content": "Hi"}, "finish_reason": null}]}']
    with pytest.raises(StreamCut):
        list(openai_api.parse_stream(lines, "h"))
    finished = list(openai_api.parse_stream(lines + [b"data: [DONE]"], "h"))
    assert finished[-1].reason == "stop"


@pytest.mark.timing     # judged against the server's half second between tokens
def test_stop_closes_a_slow_request(ollama):
    ollama.mode = "slow"                          # half a second per token
    session = open_chat(open_remote_model(Connection(ollama.url), "tiny"), GREEDY)
    events = session.send("hi")
    first = next(events)
    assert isinstance(first, TokenEvent)
    started = time.monotonic()
    threading.Timer(0.1, session.cancel).start()
    rest = list(events)
    assert time.monotonic() - started < 0.45      # not waiting for the next token
    assert rest[-1].done_reason == "cancel"
    assert session.messages[-1].content == "Hello"


def test_plain_http_off_this_host_warns():
    assert Connection("http://127.0.0.1:11434").plain_http_warning is None
    assert Connection("https://gpu.example").plain_http_warning is None
    warning = Connection("http://gpu.example:8000", api_key="k").plain_http_warning
    assert "unencrypted" in warning and "API key" in warning
    with pytest.raises(RemoteError, match="not a server URL"):
        Connection("gpu.example:8000")


def test_cli_warns_about_plain_http(capsys):
    code = main(["list", "--server", f"http://192.0.2.1:{closed_port()}"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("warning: 192.0.2.1:") and "unencrypted" in err
    assert "Error: cannot reach 192.0.2.1" in err


def test_cli_list_and_run_against_ollama(ollama, capsys, monkeypatch):
    monkeypatch.setenv("LANTERN_API_KEY", "secret-key")
    assert main(["list", "--server", ollama.url]) == 0
    out = capsys.readouterr().out
    assert "tiny:latest" in out and f"{ollama.url[7:]} (ollama)" in out
    assert main(["run", "--server", ollama.url, "tiny", "hi", "--format", "jsonl",
                 "--top-logprobs", "2", "--temperature", "0"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(t["token"], t["logprob"]) for t in lines[:-1]] == ANSWER
    assert lines[0]["id"] is None and lines[0]["top_logprobs"][1] == {
        "id": None, "token": "alt0", "logprob": -1.05, "logit": None}
    assert lines[-1]["done"] is True and lines[-1]["eval_count"] == 4
    assert ollama.requests[-1][1]["Authorization"] == "Bearer secret-key"


def test_crosscheck_needs_the_same_weights_blob(tmp_path, ollama):
    import hashlib

    from engine.remote.crosscheck import same_weights

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF weights")
    digest = "sha256:" + hashlib.sha256(b"GGUF weights").hexdigest()
    with FakeOllama({"same:latest": {"blob": digest, "vision": False}}) as fake:
        remote = open_remote_model(Connection(fake.url), "same")
        assert same_weights(gguf, "mine", remote, False).startswith("same weights blob sha256:")
    other = open_remote_model(Connection(ollama.url), "tiny")
    with pytest.raises(RemoteError, match="is not the same weights as mine"):
        same_weights(gguf, "mine", other, True)        # a digest beats an assertion
    no_digest = other.__class__(other.connection, other.info.__class__("x"))
    with pytest.raises(RemoteError, match="assert that they are mine's") as caught:
        same_weights(gguf, "mine", no_digest, False)
    assert caught.value.remedy is Remedy.SAME_WEIGHTS
    assert "asserted by the user" in same_weights(gguf, "mine", no_digest, True)


def test_ollama_thinking_arrives_as_the_thinking_section():
    from engine.remote.ollama_api import parse_stream
    from engine.remote.session import _token_events

    lines = [json.dumps(chunk).encode() for chunk in (
        {"message": {"role": "assistant", "content": "", "thinking": "Let me see."},
         "logprobs": [{"token": "Let me see.", "logprob": -0.5, "top_logprobs": []}]},
        {"message": {"role": "assistant", "content": "Four."},
         "logprobs": [{"token": "Four.", "logprob": -0.1, "top_logprobs": []}]},
        {"message": {"role": "assistant", "content": ""}, "done": True, "eval_count": 2})]
    deltas = list(parse_stream(lines, "h"))
    assert [(d.text, d.thinking) for d in deltas[:2]] == [("", "Let me see."), ("Four.", "")]
    events = [e for d in deltas[:2] for e in _token_events(d, 0, 5)]
    assert [(e["text"], e["thinking_text"], e["thinking"]) for e in events] == \
        [("", "Let me see.", True), ("Four.", "", False)]
