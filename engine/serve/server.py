"""The HTTP side of `lantern serve`: the standard library's ThreadingHTTPServer answering
the part of Ollama's API that engine.remote's client speaks (/api/tags, /api/show,
/api/chat, /api/generate, plus /api/ps and /api/version), its embeddings (/api/embed,
/api/embeddings) and its OpenAI-compatible routes (/v1/models, /v1/chat/completions,
/v1/embeddings: openai_compat.py). Answers stream as NDJSON (/v1: server-sent events);
errors are Ollama's ``{"error": "..."}`` (/v1: OpenAI's error object) with a 4xx/5xx
status, or, once an answer has begun streaming, as its last line. Requests on the model
run one at a time (one KV cache); listing and describing never wait for them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from engine import __version__
from engine.catalog.describe import details, show_info, tags_entry
from engine.chat.events import Event
from engine.chat.messages import Message
from engine.chat.options import Options
from engine.errors import GenerationError, ImageError, InvalidName, LanternError, ModelNotFound
from engine.launch import EngineChoices, open_chat, speculate
from engine.runtime.embed import embed_text, unit_length
from engine.runtime.loaded_model import LoadedModel
from engine.runtime.session import LocalSession
from engine.serve.chunks import ChunkWriter
from engine.serve.keep_alive import DEFAULT_KEEP_ALIVE_S, BadKeepAlive, ModelKeeper
from engine.serve.openai_compat import (
    CompletionWire,
    chat_completion_request,
    embeddings_list,
    error_body,
    models_list,
)
from engine.serve.requests import (
    AnswerRequest,
    BadRequest,
    EmbedRequest,
    chat_request,
    embed_request,
    generate_request,
)
from engine.store import Store
from engine.vision.preprocess import preprocess

CLIENT_ERRORS = (BadRequest, BadKeepAlive, GenerationError, ImageError, InvalidName)
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class LanternServer(ThreadingHTTPServer):
    """One store, one keeper of the loaded model."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], store: Store, choices: EngineChoices,
                 keep_alive: float | None = DEFAULT_KEEP_ALIVE_S) -> None:
        super().__init__(address, Handler)
        self.store, self.keeper = store, ModelKeeper(choices, keep_alive)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 as Ollama answers: JSON with a length, streams chunked."""

    server: LanternServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:   # noqa: N802 (the standard library's name)
        routes = {"/api/tags": self._tags, "/api/ps": self._ps, "/api/version": self._version,
                  "/v1/models": self._models, "/": lambda: self._text("Lantern is running")}
        self._route(routes, None)

    def do_HEAD(self) -> None:  # noqa: N802
        self._text("")

    def do_POST(self) -> None:  # noqa: N802
        routes = {"/api/show": self._show, "/api/chat": self._chat,
                  "/api/generate": self._generate, "/api/embed": self._embed,
                  "/api/embeddings": self._embeddings,
                  "/v1/chat/completions": self._chat_completions,
                  "/v1/embeddings": self._openai_embeddings}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""    # read whatever the route
        self._route(routes, lambda: _json_body(raw))

    # -- routing and errors -------------------------------------------------------------------

    def _route(self, routes: dict[str, Callable], read_body: Callable | None) -> None:
        handler = routes.get(self.path.split("?")[0].rstrip("/") or "/")
        if handler is None:
            self._error(404, f"{self.command} {self.path} is not part of this API")
            return
        try:
            if read_body is None:
                handler()
            else:
                handler(read_body())
        except GONE:
            return
        except ModelNotFound as error:
            self._error(404, str(error))
        except CLIENT_ERRORS as error:
            self._error(400, str(error))
        except LanternError as error:
            self._error(500, str(error))

    @property
    def _openai(self) -> bool:
        """An OpenAI-compatible route: its errors and streams take OpenAI's shapes."""
        return self.path.startswith("/v1/")

    def _error(self, status: int, message: str) -> None:
        self._json(status, error_body(message, status) if self._openai else {"error": message})

    def _json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _text(self, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    # -- describing -----------------------------------------------------------------------

    def _tags(self) -> None:
        self._json(200, {"models": [tags_entry(m) for m in self.server.store.list()]})

    def _show(self, body: object) -> None:
        name = body.get("model") or body.get("name") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            raise BadRequest("model is required")
        self._json(200, show_info(self.server.store.get(name)))

    def _version(self) -> None:
        """Ollama's version answer; the "lantern" part tells `lantern run` whose store this
        server serves."""
        self._json(200, {"version": __version__,
                         "lantern": {"models_dir": str(self.server.store.root)}})

    def _models(self) -> None:
        self._json(200, models_list(self.server.store.list()))

    def _ps(self) -> None:
        keeper = self.server.keeper
        resident = keeper.resident
        models = []
        if resident is not None:
            source = resident.source
            expires = (None if resident.expires_at is None else
                       datetime.fromtimestamp(resident.expires_at, UTC).isoformat())
            models.append({"name": source.name.display, "model": source.name.display,
                           "size": source.size, "digest": source.digest,
                           "details": details(source), "expires_at": expires,
                           "size_vram": 0, "context_length": resident.key[1]})
        self._json(200, {"models": models, "lantern": {"loads": keeper.loads}})

    # -- answering ------------------------------------------------------------------------

    def _chat(self, body: object) -> None:
        self._answer(chat_request(body), chat=True)

    def _generate(self, body: object) -> None:
        self._answer(generate_request(body), chat=False)

    def _chat_completions(self, body: object) -> None:
        read = chat_completion_request(body)
        self._answer(read.answer, chat=True,
                     wire=CompletionWire(read.answer.model, read.include_usage))

    def _answer(self, request: AnswerRequest, chat: bool,
                wire: CompletionWire | None = None) -> None:
        """Answer on the resident model; the answer's last bytes go out once the model is
        released, so a client that has the whole answer sees its keep-alive applied.
        ``wire``: the answer in OpenAI's objects instead of Ollama's."""
        start = time.perf_counter_ns()
        source = self.server.store.get(request.model)
        options = Options.resolve(source.params, request.options)
        writer = ChunkWriter(request.model, chat,
                             request.top_logprobs if request.logprobs else None)
        keeper = self.server.keeper
        if not request.messages and request.keep_alive == 0:
            keeper.unload()
            self._json(200, writer.done(None, 0, time.perf_counter_ns() - start,
                                        reason="unload"))
            return
        with keeper.use(source, options.num_ctx, request.keep_alive) as (model, load_ns):
            if not request.messages:
                loaded = writer.done(None, load_ns, time.perf_counter_ns() - start,
                                     reason="load")
                finish = lambda: self._json(200, loaded)  # noqa: E731
            else:
                session = _session(model, options, request)
                events = (session.raw(request.messages[0].content) if request.raw
                          else session.answer_once())
                finish = self._send_answer(writer, session, events, request.stream, load_ns,
                                           start, wire)
        if finish is not None:
            finish()

    def _send_answer(self, writer: ChunkWriter, session: LocalSession, events: Iterator[Event],
                     stream: bool, load_ns: int, start: int,
                     wire: CompletionWire | None) -> Callable[[], None] | None:
        """Stream (or gather) the answer; returns its last write, None if the client left."""
        chunks, kept, began = writer.chunks(events), [], False
        try:
            for chunk in chunks:
                if stream:
                    began = began or self._begin_stream()
                    self._line(wire.chunk(chunk) if wire else chunk)
                else:
                    kept.append(chunk)
        except GONE:
            session.cancel()
            chunks.close()
            return None
        except LanternError as error:
            if not began:
                raise
            self._line(error_body(str(error), 500) if wire else {"error": str(error)})
            return self._end_stream
        last = session.messages[-1] if session.messages else None
        calls = last.tool_calls if last is not None and last.role == "assistant" else ()
        done = writer.done(writer.finished, load_ns, time.perf_counter_ns() - start, calls)
        if not stream:
            whole = writer.whole(kept, done)
            return lambda: self._json(200, wire.whole(whole) if wire else whole)
        if not began:
            self._begin_stream()
        for chunk in wire.closing(done) if wire else [done]:
            self._line(chunk)
        return self._end_stream

    def _begin_stream(self) -> bool:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if self._openai
                         else "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        return True

    def _line(self, chunk: dict | str) -> None:
        """One NDJSON line (/v1: one server-sent event) as one HTTP chunk."""
        data = chunk if isinstance(chunk, str) else json.dumps(chunk, ensure_ascii=False)
        framed = f"data: {data}\n\n".encode() if self._openai else data.encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(framed), framed))
        self.wfile.flush()

    def _end_stream(self) -> None:
        if self._openai:
            self._line("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # -- embeddings -----------------------------------------------------------------------

    def _embed(self, body: object) -> None:
        """/api/embed: each input's embedding, scaled to unit length."""
        self._json(200, self._embeddings_of(embed_request(body), unit=True))

    def _embeddings(self, body: object) -> None:
        """/api/embeddings, the older route: one ``prompt``, its embedding as it is."""
        answer = self._embeddings_of(embed_request(body, "prompt"), unit=False)
        self._json(200, {"embedding": (answer["embeddings"] or [[]])[0]})

    def _openai_embeddings(self, body: object) -> None:
        request = embed_request(body)
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise BadRequest('encoding_format must be "float" or "base64"')
        if not request.inputs:
            raise BadRequest("input must be a non-empty string or list of strings")
        answer = self._embeddings_of(request, unit=True)
        self._json(200, embeddings_list(request.model, answer["embeddings"],
                                        answer["prompt_eval_count"], encoding))

    def _embeddings_of(self, request: EmbedRequest, unit: bool) -> dict:
        """Ollama's /api/embed answer for ``request`` on the resident model (no inputs:
        only loads it)."""
        start = time.perf_counter_ns()
        source = self.server.store.get(request.model)
        options = Options.resolve(source.params, request.options)
        vectors, tokens = [], 0
        with self.server.keeper.use(source, options.num_ctx, request.keep_alive) as (
                model, load_ns):
            for text in request.inputs:
                embedding = embed_text(model, text, options.num_ctx, request.truncate)
                vector = (unit_length(embedding.vector, request.dimensions) if unit
                          else embedding.vector)
                vectors.append(vector.tolist())
                tokens += embedding.token_count
        return {"model": request.model, "embeddings": vectors,
                "total_duration": time.perf_counter_ns() - start, "load_duration": load_ns,
                "prompt_eval_count": tokens}


def _json_body(raw: bytes) -> object:
    try:
        return json.loads(raw or b"null")
    except ValueError as error:
        raise BadRequest(f"the request body is not valid JSON ({error})") from None


def _session(model: LoadedModel, options: Options, request: AnswerRequest) -> LocalSession:
    """A session on the resident model for this one request (the decoder's KV cache keeps
    what earlier requests left, so a follow-up turn prefills only its new tokens)."""
    messages = list(request.messages)
    for index, images in request.images.items():
        if not model.has_vision:
            raise ImageError(f"{model.name} has no vision: it cannot read images")
        m = messages[index]
        messages[index] = Message(m.role, m.content, tuple(preprocess(i) for i in images),
                                  m.thinking, m.tool_calls, m.tool_name)
    session = open_chat(model, options, system=request.system, messages=messages,
                        num_top=max(1, request.top_logprobs), think=request.think,
                        answer_format=request.format, tools=request.tools)
    # prompt lookup only: a draft model would be loaded again for every request
    speculate(session, "ngram" if model.row_invariant else "off", None)
    return session


def serve(server: LanternServer) -> None:
    """Answer until Ctrl-C."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.keeper.unload()

