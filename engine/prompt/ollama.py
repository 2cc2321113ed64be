"""What Ollama hands a model's Go template, and how (server/prompt.go, server/routes.go
and template/template.go at ollama/ollama fb307609).

- The chat handler prepends the model's system layer when the request's first message
  is not a system message, after placing the model's `messages` layer before the
  request's messages.
- Each image of a message becomes an ``[img-N]`` tag (N counts images across the chat)
  at the front of its content, or in place of a ``[img]`` the user wrote.
- Consecutive messages of one role (tool results excepted) are merged, contents joined
  by a blank line; all system contents joined the same way become ``.System``.
- A template that mentions ``.Messages`` is executed once with System, Messages, Tools,
  Response "", Think, ThinkLevel, IsThinkSet. Any other template is executed once per
  prompt/response pair (legacy path) and finally up to its ``.Response``.

The data types mirror Ollama's template-side structs field for field, so printing a
value (``{{ .Function }}``, ``{{ .Function.Arguments }}``) gives what Ollama prints.
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar

from engine.errors import TemplateError
from engine.prompt.gotemplate import Tree, execute, parse
from engine.prompt.gotemplate.parser import (
    ActionNode,
    BranchNode,
    CommandNode,
    FieldNode,
    ListNode,
    Node,
    PipeNode,
    TemplateNode,
    VariableNode,
)
from engine.prompt.gotemplate.values import format_value, to_json

# ---------------------------------------------------------------- template-side types


class PropertyType(list):
    """A JSON-schema "type": one name or several; JSON is a string when there is one."""

    go_type = "api.PropertyType"

    def go_string(self) -> str:
        if not self:
            return ""
        return self[0] if len(self) == 1 else format_value(list(self))

    def go_json(self) -> str:
        return to_json(self[0]) if len(self) == 1 else to_json(list(self))


class OrderedProperties(dict):
    """Nested tool properties: JSON keeps the order they were written in."""

    go_type = "*api.ToolPropertiesMap"

    def go_json(self) -> str:
        return "{" + ",".join(f"{to_json(k)}:{to_json(v)}" for k, v in self.items()) + "}"


@dataclass(frozen=True)
class ToolProperty:
    AnyOf: list[ToolProperty] = field(default_factory=list, metadata={"json": "anyOf,omitempty"})
    Type: PropertyType = field(default_factory=PropertyType, metadata={"json": "type,omitempty"})
    Items: Any = field(default=None, metadata={"json": "items,omitempty"})
    Description: str = field(default="", metadata={"json": "description,omitempty"})
    Enum: list[Any] = field(default_factory=list, metadata={"json": "enum,omitempty"})
    Properties: OrderedProperties | None = field(default=None,
                                                 metadata={"json": "properties,omitempty"})
    Required: list[str] = field(default_factory=list, metadata={"json": "required,omitempty"})

    go_type: ClassVar[str] = "api.ToolProperty"

    def to_typescript_type(self) -> str:
        if self.AnyOf:
            return " | ".join(p.to_typescript_type() for p in self.AnyOf)
        if not self.Type:
            return "any"
        return " | ".join(_TS_TYPES.get(t, "any") for t in self.Type)


_TS_TYPES = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean",
             "array": "any[]", "object": "Record<string, any>", "null": "null"}


class TemplateProperties(dict):
    """map[string]api.ToolProperty whose String() is its JSON (nil prints "{}")."""

    go_type = "template.templateProperties"

    def __init__(self, items: Mapping[str, ToolProperty] | None):
        super().__init__(items or {})
        self.nil = items is None

    def go_string(self) -> str:
        return "{}" if self.nil else to_json(dict(self))

    def go_json(self) -> str:
        return "null" if self.nil else to_json(dict(self))


@dataclass(frozen=True)
class ToolParameters:
    Type: str = field(default="", metadata={"json": "type"})
    Defs: Any = field(default=None, metadata={"json": "$defs,omitempty"})
    Items: Any = field(default=None, metadata={"json": "items,omitempty"})
    Required: list[str] = field(default_factory=list, metadata={"json": "required,omitempty"})
    Properties: TemplateProperties = field(default_factory=lambda: TemplateProperties(None),
                                           metadata={"json": "properties"})


@dataclass(frozen=True)
class ToolFunction:
    Name: str = field(default="", metadata={"json": "name"})
    Description: str = field(default="", metadata={"json": "description"})
    Parameters: ToolParameters = field(default_factory=ToolParameters,
                                       metadata={"json": "parameters"})


@dataclass(frozen=True)
class Tool:
    Type: str = field(default="", metadata={"json": "type"})
    Items: Any = field(default=None, metadata={"json": "items,omitempty"})
    Function: ToolFunction = field(default_factory=ToolFunction, metadata={"json": "function"})

    def go_string(self) -> str:
        return to_json(self)


class Tools(list):
    """The .Tools slice; String() is its JSON ("null" for the nil slice of no tools)."""

    go_type = "template.templateTools"

    def __init__(self, items: Sequence[Tool] | None = None):
        super().__init__(items or [])
        self.nil = items is None

    def go_string(self) -> str:
        return to_json(self)

    def go_json(self) -> str:
        return "null" if self.nil else "[" + ",".join(to_json(t) for t in self) + "]"


class Arguments(dict):
    """Tool-call arguments (map[string]any); String() is their JSON."""

    go_type = "template.templateArgs"

    def go_string(self) -> str:
        return to_json(dict(self))


@dataclass(frozen=True)
class ToolCallFunction:
    Index: int = 0
    Name: str = ""
    Arguments: Arguments = field(default_factory=Arguments)


@dataclass(frozen=True)
class ToolCall:
    ID: str = ""
    Function: ToolCallFunction = field(default_factory=ToolCallFunction)


@dataclass(frozen=True)
class Message:
    Role: str = ""
    Content: str = ""
    Thinking: str = ""
    Images: list[bytes] = field(default_factory=list)
    ToolCalls: list[ToolCall] = field(default_factory=list)
    ToolName: str = ""
    ToolCallID: str = ""


# ---------------------------------------------------------------- API JSON -> types


def go_json_numbers(value: Any) -> Any:
    """Go decodes JSON numbers into `any` as float64; mirror that for printing/compare."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return [go_json_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: go_json_numbers(v) for k, v in value.items()}
    return value


