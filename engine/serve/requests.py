"""Ollama's /api/chat and /api/generate request bodies read into Lantern's chat records
(shapes of ollama api/types.go: ChatRequest, GenerateRequest). A body that is not what the
API allows is a BadRequest naming the field, which the server answers with 400."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from engine.chat.answer_format import JSON, Format, check_format
from engine.chat.messages import Message
from engine.chat.tools import Tool, call_from_api
from engine.errors import LanternError
from engine.serve.keep_alive import parse_keep_alive

MAX_TOP_LOGPROBS = 20
ROLES = ("system", "user", "assistant", "tool")


class BadRequest(LanternError):
    """A request body the API does not allow."""


@dataclass
class AnswerRequest:
    """What /api/chat and /api/generate ask for, read and checked."""

    model: str
    messages: list[Message] = field(default_factory=list)
    images: dict[int, tuple[bytes, ...]] = field(default_factory=dict)  # message index -> images
    options: dict = field(default_factory=dict)
    stream: bool = True
    format: Format | None = None
    tools: list[Tool] = field(default_factory=list)
    logprobs: bool = False
    top_logprobs: int = 0
    think: bool | str | None = None
    keep_alive: float | None | str = "default"      # "default": the server's own
    system: str | None = None                        # /api/generate's system
    raw: bool = False                                # /api/generate: no template


def chat_request(body: object) -> AnswerRequest:
    """/api/chat: the whole conversation, as the client keeps it."""
    request = _common(body)
    raw_messages = body.get("messages") or []
    if not isinstance(raw_messages, list):
        raise BadRequest("messages must be a list of {role, content} objects")
    for index, raw in enumerate(raw_messages):
        request.messages.append(_message(raw, index))
        if raw.get("images"):
            request.images[index] = _images(raw["images"])
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise BadRequest("tools must be a list of function definitions")
    request.tools = [read_tool(raw) for raw in tools]
    return request


def generate_request(body: object) -> AnswerRequest:
    """/api/generate: one prompt (an empty one only loads the model)."""
    request = _common(body)
    prompt, system = body.get("prompt") or "", body.get("system")
    if not isinstance(prompt, str) or not (system is None or isinstance(system, str)):
        raise BadRequest("prompt and system must be strings")
    request.system, request.raw = system, bool(body.get("raw"))
    if prompt:
        request.messages.append(Message("user", prompt))
        if body.get("images"):
            request.images[0] = _images(body["images"])
    return request


def _common(body: object) -> AnswerRequest:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model is required")
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise BadRequest("options must be an object")
    top = body.get("top_logprobs") or 0
    if not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS:
        raise BadRequest(f"top_logprobs must be an integer from 0 to {MAX_TOP_LOGPROBS}")
    think = body.get("think")
    if think is not None and not isinstance(think, bool) and think not in ("high", "medium",
                                                                           "low"):
        raise BadRequest("think must be true, false, high, medium or low")
    request = AnswerRequest(model, options=dict(options), stream=body.get("stream", True)
                            is not False, format=read_format(body.get("format")),
                            logprobs=bool(body.get("logprobs")) or top > 0, top_logprobs=top,
                            think=think)
    if body.get("keep_alive") is not None:
        request.keep_alive = parse_keep_alive(body["keep_alive"])
    return request


def read_format(value: object) -> Format | None:
    if value in (None, ""):
        return None
    if value == JSON:
        return JSON
    if not isinstance(value, dict):
        raise BadRequest('format must be "json" or a JSON schema object')
    check_format(value)
    return value


def _message(raw: object, index: int) -> Message:
    if not isinstance(raw, dict) or raw.get("role") not in ROLES:
        raise BadRequest(f"messages[{index}] needs a role ({', '.join(ROLES)}) and content")
    content = raw.get("content") or ""
    if not isinstance(content, str):
        raise BadRequest(f"messages[{index}].content must be a string")
    calls = tuple(call_from_api(call) for call in raw.get("tool_calls") or ()
                  if isinstance(call, dict))
    return Message(raw["role"], content, thinking=str(raw.get("thinking") or ""),
                   tool_calls=calls, tool_name=str(raw.get("tool_name") or ""))


def _images(raw: object) -> tuple[bytes, ...]:
    if not isinstance(raw, list):
        raise BadRequest("images must be a list of base64 strings")
    try:
        return tuple(base64.b64decode(image, validate=True) for image in raw)
    except (binascii.Error, TypeError, ValueError):
        raise BadRequest("an image is not valid base64") from None


def read_tool(raw: object) -> Tool:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise BadRequest('each tool must be {"type": "function", "function": {"name": ...}}')
    return Tool(function["name"], str(function.get("description") or ""),
                function.get("parameters") or {"type": "object", "properties": {}})


@dataclass
class EmbedRequest:
    """What /api/embed (and /api/embeddings, /v1/embeddings) ask for, read and checked."""

    model: str
    inputs: list[str]
    truncate: bool = True
    dimensions: int | None = None
    options: dict = field(default_factory=dict)
    keep_alive: float | None | str = "default"


def embed_request(body: object, field_name: str = "input") -> EmbedRequest:
    """/api/embed: ``input`` a string or a list of strings (an empty one only loads the
    model); /api/embeddings reads its one ``prompt`` with ``field_name="prompt"``."""
    common = _common(body)      # model, options, keep_alive, checked as for the answers
    raw = body.get(field_name)
    if isinstance(raw, str):
        inputs = [raw] if raw else []
    elif isinstance(raw, list) and all(isinstance(text, str) for text in raw):
        inputs = list(raw)
    elif raw is None:
        inputs = []
    else:
        raise BadRequest(f"{field_name} must be a string or a list of strings")
    truncate, dimensions = body.get("truncate", True), body.get("dimensions")
    if not isinstance(truncate, bool):
        raise BadRequest("truncate must be true or false")
    if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(
            dimensions, int) or dimensions < 1):
        raise BadRequest("dimensions must be a positive integer")
    return EmbedRequest(common.model, inputs, truncate, dimensions, common.options,
                        common.keep_alive)
