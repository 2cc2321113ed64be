"""One conversation out of History as Markdown (to read) or JSON (to keep, with thinking
and per-token log-probabilities), and a JSON export back in as a new conversation.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from app.conversations.history import Conversation, History, StoredMessage
from engine.errors import LanternError

FORMAT = "lantern-conversation"
VERSION = 1
ROLES = ("system", "user", "assistant")


class NotAConversation(LanternError):
    """A file that is not a conversation exported by Lantern."""


def to_markdown(conversation: Conversation, messages: list[StoredMessage]) -> str:
    date = time.strftime("%Y-%m-%d %H:%M", time.localtime(conversation.created
                                                        or conversation.updated))
    lines = [f"# {conversation.title}", "", f"*{conversation.model} · {date}*", ""]
    if conversation.system:
        lines += [f"**System:** {conversation.system}", ""]
    if conversation.options:
        options = ", ".join(f"{k} {v}" for k, v in sorted(conversation.options.items()))
        lines += [f"**Options:** {options}", ""]
    for m in messages:
        lines += [f"## {'You' if m.role == 'user' else m.model or conversation.model or m.role}",
                  ""]
        lines += [f"![image]({path})" for path in m.images]
        if m.thinking:
            lines += ["<details><summary>Thinking</summary>", "",
                      closed_fences(m.thinking.strip()), "", "</details>", ""]
        lines += [closed_fences(m.content), ""]
    return "\n".join(lines).rstrip() + "\n"


def closed_fences(text: str) -> str:
    """``text`` with a code block it leaves open closed (an answer cut off mid-code), so
    the next heading of the export is not swallowed by it (CommonMark's fence rules)."""
    fence = ""
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if len(line) - len(stripped) > 3:
            continue
        run = len(stripped) - len(stripped.lstrip(stripped[:1])) if stripped[:1] in "`~" else 0
        if not fence and run >= 3 and not (stripped[0] == "`" and "`" in stripped[run:]):
            fence = stripped[:run]
        elif fence and stripped[:1] == fence[0] and run >= len(fence) \
                and not stripped[run:].strip():
            fence = ""
    return f"{text}\n{fence}" if fence else text


def to_json(conversation: Conversation, messages: list[StoredMessage],
            logprobs: bool = True) -> str:
    data = {
        "format": FORMAT, "version": VERSION,
        "title": conversation.title, "model": conversation.model,
        "created": conversation.created, "updated": conversation.updated,
        "pinned": conversation.pinned, "system": conversation.system,
        "options": conversation.options,
        **({"answer_format": conversation.format} if conversation.format else {}),
        "messages": [_message_json(m, logprobs) for m in messages],
    }
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def _message_json(m: StoredMessage, logprobs: bool) -> dict:
    out: dict = {"role": m.role, "content": m.content}
    if m.images:
        out["images"] = list(m.images)
    if not m.complete:
        out["complete"] = False
    if m.thinking:
        out["thinking"], out["thinking_ms"] = m.thinking, m.thinking_ms
    if m.model:
        out["model"] = m.model
    if m.produced_by:
        out["produced_by"] = m.produced_by
    if logprobs and m.logprobs:
        out["logprobs"] = list(m.logprobs)
    return out


def export(history: History, conversation_id: int, path: Path) -> None:
    """Write one conversation; the format follows the file's suffix (.md or .json)."""
    conversation = history.conversation(conversation_id)
    if conversation is None:
        raise LanternError(f"conversation {conversation_id} no longer exists")
    messages = history.messages(conversation_id)
    text = (to_json(conversation, messages) if path.suffix.lower() == ".json"
            else to_markdown(conversation, messages))
    path.write_text(text, encoding="utf-8")


def import_json(history: History, path: Path) -> Conversation:
    """Add a conversation from a JSON export; the file is checked before anything is
    written, so a bad file adds nothing."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise NotAConversation(f"{path.name} cannot be read as JSON ({error}): choose a "
                           "conversation exported from Lantern as JSON") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise NotAConversation(f"{path.name} is not a Lantern conversation export (no "
                           f"\"format\": \"{FORMAT}\"): export one with Export as JSON")
    messages = [_message(m, i, path.name) for i, m in enumerate(data.get("messages") or [])]
    options = data.get("options") or {}
    if not isinstance(options, dict):
        raise NotAConversation(f"{path.name}: \"options\" must be an object of Ollama options")
    answer_format = data.get("answer_format") or ""
    if not isinstance(answer_format, str):
        raise NotAConversation(f"{path.name}: \"answer_format\" must be \"json\" or a JSON "
                               "schema's text")
    conversation = history.create(str(data.get("title") or "Imported chat"),
                                  str(data.get("model") or ""), str(data.get("system") or ""),
                                  options, answer_format)
    for message in messages:
        history.add_message(conversation.id, message)
    if data.get("pinned"):
        history.set_pinned(conversation.id, True)
    return history.conversation(conversation.id)


def _message(m: object, index: int, name: str) -> StoredMessage:
    where = f"{name}: message {index + 1}"
    if not isinstance(m, dict) or m.get("role") not in ROLES or \
            not isinstance(m.get("content"), str):
        raise NotAConversation(f"{where} needs a role ({', '.join(ROLES)}) and a text content")
    images, logprobs = m.get("images") or [], m.get("logprobs") or []
    if not isinstance(images, list) or not all(isinstance(i, str) for i in images) or \
            not isinstance(logprobs, list):
        raise NotAConversation(f"{where} has \"images\" or \"logprobs\" that are not lists "
                               "(of image paths, of token records)")
    produced_by = m.get("produced_by") or {}
    if not isinstance(produced_by, dict):
        raise NotAConversation(f"{where} has a \"produced_by\" that is not an object")
    return StoredMessage(0, m["role"], m["content"], tuple(images),
                         bool(m.get("complete", True)), str(m.get("thinking") or ""),
                         int(m.get("thinking_ms") or 0), tuple(logprobs),
                         model=str(m.get("model") or ""), produced_by=produced_by)


def file_name(title: str) -> str:
    """A file name from a conversation title (letters, digits, - and _)."""
    cleaned = "".join(c if c.isalnum() or c in "-_ " else " " for c in title)
    return "-".join(cleaned.split())[:60] or "conversation"