def _property(raw: Mapping[str, Any]) -> ToolProperty:
    kind = raw.get("type")
    nested = raw.get("properties")
    return ToolProperty(
        AnyOf=[_property(p) for p in raw.get("anyOf") or []],
        Type=PropertyType([kind] if isinstance(kind, str) else list(kind or [])),
        Items=go_json_numbers(raw.get("items")),
        Description=raw.get("description") or "",
        Enum=go_json_numbers(list(raw.get("enum") or [])),
        Properties=None if nested is None else OrderedProperties(
            {k: _property(v) for k, v in nested.items()}),
        Required=list(raw.get("required") or []),
    )


def to_tools(raw_tools: Sequence[Mapping[str, Any]] | None) -> Tools:
    """Ollama API tool definitions -> the .Tools value (a nil slice when absent)."""
    if raw_tools is None:
        return Tools()
    tools = Tools([])
    for raw in raw_tools:
        function = raw.get("function") or {}
        params = function.get("parameters") or {}
        props = params.get("properties")
        tools.append(Tool(
            Type=raw.get("type", ""),
            Items=go_json_numbers(raw.get("items")),
            Function=ToolFunction(
                Name=function.get("name", ""),
                Description=function.get("description", ""),
                Parameters=ToolParameters(
                    Type=params.get("type", ""),
                    Defs=go_json_numbers(params.get("$defs")),
                    Items=go_json_numbers(params.get("items")),
                    Required=list(params.get("required") or []),
                    Properties=TemplateProperties(
                        None if props is None else {k: _property(v) for k, v in props.items()}),
                ),
            ),
        ))
    return tools


