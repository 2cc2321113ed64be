"""Chat prompts: pick the model's template, render the conversation, and say which
parts of the text are template markup and which are what someone typed.

Selection follows Ollama: the store's `template` layer (Go text/template) when the
model has one, else the GGUF's `tokenizer.chat_template` (Jinja, rendered like
transformers), else Ollama's default ``{{ .Prompt }}``: a model that brings no template (a
base model) is completion-only, and the chat's last user message is its whole prompt
(earlier turns join it by Ollama's legacy rule; the system prompt is dropped, as the
template has no ``.System``). Rendering ChatML instead would feed such a model control
tokens its vocabulary may not even hold.

Why segments: markup may contain control tokens (``<|im_start|>``) and must be
tokenized with special-token parsing; message contents must not (a user who types
``<|im_end|>`` gets text, not a turn boundary). We find the contents by rendering twice:
once as is, once with every non-empty content wrapped in two private-use marker
characters. When deleting the markers from the second text gives exactly the first,
the markers bound the contents exactly. When a template rewrote a content (trimmed,
split, measured it) the two differ; then each content is found by plain search, in
order, and anything not found stays markup.

Images: each image of a message becomes one ``image_placeholder`` segment (Qwen2.5-VL:
``<|vision_start|><|image_pad|><|vision_end|>``) where Ollama's ``[img-N]`` tag or the
Jinja template's image item puts it. ``RenderedPrompt.image_segments`` lists those
segments in image order so the vision step can widen each ``<|image_pad|>`` to N pads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import TemplateError
from engine.prompt.jinja import compile_template, render_jinja
from engine.prompt.ollama import (
    image_tag,
    parse_ollama,
    render_ollama_chat,
    with_model_layers,
)

QWEN_IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
_OPEN, _CLOSE = "\U000f0000", "\U000f0001"   # private use: never in templates

DEFAULT_TEMPLATE = "{{ .Prompt }}"   # Ollama's template for a model that brings none


def template_kind(template_layer: str | None, chat_template: str | None) -> str:
    """Which template a model's chats render with: "ollama" (the store's Go template
    layer), "jinja" (the GGUF's chat template) or "default" (neither: DEFAULT_TEMPLATE)."""
    if template_layer is not None:
        return "ollama"
    return "jinja" if chat_template else "default"


def prepare_template(template_layer: str | None, chat_template: str | None) -> None:
    """Parse or compile the template a model's chats will render with, now (at load):
    it takes milliseconds of Python that would otherwise land on the first answer, beside
    the window's work for it. A template that does not parse is left for the first render
    to report."""
    kind = template_kind(template_layer, chat_template)
    try:
        if kind == "jinja":
            compile_template(chat_template)
        else:
            parse_ollama(template_layer if template_layer is not None else DEFAULT_TEMPLATE)
    except TemplateError:
        return


@dataclass(frozen=True)
class RenderedPrompt:
    text: str
    segments: list[tuple[str, bool]]   # (text, is_markup); "".join(texts) == text
    image_segments: list[int]          # segment index of each image, in message order
    template_kind: str                 # "ollama", "jinja" or "default" (see template_kind)

    @property
    def template_name(self) -> str:
        """The template used, in words for a summary line."""
        if self.template_kind == "default":
            return f"Ollama's default template {DEFAULT_TEMPLATE} (the model has none)"
        return f"{self.template_kind} template"


def render_prompt(
    messages: Sequence[Mapping[str, Any]],
    *,
    template_layer: str | None = None,
    chat_template: str | None = None,
    system: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    special_tokens: Mapping[str, str] | None = None,
    think: bool | str | None = None,
    layer_messages: Sequence[Mapping[str, Any]] = (),
    image_placeholder: str = QWEN_IMAGE_PLACEHOLDER,
) -> RenderedPrompt:
    """Render Ollama-API-shaped messages ({role, content, images?, tool_calls?, ...}).

    ``system`` and ``layer_messages`` are the model's system and messages layers,
    applied by Ollama's rule (system first unless the chat starts with its own).
    ``add_generation_prompt`` applies to Jinja; Ollama's templates decide it.
    ``think`` is Ollama's option (True/False or a level); None leaves it unset, so the
    template's own default holds. Jinja templates see it as ``jinja_thinking`` says.
    """
    msgs = with_model_layers(messages, system, layer_messages)
    contents = [str(m.get("content") or "") for m in msgs]
    n_images = sum(len(m.get("images") or []) for m in msgs)

    kind = template_kind(template_layer, chat_template)
    if kind != "jinja":
        go_source = template_layer if template_layer is not None else DEFAULT_TEMPLATE

        def render(texts: list[str]) -> str:
            return render_ollama_chat(go_source, msgs, tools=tools, think=think,
                                      contents=texts)
        image_marks = [image_tag(i) for i in range(n_images)]
    else:
        thinking = jinja_thinking(think)
        inline = [None]  # image placeholders inline in the text (template wants strings)?

        def render(texts: list[str]) -> str:
            def attempt(as_text: str | None) -> str:
                return render_jinja(chat_template, _jinja_messages(msgs, texts, as_text),
                                    tools=tools, add_generation_prompt=add_generation_prompt,
                                    special_tokens=special_tokens,
                                    image_placeholder=image_placeholder, **thinking)
            if not n_images or inline[0] is not None:
                return attempt(inline[0] or None)
            try:
                text = attempt(None)
                inline[0] = ""
            except TemplateError:
                # a text-only template (string concatenation): put each image's
                # placeholder in front of its message's text instead of image items
                text = attempt(image_placeholder)
                inline[0] = image_placeholder
            return text
        image_marks = [image_placeholder] * n_images

    plain = render(contents)
    spans = _content_spans(plain, contents, render)
    segments = _split(plain, spans)
    segments, image_segments = _mark_images(segments, image_marks, image_placeholder)
    if len(image_segments) != n_images:
        raise TemplateError(
            f"the {kind} template placed {len(image_segments)} of {n_images} images; "
            "use a template that shows images (one with image items or Ollama's [img] tags)")
    return RenderedPrompt("".join(t for t, _ in segments), segments, image_segments, kind)


REASONING_EFFORTS = ("low", "medium", "high")


def jinja_thinking(think: bool | str | None) -> dict[str, Any]:
    """Ollama's ``think`` as Jinja templates read it: ``enable_thinking`` (Qwen3's name), and
    a level as ``reasoning_effort`` too (gpt-oss's, whose reasoning cannot be turned off, so
    True and False leave its default). None sets neither."""
    if think is None:
        return {}
    thinking: dict[str, Any] = {"enable_thinking": think not in (False, "false")}
    if think in REASONING_EFFORTS:
        thinking["reasoning_effort"] = think
    return thinking


def _jinja_messages(msgs: list[dict], texts: list[str],
                    inline_placeholder: str | None = None) -> list[dict]:
    """HF-style messages: a message with images carries a content list of image items
    followed by its text (as Qwen2.5-VL's processor builds them); for templates that only
    take strings, `inline_placeholder` is put in front of the text once per image. An
    answer's thinking is also `reasoning_content`, the name Qwen3's template reads (it
    keeps the thinking of a turn still calling tools)."""
    out = []
    for m, text in zip(msgs, texts, strict=True):
        message = {k: v for k, v in m.items() if k != "images"}
        if m.get("thinking"):
            message["reasoning_content"] = m["thinking"]
        images = m.get("images") or []
        if images and inline_placeholder:
            message["content"] = inline_placeholder * len(images) + text
        elif images:
            items = [{"type": "image"} for _ in images]
            message["content"] = items + [{"type": "text", "text": text}]
        else:
            message["content"] = text
        out.append(message)
    return out


def _content_spans(plain: str, contents: list[str], render) -> list[tuple[int, int]]:
    """Character spans of message contents inside ``plain`` (see the module docstring)."""
    if not any(_OPEN in c or _CLOSE in c for c in contents):
        marked = render([_OPEN + c + _CLOSE if c else c for c in contents])
        if marked.replace(_OPEN, "").replace(_CLOSE, "") == plain:
            spans, offset = [], 0
            for match in re.finditer(f"{_OPEN}(.*?){_CLOSE}", marked, re.S):
                start = match.start() - offset
                spans.append((start, start + len(match[1])))
                offset += 2
            return spans
    spans, cursor = [], 0
    for content in contents:
        at = plain.find(content, cursor) if content else -1
        if at >= 0:
            spans.append((at, at + len(content)))
            cursor = at + len(content)
    return spans


def _split(text: str, spans: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    segments, cursor = [], 0
    for start, end in spans:
        if start > cursor:
            segments.append((text[cursor:start], True))
        if end > start:
            segments.append((text[start:end], False))
        cursor = end
    if cursor < len(text):
        segments.append((text[cursor:], True))
    return segments


def _mark_images(segments: list[tuple[str, bool]], marks: list[str],
                 placeholder: str) -> tuple[list[tuple[str, bool]], list[int]]:
    """Split out each image's mark (its first occurrence) as a placeholder segment.

    Marks are Ollama's distinct ``[img-N]`` tags (text order may differ from image order
    when a user wrote ``[img]``) or identical Jinja placeholders, taken in order.
    Placeholders count only in markup; a tag may sit in content where a user's "[img]" was.
    """
    out: list[tuple[str, bool]] = []
    slots: dict[int, int] = {}
    pending = dict(enumerate(marks))
    for text, markup in segments:
        while True:
            found = [(text.find(mark), i) for i, mark in pending.items()
                     if (markup or mark != placeholder) and mark in text]
            if not found:
                break
            at, image = min(found)
            if at > 0:
                out.append((text[:at], markup))
            slots[image] = len(out)
            out.append((placeholder, True))
            text = text[at + len(pending.pop(image)):]
        if text:
            out.append((text, markup))
    return out, [slots[i] for i in sorted(slots)]


def build_prompt(messages: Sequence[Mapping[str, Any]], **options: Any) -> str:
    """The prompt text alone (see render_prompt for the options)."""
    return render_prompt(messages, **options).text

