"""Chat prompts: a model's template chosen and the conversation rendered (render), with
the layers a model brings (model_prompt); Ollama's Go templates (ollama, gotemplate) and
GGUF Jinja chat templates (jinja) underneath."""

from engine.prompt.model_prompt import ModelPrompt, api_message
from engine.prompt.render import (
    DEFAULT_TEMPLATE,
    QWEN_IMAGE_PLACEHOLDER,
    RenderedPrompt,
    build_prompt,
    prepare_template,
    render_prompt,
    template_kind,
)

__all__ = [
    "DEFAULT_TEMPLATE", "QWEN_IMAGE_PLACEHOLDER", "ModelPrompt", "RenderedPrompt", "api_message",
    "build_prompt", "prepare_template", "render_prompt", "template_kind",
]