def _image_data(image: Any) -> bytes:
    """api.ImageData is []byte; the API carries it base64-encoded."""
    if isinstance(image, bytes):
        return image
    if isinstance(image, str):
        try:
            return base64.b64decode(image, validate=True)
        except binascii.Error:
            return image.encode()
    return b""


def to_message(raw: Mapping[str, Any], content: str | None = None) -> Message:
    """One Ollama API message (role lower-cased as Ollama's decoder does)."""
    calls = []
    for call in raw.get("tool_calls") or []:
        function = call.get("function") or {}
        calls.append(ToolCall(ID=call.get("id", ""), Function=ToolCallFunction(
            Index=int(function.get("index", 0)),
            Name=function.get("name", ""),
            Arguments=Arguments(go_json_numbers(function.get("arguments") or {})),
        )))
    return Message(
        Role=str(raw.get("role", "")).lower(),
        Content=raw.get("content", "") if content is None else content,
        Thinking=raw.get("thinking", ""),
        Images=[_image_data(i) for i in raw.get("images") or []],
        ToolCalls=calls,
        ToolName=raw.get("tool_name", ""),
        ToolCallID=raw.get("tool_call_id", ""),
    )


# ---------------------------------------------------------------- Ollama's rules


def with_model_layers(messages: Sequence[Mapping[str, Any]], system: str | None,
                      layer_messages: Sequence[Mapping[str, Any]] = ()) -> list[dict]:
    """The chat handler's list: the messages layer first, then the request; the
    system layer in front unless the request starts with its own system message."""
    msgs = [dict(m) for m in layer_messages] + [dict(m) for m in messages]
    first_role = str(messages[0].get("role", "")).lower() if messages else ""
    if messages and first_role != "system" and system:
        msgs.insert(0, {"role": "system", "content": system})
    return msgs


def image_tag(n: int) -> str:
    return f"[img-{n}]"


def tag_images(contents: list[str], image_counts: list[int]) -> list[str]:
    """Ollama's imageTaggedMessages: one [img-N] per image, in front of the content or
    in place of the first "[img]" the user wrote."""
    tagged, n = [], 0
    for content, count in zip(contents, image_counts, strict=True):
        prefix = ""
        for _ in range(count):
            if "[img]" in content:
                content = content.replace("[img]", image_tag(n), 1)
            else:
                prefix += image_tag(n)
            n += 1
        tagged.append(prefix + content)
    return tagged


def collate(messages: list[Message]) -> tuple[str, list[Message]]:
    system = [m.Content for m in messages if m.Role == "system"]
    merged: list[Message] = []
    for m in messages:
        if merged and merged[-1].Role == m.Role and m.Role != "tool":
            last = merged[-1]
            merged[-1] = Message(**{**last.__dict__, "Content": last.Content + "\n\n" + m.Content})
        else:
            merged.append(m)
    return "\n\n".join(system), merged


def identifiers(tree: Tree) -> set[str]:
    """Lower-cased field and variable names a template mentions (Ollama's Vars)."""
    names: set[str] = set()

    def walk(node: Node | None) -> None:
        if isinstance(node, ListNode):
            for child in node.nodes:
                walk(child)
        elif isinstance(node, TemplateNode):
            if node.pipe is None:
                raise TemplateError("undefined template specified")
            walk(node.pipe)
        elif isinstance(node, ActionNode):
            walk(node.pipe)
        elif isinstance(node, BranchNode):
            walk(node.pipe)
            walk(node.body)
            walk(node.else_body)
        elif isinstance(node, PipeNode):
            for cmd in node.cmds:
                for arg in cmd.args:
                    walk(arg)
        elif isinstance(node, FieldNode | VariableNode):
            names.update(i.lower() for i in node.ident)

    for body in tree.templates.values():
        walk(body)
    return names


@lru_cache(maxsize=8)
def parse_ollama(source: str) -> Tree:
    """Parse as Ollama does: append {{ .Response }} when a template mentions neither
    .Messages nor .Response. Once per source (a chat renders at every turn); the tree is
    only read after."""
    tree = parse(source)
    names = identifiers(tree)
    if "messages" not in names and "response" not in names:
        response = FieldNode(len(source), ("Response",))
        tree.root.nodes.append(ActionNode(len(source), PipeNode(
            len(source), cmds=[CommandNode(len(source), [response])])))
    return tree


