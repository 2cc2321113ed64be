"""Ollama's OpenAI-compatible routes (/v1/chat/completions, /v1/models, /v1/embeddings):
the request read into the same AnswerRequest /api/chat uses, the answer's Ollama chunks
(engine.serve.chunks) turned into OpenAI's chat.completion(.chunk) objects, streamed as
server-sent events. Log-probabilities as OpenAI-compatible servers send them:
``choices[0].logprobs.content[] = {token, logprob, bytes, top_logprobs: [...]}``."""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import time
from dataclasses import dataclass

import numpy as np

from engine.chat.answer_format import JSON
from engine.chat.messages import Message
from engine.chat.tools import call_from_api
from engine.serve.requests import (
    MAX_TOP_LOGPROBS,
    AnswerRequest,
    BadRequest,
    read_format,
    read_tool,
)
from engine.store import LocalModel

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
         "tool": "tool"}
# request field -> Ollama option
OPTION_NAMES = {"temperature": "temperature", "top_p": "top_p", "seed": "seed",
                "frequency_penalty": "frequency_penalty",
                "presence_penalty": "presence_penalty", "max_tokens": "num_predict",
                "max_completion_tokens": "num_predict"}
FINISH = {"stop": "stop", "length": "length"}     # Ollama's done_reason -> finish_reason


def error_body(message: str, status: int) -> dict:
    """OpenAI's error object."""
    kind = {404: "not_found_error"}.get(status, "invalid_request_error" if status < 500
                                        else "api_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


@dataclass
class ChatCompletionRequest:
    answer: AnswerRequest
    include_usage: bool = False


def chat_completion_request(body: object) -> ChatCompletionRequest:
    """/v1/chat/completions' body read and checked."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model is required")
    if (body.get("n") or 1) != 1:
        raise BadRequest("n must be 1: this server gives one choice per request")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise BadRequest("messages must be a non-empty list of {role, content} objects")
    top = body.get("top_logprobs") or 0
    if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= MAX_TOP_LOGPROBS:
        raise BadRequest(f"top_logprobs must be an integer from 0 to {MAX_TOP_LOGPROBS}")
    request = AnswerRequest(model, options=_options(body), stream=body.get("stream") is True,
                            format=_response_format(body.get("response_format")),
                            logprobs=bool(body.get("logprobs")), top_logprobs=top)
    call_names: dict[str, str] = {}     # tool_call_id -> the function it called
    for index, raw in enumerate(raw_messages):
        message, images = _message(raw, index, call_names)
        request.messages.append(message)
        if images:
            request.images[index] = images
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise BadRequest("tools must be a list of function definitions")
    request.tools = [read_tool(raw) for raw in tools]
    stream_options = body.get("stream_options") or {}
    return ChatCompletionRequest(request, isinstance(stream_options, dict)
                                 and stream_options.get("include_usage") is True)


def _options(body: dict) -> dict:
    """Ollama's options for the request; as Ollama's /v1, temperature and top_p default to
    OpenAI's 1.0 rather than the model's own."""
    options = {"temperature": 1.0, "top_p": 1.0}
    options.update({OPTION_NAMES[name]: body[name] for name in OPTION_NAMES
                    if body.get(name) is not None})
    stop = body.get("stop")
    if isinstance(stop, str):
        options["stop"] = [stop]
    elif stop is not None:
        options["stop"] = stop      # Options.resolve checks it is a list of strings
    return options


def _response_format(value: object):
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return JSON
    if kind == "json_schema" and isinstance(value.get("json_schema"), dict):
        return read_format(value["json_schema"].get("schema") or {})
    raise BadRequest('response_format must be {"type": "text"}, {"type": "json_object"} or '
                     '{"type": "json_schema", "json_schema": {"schema": {...}}}')


def _message(raw: object, index: int,
             call_names: dict[str, str]) -> tuple[Message, tuple[bytes, ...]]:
    if not isinstance(raw, dict) or raw.get("role") not in ROLES:
        raise BadRequest(f"messages[{index}] needs a role ({', '.join(ROLES)}) and content")
    role, content, images = ROLES[raw["role"]], raw.get("content") or "", []
    if isinstance(content, list):       # content parts: text and data-URL images
        texts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                texts.append(str(part.get("text") or ""))
            elif kind == "image_url":
                images.append(_data_url(part.get("image_url"), index))
            else:
                raise BadRequest(f"messages[{index}].content has a part of type {kind!r}; "
                                 "text and image_url are understood")
        content = "".join(texts)
    if not isinstance(content, str):
        raise BadRequest(f"messages[{index}].content must be a string or a list of parts")
    calls = []
    for raw_call in raw.get("tool_calls") or ():
        if isinstance(raw_call, dict):
            call = call_from_api(raw_call)
            calls.append(call)
            call_names[str(raw_call.get("id"))] = call.name
    name = call_names.get(str(raw.get("tool_call_id")), "") if role == "tool" else ""
    return Message(role, content, tool_calls=tuple(calls), tool_name=name), tuple(images)


def _data_url(image_url: object, index: int) -> bytes:
    url = image_url.get("url") if isinstance(image_url, dict) else image_url
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        raise BadRequest(f"messages[{index}]: images must be data URLs "
                         "(data:image/png;base64,...); this server fetches nothing")
    try:
        return base64.b64decode(url.split(";base64,", 1)[1], validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(f"messages[{index}]: an image is not valid base64") from None


class CompletionWire:
    """One answer as OpenAI's objects, from the Ollama chunks ChunkWriter builds."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self.model, self.include_usage = model, include_usage
        self.id = "chatcmpl-" + secrets.token_hex(6)
        self.created = int(time.time())
        self._first = True

    def chunk(self, ollama: dict) -> dict:
        """One token's chunk; the first also says the role, as OpenAI's does."""
        message = ollama["message"]
        delta: dict = {"role": "assistant"} if self._first else {}
        self._first = False
        delta["content"] = message["content"]
        if message.get("thinking"):
            delta["reasoning"] = message["thinking"]
        choice: dict = {"index": 0, "delta": delta, "finish_reason": None}
        if "logprobs" in ollama:
            choice["logprobs"] = {"content": [_logprob(e) for e in ollama["logprobs"]]}
        return self._object("chat.completion.chunk", [choice])

    def closing(self, done: dict) -> list[dict]:
        """The finishing chunk (tool calls in its delta), then the usage chunk if asked."""
        calls = done["message"].get("tool_calls") or []
        delta: dict = {"role": "assistant"} if self._first else {}
        if calls:
            delta["tool_calls"] = [_call(call, i) for i, call in enumerate(calls)]
        chunks = [self._object("chat.completion.chunk", [
            {"index": 0, "delta": delta, "finish_reason": _finish(done, calls)}])]
        if self.include_usage:
            chunks.append({**self._object("chat.completion.chunk", []),
                           "usage": _usage(done)})
        return chunks

    def whole(self, answer: dict) -> dict:
        """A non-streamed answer (ChunkWriter.whole's object) as a chat.completion."""
        message = answer["message"]
        calls = message.get("tool_calls") or []
        reply: dict = {"role": "assistant", "content": message["content"]}
        if message.get("thinking"):
            reply["reasoning"] = message["thinking"]
        if calls:
            reply["tool_calls"] = [_call(call, i) for i, call in enumerate(calls)]
        choice: dict = {"index": 0, "message": reply, "finish_reason": _finish(answer, calls)}
        if "logprobs" in answer:
            choice["logprobs"] = {"content": [_logprob(e) for e in answer["logprobs"]]}
        return {**self._object("chat.completion", [choice]), "usage": _usage(answer)}

    def _object(self, kind: str, choices: list[dict]) -> dict:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model,
                "system_fingerprint": "fp_lantern", "choices": choices}


