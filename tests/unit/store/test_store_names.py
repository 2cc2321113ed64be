"""Model names parsed with Ollama's rules (cases from ollama types/model/name_test.go)."""

import pytest

from engine.errors import InvalidName
from engine.store import ModelName
from engine.store.names import part_problem

P80 = "8" * 80
P350 = "3" * 350


@pytest.mark.parametrize(
    ("text", "parts", "display"),
    [
        ("qwen2.5vl", ("registry.ollama.ai", "library", "qwen2.5vl", "latest"), "qwen2.5vl:latest"),
        ("qwen2.5vl:3b", ("registry.ollama.ai", "library", "qwen2.5vl", "3b"), "qwen2.5vl:3b"),
        ("user/m:t", ("registry.ollama.ai", "user", "m", "t"), "user/m:t"),
        ("host/ns/m:t", ("host", "ns", "m", "t"), "host/ns/m:t"),
        ("host:5000/ns/m", ("host:5000", "ns", "m", "latest"), "host:5000/ns/m:latest"),
        ("scheme://host:port/namespace/model:tag",
         ("host:port", "namespace", "model", "tag"), "host:port/namespace/model:tag"),
        ("registry.ollama.ai/library/dolphin-mistral:7b-v2.6-dpo-laser-q6_K",
         ("registry.ollama.ai", "library", "dolphin-mistral", "7b-v2.6-dpo-laser-q6_K"),
         "dolphin-mistral:7b-v2.6-dpo-laser-q6_K"),
        ("Registry.Ollama.AI/Library/M:t", ("Registry.Ollama.AI", "Library", "M", "t"), "M:t"),
        ("_why/_the/_lucky:_stiff", ("_why", "_the", "_lucky", "_stiff"),
         "_why/_the/_lucky:_stiff"),
        (f"{P350}/{P80}/{P80}:{P80}", (P350, P80, P80, P80), f"{P350}/{P80}/{P80}:{P80}"),
    ],
)
def test_parse_fills_ollama_defaults(text, parts, display):
    name = ModelName.parse(text)
    assert name.parts == parts
    assert name.display == display


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "the model is empty"),
        ("mm:", "the tag is empty"),
        ("/nn/mm", "the host is empty"),
        ("hh//mm", "the namespace is empty"),
        ("-hh/nn/mm:tt", "the host '-hh' must start"),
        ("hh/-nn/mm:tt", "the namespace '-nn' must start"),
        ("hh/nn/-mm:tt", "the model '-mm' must start"),
        ("hh/nn/mm:-tt", "the tag '-tt' must start"),
        ("host/name:space/model:tag", "the namespace 'name:space' contains ':'"),
        ("user.name/model", "the namespace 'user.name' contains '.'"),
        ("a/b/c/d", "contains '/'"),
        ("m@sha256:" + "0" * 64, "no '@digest' part"),
        ("^", "the model '^' must start"),
        ("model with space", "contains ' '"),
        (f"{P80}8", "81 characters long (at most 80)"),
        (f"{P350}3/n/m", "351 characters long (at most 350)"),
    ],
)
def test_invalid_names_say_which_part_and_rule(text, says):
    with pytest.raises(InvalidName) as caught:
        ModelName.parse(text)
    assert says in str(caught.value)
    assert repr(text) in str(caught.value)


def test_part_rules_per_kind():
    assert part_problem("host", "a:123") is None
    assert part_problem("host", "a.") is None
    assert part_problem("namespace", "a.") is not None
    assert part_problem("model", "qwen2.5vl") is None
    assert part_problem("tag", "a:b") is not None


def test_from_parts_rejects_bad_directory_names():
    assert ModelName.from_parts("h", "n", "m", "t").display == "h/n/m:t"
    with pytest.raises(InvalidName):
        ModelName.from_parts("h", "n", "m", ".lantern-partial-x")


def test_names_compare_case_insensitively_by_key():
    assert ModelName.parse("Qwen2.5VL:3B").key() == ModelName.parse("qwen2.5vl:3b").key()
    assert str(ModelName.parse("m")) == "registry.ollama.ai/library/m:latest"