def _cut_after_response(tree: Tree) -> Tree:
    """Ollama's deleteNode: keep everything up to the first .Response field."""
    cut = False

    def drop(node: Node) -> bool:
        nonlocal cut
        if isinstance(node, FieldNode) and "Response" in node.ident:
            cut = True
            return False
        return cut

    def walk(node: Node) -> Node | None:
        if drop(node):
            return None
        if isinstance(node, ListNode):
            node.nodes = [k for k in (walk(c) for c in node.nodes) if k is not None]
        elif isinstance(node, BranchNode):
            body = walk(node.body)
            else_body = walk(node.else_body) if node.else_body is not None else None
            if body is None or (node.else_body is not None and else_body is None):
                # Go's type assertion on the removed list panics here
                raise TemplateError("template: the legacy prompt path cannot cut this template "
                                    "after {{ .Response }} (Ollama fails on it too)")
            node.body, node.else_body = body, else_body
        elif isinstance(node, ActionNode):
            pipe = walk(node.pipe)
            if pipe is None:
                return None
        elif isinstance(node, PipeNode):
            cmds = []
            for cmd in node.cmds:
                args = [k for k in (walk(a) for a in cmd.args) if k is not None]
                if not args:
                    return None
                cmd.args = args
                cmds.append(cmd)
            node.cmds = cmds
        return node

    root = walk(copy.deepcopy(tree.root))
    return Tree(tree.source, root, {"": root})


@dataclass(frozen=True)
class ThinkSetting:
    think: bool = False
    level: str = ""
    is_set: bool = False


def execute_chat(tree: Tree, messages: list[Message], tools: Tools,
                 think: ThinkSetting = ThinkSetting()) -> str:
    """Ollama's Template.Execute on tagged messages."""
    system, merged = collate(messages)
    common = {"Think": think.think, "ThinkLevel": think.level, "IsThinkSet": think.is_set}
    if "messages" in identifiers(tree):
        return execute(tree, {"System": system, "Messages": merged, "Tools": tools,
                              "Response": "", **common})
    out: list[str] = []
    turn = {"System": "", "Prompt": "", "Response": ""}

    def flush() -> None:
        out.append(execute(tree, {**turn, **common}))
        turn.update(System="", Prompt="", Response="")

    for m in merged:
        if m.Role == "system":
            if turn["Prompt"] or turn["Response"]:
                flush()
            turn["System"] = m.Content
        elif m.Role == "user":
            if turn["Response"]:
                flush()
            turn["Prompt"] = m.Content
        elif m.Role == "assistant":
            turn["Response"] = m.Content
    # the last turn runs in a fresh template: no Ollama functions, missingkey default
    out.append(execute(_cut_after_response(tree), {**turn, **common}, missing_key="default",
                       builtins_only=True))
    return "".join(out)


def render_ollama_chat(source: str, messages: Sequence[Mapping[str, Any]], *,
                       tools: Sequence[Mapping[str, Any]] | None = None,
                       think: bool | str | None = None, think_level: str = "",
                       contents: Sequence[str] | None = None) -> str:
    """Render Ollama API messages with a Go template exactly as Ollama's chat does
    (after its model layers were applied: see with_model_layers).

    ``contents`` replaces the messages' contents (same order) before images are tagged.
    """
    texts = list(contents) if contents is not None else [m.get("content", "") for m in messages]
    tagged = tag_images(texts, [len(m.get("images") or []) for m in messages])
    setting = ThinkSetting(
        think=think is True or (isinstance(think, str) and think not in ("", "false")),
        level=think if isinstance(think, str) else think_level,
        is_set=think is not None,
    )
    tree = parse_ollama(source)
    return execute_chat(tree, [to_message(m, c) for m, c in zip(messages, tagged, strict=True)],
                        to_tools(tools), setting)
