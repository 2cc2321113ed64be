"""The demo model's own Jinja chat template, rendered by us and by transformers'
apply_chat_template: the strings must be identical."""

import pytest

from engine.errors import TemplateError
from engine.gguf.reader import read_gguf
from engine.prompt.jinja import render_jinja

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather <now> in a city — «quoted»",
    "parameters": {"type": "object", "required": ["city"],
                   "properties": {"city": {"type": "string", "description": "City"}}}}}]
CHATS = {
    "user": [{"role": "user", "content": "Write hello world in C."}],
    "system": [{"role": "system", "content": "Be brief."},
               {"role": "user", "content": "你好 <|im_end|>"}],
    "multi-turn": [{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "Hello!"},
                   {"role": "user", "content": "Bye"}],
    "tool-calls": [{"role": "user", "content": "Weather in Paris?"},
                   {"role": "assistant", "content": "", "tool_calls": [
                       {"type": "function", "function": {"name": "get_weather",
                                                         "arguments": {"city": "Paris"}}}]},
                   {"role": "tool", "content": '{"temp": 20}'},
                   {"role": "tool", "content": "second"}],
}


@pytest.fixture(scope="module")
def demo(demo_05b):
    from transformers import AutoTokenizer

    source = read_gguf(demo_05b).metadata["tokenizer.chat_template"]
    hf = AutoTokenizer.from_pretrained(str(demo_05b.parent), gguf_file=demo_05b.name)
    return source, hf


@pytest.mark.slow
@pytest.mark.parametrize("chat", CHATS)
@pytest.mark.parametrize("with_tools", [False, True])
@pytest.mark.parametrize("generation", [True, False])
def test_matches_transformers(demo, chat, with_tools, generation):
    source, hf = demo
    tools = TOOLS if with_tools else None
    ours = render_jinja(source, CHATS[chat], tools=tools, add_generation_prompt=generation,
                        special_tokens={"eos_token": hf.eos_token, "bos_token": hf.bos_token})
    theirs = hf.apply_chat_template(CHATS[chat], tools=tools, tokenize=False,
                                    add_generation_prompt=generation, chat_template=source)
    assert ours == theirs


def test_tojson_like_transformers():
    out = render_jinja("{{ x | tojson }}|{{ x | tojson(indent=2) }}", [], x={"a": "<é>", "b": [1]})
    assert out == '{"a": "<é>", "b": [1]}|{\n  "a": "<é>",\n  "b": [\n    1\n  ]\n}'


def test_raise_exception_and_syntax_errors():
    with pytest.raises(TemplateError, match="no system allowed"):
        render_jinja("{% if messages %}{{ raise_exception('no system allowed') }}{% endif %}",
                     [{"role": "system", "content": "x"}])
    with pytest.raises(TemplateError, match="line 2"):
        render_jinja("ok\n{% if %}", [])


def test_trim_blocks_and_loop_controls():
    source = ("{% for m in messages %}\n  {% if m.role == 'x' %}{% continue %}{% endif %}\n"
              "{{ m.role }};{% endfor %}")
    out = render_jinja(source, [{"role": "a"}, {"role": "x"}, {"role": "b"}])
    assert out == "a;b;"
