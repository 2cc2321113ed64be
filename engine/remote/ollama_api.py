"""Ollama's native API (shapes of ollama api/types.go): /api/tags and /api/show describe
the models, /api/chat streams NDJSON; since Ollama 0.12.11 each chunk carries a top-level
`logprobs` list when the request asks for `logprobs` / `top_logprobs`. Images go as base64
in the message's `images`."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator, Sequence

from engine.chat.answer_format import JSON, Format
from engine.chat.options import Options
from engine.chat.tools import call_from_api
from engine.errors import RemoteError, StreamCut
from engine.remote.connection import Connection
from engine.remote.http import get_json, post_json
from engine.remote.images import RemoteImage
from engine.remote.openai_api import server_tokens
from engine.remote.records import Delta, Finish, RemoteModelInfo, chosen_options

CHAT_PATH = "/api/chat"
MAX_TOP_LOGPROBS = 20
FROM_BLOB = re.compile(r"^FROM\s+\S*?(sha256[-:][0-9a-f]{64})\s*$", re.MULTILINE)


def list_models(connection: Connection) -> list[RemoteModelInfo]:
    """/api/tags, each model described further by /api/show (vision, weights digest)."""
    answer = get_json(connection, "/api/tags")
    models = answer.get("models") if isinstance(answer, dict) else None
    if not isinstance(models, list):
        raise RemoteError(f"{connection.host}'s /api/tags has no model list: is this an "
                          "Ollama server?")
    return [describe(connection, str(m.get("name") or m.get("model")))
            for m in models if isinstance(m, dict)]


def describe(connection: Connection, name: str) -> RemoteModelInfo:
    """/api/show: details, capabilities and the FROM line naming the weights blob."""
    try:
        show = post_json(connection, "/api/show", {"model": name})
    except RemoteError as error:
        if "(404)" in str(error):
            raise RemoteError(f"{connection.host} has no model {name!r}: pull it on the server "
                              "(ollama pull) or pick one it lists") from None
        raise
    if not isinstance(show, dict):
        raise RemoteError(f"{connection.host}'s /api/show for {name!r} is not an object")
    details = show.get("details") or {}
    found = FROM_BLOB.search(str(show.get("modelfile") or ""))
    return RemoteModelInfo(
        name,
        details=" · ".join(str(details.get(k)) for k in ("parameter_size", "family",
                                                         "quantization_level") if details.get(k)),
        vision="vision" in (show.get("capabilities") or ()),
        blob_digest=found.group(1).replace("-", ":") if found else None,
    )


def chat_body(model: str, messages: Sequence[dict], options: Options, top_logprobs: int,
              stream: bool = True, answer_format: Format | None = None,
              tools: Sequence[dict] | None = None) -> dict:
    body: dict = {
        "model": model,
        "messages": [_message(m) for m in messages],
        "stream": stream,
        "options": chosen_options(options),
    }
    if top_logprobs > 0:
        body["logprobs"] = True
        body["top_logprobs"] = min(top_logprobs, MAX_TOP_LOGPROBS)
    if tools:
        body["tools"] = list(tools)
    if answer_format is not None:
        body["format"] = answer_format if answer_format == JSON else dict(answer_format)
    return body


def _message(message: dict) -> dict:
    out = {"role": message["role"], "content": message["content"]}
    images: Sequence[RemoteImage] = message.get("images") or ()
    if images:
        out["images"] = [base64.b64encode(image.data).decode() for image in images]
    if message.get("tool_calls"):
        out["tool_calls"] = [call.api() for call in message["tool_calls"]]
    if message.get("tool_name"):
        out["tool_name"] = message["tool_name"]
    return out


def parse_stream(lines: Iterable[bytes], host: str) -> Iterator[Delta | Finish]:
    """NDJSON chunks -> Deltas, then one Finish from the chunk with done=true. An answer
    that ends without it raises StreamCut."""
    for line in lines:
        try:
            chunk = json.loads(line)
        except ValueError:
            raise RemoteError(f"{host} sent a line that is not JSON: {line[:80]!r}") from None
        if "error" in chunk:
            raise RemoteError(f"{host} stopped with an error: {chunk['error']}")
        delta, finish = parse_answer(chunk, host)
        if delta.text or delta.thinking or delta.tokens or delta.tool_calls:
            yield delta
        if finish is not None:
            yield finish
            return
    raise StreamCut(f"the answer from {host} was cut off before the server finished it")


def parse_answer(chunk: dict, host: str) -> tuple[Delta, Finish | None]:
    """One /api/chat object (a streamed chunk or the whole answer): its text and tokens,
    and the Finish when it says done."""
    if not isinstance(chunk, dict):
        raise RemoteError(f"{host} answered with something that is not an object")
    message = chunk.get("message") or {}
    text = message.get("content") or ""
    calls = tuple(call_from_api(call) for call in message.get("tool_calls") or ())
    tokens = tuple(server_tokens({"content": chunk.get("logprobs")}))   # the same entries
    finish = None
    if chunk.get("done"):
        finish = Finish(str(chunk.get("done_reason") or "stop"),
                        int(chunk.get("prompt_eval_count") or 0),
                        int(chunk.get("eval_count") or 0),
                        int(chunk.get("prompt_eval_duration") or 0),
                        int(chunk.get("eval_duration") or 0),
                        int(chunk.get("load_duration") or 0))
    return Delta(text, tokens, calls, str(message.get("thinking") or "")), finish
