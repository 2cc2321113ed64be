"""A conversation rendered as one model prompts it: the layers the model brings (its
store's template, system and messages layers, the GGUF's chat template, its special
tokens and image placeholder) applied to the chat's messages. The runtime tokenizes what
this renders; `lantern prompt` prints it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.prompt.render import QWEN_IMAGE_PLACEHOLDER, RenderedPrompt, render_prompt


@dataclass(frozen=True)
class ModelPrompt:
    template_layer: str | None = None      # Ollama template layer (Go text/template)
    chat_template: str | None = None       # the GGUF's tokenizer.chat_template (Jinja)
    system: str | None = None              # Ollama system layer
    layer_messages: Sequence[Mapping[str, Any]] = ()
    special_tokens: Mapping[str, str] = field(default_factory=dict)
    image_placeholder: str = QWEN_IMAGE_PLACEHOLDER

    def render(self, messages: Sequence, system: str | None = None,
               think: bool | str | None = None,
               tools: Sequence[Mapping[str, Any]] | None = None) -> RenderedPrompt:
        """``messages`` (the chat core's messages or API dicts) with the model's template;
        ``system`` replaces the system layer (None: the layer's); ``think`` is Ollama's
        option (None: unset)."""
        return render_prompt(
            [api_message(m) for m in messages],
            layer_messages=self.layer_messages,
            template_layer=self.template_layer,
            chat_template=self.chat_template,
            system=system if system is not None else self.system,
            special_tokens=self.special_tokens,
            think=think,
            image_placeholder=self.image_placeholder,
            tools=tools,
        )


def api_message(message: Any) -> dict:
    """A chat message as Ollama's API shapes it (a dict passes as it is)."""
    if isinstance(message, dict):
        return message
    out = {"role": message.role, "content": message.content}
    if message.thinking:
        out["thinking"] = message.thinking
    if message.images:
        out["images"] = list(message.images)
    if message.tool_calls:
        out["tool_calls"] = [call.api() for call in message.tool_calls]
    if message.tool_name:
        out["tool_name"] = message.tool_name
    return out