def _logprob(entry: dict) -> dict:
    return {"token": entry["token"], "logprob": entry["logprob"],
            "bytes": list(entry["token"].encode()),
            "top_logprobs": [{"token": t["token"], "logprob": t["logprob"],
                              "bytes": list(t["token"].encode())}
                             for t in entry["top_logprobs"]]}


def _call(call: dict, index: int) -> dict:
    function = call["function"]
    return {"index": index, "id": "call_" + secrets.token_hex(4), "type": "function",
            "function": {"name": function["name"],
                         "arguments": json.dumps(function["arguments"], ensure_ascii=False)}}


def _finish(done: dict, calls: list) -> str:
    return "tool_calls" if calls else FINISH.get(done.get("done_reason"), "stop")


def _usage(done: dict) -> dict:
    prompt, completion = done.get("prompt_eval_count", 0), done.get("eval_count", 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def models_list(models: list[LocalModel]) -> dict:
    """/v1/models: the store's models (owned_by: the name's namespace, as Ollama's)."""
    return {"object": "list", "data": [
        {"id": m.name.display, "object": "model", "created": m.modified_ns // 1_000_000_000,
         "owned_by": m.name.namespace} for m in models]}


def embeddings_list(model: str, vectors: list[list[float]], tokens: int,
                    encoding: str) -> dict:
    """/v1/embeddings' answer; ``encoding`` "float" or "base64" (float32 little-endian
    bytes, which the openai client asks for by default)."""
    def encoded(vector: list[float]) -> list[float] | str:
        if encoding == "base64":
            return base64.b64encode(np.asarray(vector, "<f4").tobytes()).decode()
        return vector

    return {"object": "list", "model": model,
            "data": [{"object": "embedding", "index": i, "embedding": encoded(v)}
                     for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
