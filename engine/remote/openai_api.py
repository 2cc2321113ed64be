"""The OpenAI-compatible API (vLLM, SGLang, llama-server, LM Studio, Ollama's /v1):
/v1/models and /v1/chat/completions streamed as server-sent events, with logprobs and
top_logprobs; images go as data URLs inside the message's content parts."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Sequence

from engine.chat.answer_format import JSON, Format
from engine.chat.options import Options
from engine.chat.tools import call_from_api
from engine.errors import RemoteError, StreamCut
from engine.remote.connection import Connection
from engine.remote.http import get_json
from engine.remote.images import RemoteImage
from engine.remote.records import Delta, Finish, RemoteModelInfo, ServerToken, chosen_options

CHAT_PATH = "/v1/chat/completions"
MAX_TOP_LOGPROBS = 20           # the API's own limit
OPENAI_NAMES = {  # Ollama option -> request field (top_k, min_p, repeat_penalty: the
    # extensions llama-server, vLLM and SGLang accept; others ignore what they lack)
    "temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
    "repeat_penalty": "repeat_penalty", "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty", "seed": "seed", "num_predict": "max_tokens",
    "stop": "stop",
}  # fmt: skip


def list_models(connection: Connection) -> list[RemoteModelInfo]:
    answer = get_json(connection, "/v1/models")
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise RemoteError(f"{connection.host}'s /v1/models has no model list: is this an "
                          "OpenAI-compatible server?")
    return [RemoteModelInfo(str(m["id"]), details=str(m.get("owned_by") or ""))
            for m in data if isinstance(m, dict) and "id" in m]


def chat_body(model: str, messages: Sequence[dict], options: Options, top_logprobs: int,
              stream: bool = True, answer_format: Format | None = None,
              tools: Sequence[dict] | None = None) -> dict:
    """The request for one answer. messages: {role, content, images: [RemoteImage],
    tool_calls?, tool_name?}; calls get ids call_0, call_1... that their results answer."""
    body: dict = {"model": model, "messages": _with_call_ids([_message(m) for m in messages]),
                  "stream": stream}
    if tools:
        body["tools"] = list(tools)
    for name, value in chosen_options(options).items():
        if name in OPENAI_NAMES:
            body[OPENAI_NAMES[name]] = value
    if options.num_predict <= 0:
        body.pop("max_tokens", None)           # Ollama's -1 / -2: until the end
    if options.seed < 0:
        body.pop("seed", None)
    if top_logprobs > 0:
        body["logprobs"] = True
        body["top_logprobs"] = min(top_logprobs, MAX_TOP_LOGPROBS)
    if stream:
        body["stream_options"] = {"include_usage": True}    # the prompt's token count
    if answer_format == JSON:
        body["response_format"] = {"type": "json_object"}
    elif answer_format is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "answer", "schema": dict(answer_format), "strict": True}}
    return body


def _with_call_ids(messages: list[dict]) -> list[dict]:
    """OpenAI ties each tool result to its call by id; ours are numbered in order."""
    issued, answered = 0, 0
    for message in messages:
        for call in message.get("tool_calls") or ():
            call["id"] = f"call_{issued}"
            issued += 1
        if message["role"] == "tool":
            message["tool_call_id"] = f"call_{min(answered, max(issued - 1, 0))}"
            answered += 1
    return messages


def _message(message: dict) -> dict:
    images: Sequence[RemoteImage] = message.get("images") or ()
    if message.get("tool_calls"):
        return {"role": message["role"], "content": message["content"] or None,
                "tool_calls": [{"type": "function", "function": {
                    "name": call.name, "arguments": json.dumps(call.arguments,
                                                               ensure_ascii=False)}}
                    for call in message["tool_calls"]]}
    if not images:
        return {"role": message["role"], "content": message["content"]}
    parts: list[dict] = [{"type": "text", "text": message["content"]}]
    for image in images:
        url = f"data:{image.mime};base64,{base64.b64encode(image.data).decode()}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": message["role"], "content": parts}


def parse_stream(lines: Iterable[bytes], host: str) -> Iterator[Delta | Finish]:
    """Server-sent events -> Deltas, then one Finish. An answer that ends before the
    server's `[DONE]` (or a finish_reason) raises StreamCut."""
    finish: Finish | None = None
    usage: dict = {}
    calls: dict[int, dict] = {}     # streamed tool calls come in pieces, by index
    for line in lines:
        if not line.startswith(b"data:"):
            continue                               # comments, event names, keep-alives
        payload = line[5:].strip()
        if payload == b"[DONE]":
            break
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise RemoteError(f"{host} sent an event that is not JSON: {payload[:80]!r}") \
                from None
        if "error" in chunk:
            error = chunk["error"]
            said = error.get("message", error) if isinstance(error, dict) else error
            raise RemoteError(f"{host} stopped with an error: {said}")
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            text = delta.get("content") or ""
            for piece in delta.get("tool_calls") or ():
                call = calls.setdefault(int(piece.get("index") or 0),
                                        {"name": "", "arguments": ""})
                function = piece.get("function") or {}
                call["name"] += function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
            tokens = tuple(server_tokens(choice.get("logprobs")))
            if text or tokens:
                yield Delta(text, tokens)
            if choice.get("finish_reason"):
                finish = Finish(str(choice["finish_reason"]))
    else:
        if finish is None:
            raise StreamCut(f"the answer from {host} was cut off before the server finished it")
    if finish is None:
        finish = Finish("stop")
    if calls:
        yield Delta("", (), tuple(call_from_api(calls[i]) for i in sorted(calls)))
    yield Finish(finish.reason, int(usage.get("prompt_tokens") or 0),
                 int(usage.get("completion_tokens") or 0))


def server_tokens(logprobs: object) -> Iterator[ServerToken]:
    """choices[].logprobs.content[] = {token, logprob, bytes, top_logprobs: [...]}."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    for entry in content or ():
        yield ServerToken(
            piece_of(entry),
            float(entry["logprob"]),
            tuple((piece_of(t), float(t["logprob"])) for t in entry.get("top_logprobs") or ()),
            bytes(entry["bytes"]) if entry.get("bytes") is not None else None,
        )


def piece_of(entry: dict) -> str:
    """A token's text; from its bytes where they are given (a token may be half a
    character, which the `token` string can only show mangled)."""
    raw = entry.get("bytes")
    if not raw:
        return str(entry.get("token", ""))
    from engine.tokenizer.byte_level import shown_bytes  # the tokenizer, only when needed

    return shown_bytes(bytes(raw))


def parse_answer(answer: object, host: str) -> tuple[Delta, Finish]:
    """A non-streamed answer: its text and tokens, and how it finished."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not choices:
        raise RemoteError(f"{host} answered without a choice: {str(answer)[:120]}")
    choice, usage = choices[0], answer.get("usage") or {}
    message = choice.get("message") or {}
    text = message.get("content") or ""
    calls = tuple(call_from_api(call) for call in message.get("tool_calls") or ())
    return (Delta(text, tuple(server_tokens(choice.get("logprobs"))), calls),
            Finish(str(choice.get("finish_reason") or "stop"),
                   int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)))
