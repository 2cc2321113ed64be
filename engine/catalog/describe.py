"""What Ollama's API says about a model: ``/api/tags`` entries and ``/api/show`` bodies.

Facts from ollama server/routes.go (GetModelInfo, getModelData), server/images.go
(Capabilities, GetModel, Model.String) and server/model_list_cache.go:
- details come from the config blob; the model layer's ``from`` is ``parent_model``;
- ``model_info`` is every GGUF key but ``general.name`` and ``tokenizer.chat_template``,
  arrays longer than 5 replaced by ``[]``, plus ``general.parameter_count``;
- the template shown is the Go template layer, else the GGUF chat template, else
  Ollama's default ``{{ .Prompt }}``;
- capabilities, in Ollama's order: from the GGUF chat template when no Go template layer
  ("tools" when it mentions tools/tool_call; "thinking" for <think>...</think>), then
  "completion" (or "embedding" with a pooling type), "vision" for ``{arch}.vision.*``
  keys or a projector layer, then the Go template's ("tools" for .Tools, "insert" for
  .Suffix, "thinking" for .Thinking).
"""

from __future__ import annotations

import re

from engine.gguf import GGUFModel, open_model
from engine.gguf.reader import Metadata
from engine.prompt import DEFAULT_TEMPLATE
from engine.store.params import format_parameters, go_float
from engine.store.store import LocalModel

MAX_SHOWN_ARRAY = 5
_TEMPLATE_FIELD = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)")


def go_time(model: LocalModel) -> str:
    """``modified_at`` as Go's time.Time marshals it (RFC 3339, ns, local offset)."""
    stamp = model.modified
    nanos = model.modified_ns % 1_000_000_000
    fraction = f".{nanos:09d}".rstrip("0").rstrip(".")
    offset = stamp.strftime("%z")
    zone = "Z" if offset in ("+0000", "") else f"{offset[:3]}:{offset[3:]}"
    return stamp.strftime("%Y-%m-%dT%H:%M:%S") + fraction + zone


def details(model: LocalModel) -> dict[str, object]:
    config = model.config
    families = config.get("model_families")
    return {
        "parent_model": model.parent_model,
        "format": config.get("model_format", ""),
        "family": config.get("model_family", ""),
        "families": families if isinstance(families, list) else None,
        "parameter_size": config.get("model_type", ""),
        "quantization_level": config.get("file_type", ""),
    }


def tags_entry(model: LocalModel) -> dict[str, object]:
    """One entry of ``/api/tags``."""
    return {
        "name": model.name.display,
        "model": model.name.display,
        "modified_at": go_time(model),
        "size": model.size,
        "digest": model.digest,
        "details": details(model),
    }


def model_info(metadata: Metadata, parameter_count: int) -> dict[str, object]:
    """GGUF keys as ``/api/show`` lists them (big arrays emptied, no name or chat template)."""
    info: dict[str, object] = {}
    for key in metadata:
        if key in ("general.name", "tokenizer.chat_template"):
            continue
        length = _array_length(metadata, key)
        info[key] = [] if length is not None and length > MAX_SHOWN_ARRAY else metadata[key]
    info["general.parameter_count"] = parameter_count
    return dict(sorted(info.items()))


def _array_length(metadata: Metadata, key: str) -> int | None:
    try:
        return metadata.array_length(key)
    except TypeError:                     # not an array
        return None


def template_fields(template: str) -> set[str]:
    """Lower-cased field names a Go template reads (Ollama's Template.Vars, roughly)."""
    return {name.lower() for name in _TEMPLATE_FIELD.findall(template)}


def capabilities(model: LocalModel, gguf: GGUFModel) -> list[str]:
    found: list[str] = []

    def add(capability: str) -> None:
        if capability not in found:
            found.append(capability)

    for capability in model.config.get("capabilities") or []:
        add(str(capability))
    arch = gguf.config.architecture
    chat_template = gguf.config.chat_template or ""
    if model.template is None and chat_template:
        if "tools" in chat_template or "tool_call" in chat_template:
            add("tools")
        if "<think>" in chat_template and "</think>" in chat_template:
            add("thinking")
    add("embedding" if f"{arch}.pooling_type" in gguf.metadata else "completion")
    if f"{arch}.vision.block_count" in gguf.metadata or model.projector_path is not None:
        add("vision")
    if model.template is not None:
        fields = template_fields(model.template)
        for field, capability in (("tools", "tools"), ("suffix", "insert"),
                                  ("thinking", "thinking")):
            if field in fields:
                add(capability)
    return found


def selected_template(model: LocalModel, gguf: GGUFModel) -> str:
    if model.template is not None:
        return model.template
    return gguf.config.chat_template or DEFAULT_TEMPLATE


def _quote(text: str) -> str:
    """The Modelfile quoting Ollama's ``ollama show --modelfile`` uses."""
    if "\n" in text or text.startswith(" ") or text.endswith(" "):
        return f'"""{text}"""' if '"' in text else f'"{text}"'
    return text


def _go_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return go_float(float(value))
    return str(value)


def modelfile(model: LocalModel, template: str) -> str:
    lines = [
        '# Modelfile generated by "ollama show"',
        "# To build a new Modelfile based on this, replace FROM with:",
        f"# FROM {model.name.display}",
        "",
        f"FROM {model.model_path}",
        *(f"ADAPTER {_quote(str(path))}" for path in model.adapter_paths),
        *([f"FROM {model.projector_path}"] if model.projector_path else []),
        f"TEMPLATE {_quote(template)}",
        *([f"SYSTEM {_quote(model.system)}"] if model.system else []),
    ]
    for key in sorted(model.params):
        value = model.params[key]
        for item in value if isinstance(value, list) else [value]:
            lines.append(f"PARAMETER {key} {_quote(_go_value(item))}")
    lines += [f"LICENSE {_quote(text)}" for text in model.license]
    for message in model.messages:
        lines.append(f"MESSAGE {message.get('role', '')} {_quote(str(message.get('content', '')))}")
    return "\n".join(lines) + "\n"


def show_info(model: LocalModel) -> dict[str, object]:
    """``/api/show`` for a store model (opens the GGUF; CorruptModel when it is broken)."""
    gguf = open_model(model.model_path)
    template = selected_template(model, gguf)
    info: dict[str, object] = {}
    if model.license:
        info["license"] = "\n".join(model.license)
    info["modelfile"] = modelfile(model, model.template or DEFAULT_TEMPLATE)
    if model.params:
        info["parameters"] = format_parameters(model.params)
    info["template"] = template
    if model.system:
        info["system"] = model.system
    show_details = details(model)
    if show_details["quantization_level"] in ("", "unknown"):
        show_details["quantization_level"] = gguf.config.quantization
    info["details"] = show_details
    if model.messages:
        info["messages"] = [{"role": m.get("role", ""), "content": m.get("content", "")}
                            for m in model.messages]
    info["model_info"] = model_info(gguf.metadata, gguf.config.parameter_count)
    if model.projector_path is not None:
        paired = open_model(model.model_path, projector_path=model.projector_path)
        if paired.projector_metadata is not None:
            projector_count = paired.config.parameter_count - gguf.config.parameter_count
            info["projector_info"] = model_info(paired.projector_metadata, projector_count)
    info["capabilities"] = capabilities(model, gguf)
    info["modified_at"] = go_time(model)
    return info
