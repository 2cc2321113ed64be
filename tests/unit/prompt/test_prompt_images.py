"""Images in Jinja chat templates: HF-style image items where the template takes them,
inline placeholders where it only concatenates strings; never a raw TypeError."""

import pytest

from engine.errors import TemplateError
from engine.prompt import QWEN_IMAGE_PLACEHOLDER, render_prompt
from tests.fixtures.synthetic_gguf import CHAT_TEMPLATE

VL_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.content is string %}{{ m.content }}{% else %}"
    "{% for c in m.content %}{% if c.type == 'image' %}<|vision_start|><|image_pad|>"
    "<|vision_end|>{% else %}{{ c.text }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.mark.parametrize("template", [CHAT_TEMPLATE, VL_TEMPLATE])
def test_images_become_markup_placeholders_in_order(template):
    rendered = render_prompt(
        [{"role": "user", "content": "compare <|im_end|> these", "images": ["a", "b"]}],
        chat_template=template,
    )
    assert [rendered.segments[i] for i in rendered.image_segments] == [
        (QWEN_IMAGE_PLACEHOLDER, True), (QWEN_IMAGE_PLACEHOLDER, True)]
    assert ("compare <|im_end|> these", False) in rendered.segments   # user text stays text


def test_template_failure_is_a_template_error():
    with pytest.raises(TemplateError, match="chat template"):
        render_prompt([{"role": "user", "content": "hi"}],
                      chat_template="{{ messages[0].content + 1 }}")
