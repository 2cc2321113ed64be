"""The first tokens a model reads: a raw prompt gets the BOS (and EOS) its GGUF asks for, as
llama.cpp adds them, through the one path every raw caller takes (LoadedModel.tokenize_raw);
a model that brings no chat template renders Ollama's default ``{{ .Prompt }}``, with that
BOS, and says it is completion-only."""

from __future__ import annotations

import json

import llama_cpp
import pytest

from engine.chat.messages import Message
from engine.chat.options import Options
from engine.cli import main
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from tests.fixtures.synthetic_gguf import TextSpec

TEXTS = ("Hello world", "the thing", "<|im_start|>user\nHello<|im_end|>\n", "")
BOS_FAMILY = {"tokenizer.ggml.pre": "llama-bpe", "tokenizer.ggml.add_bos_token": True}


@pytest.fixture(scope="module")
def bos_family(synthetic_gguf):
    """Llama 3's vocabulary settings: BOS on."""
    return synthetic_gguf("llama", TextSpec(vocab=400), overrides=BOS_FAMILY)


@pytest.fixture(scope="module")
def qwen(synthetic_gguf):
    return synthetic_gguf("qwen2", TextSpec(vocab=400))


def llama_cpp_ids(path, text: str) -> list[int]:
    """llama.cpp's own tokenization with the special tokens the GGUF asks for."""
    llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    try:
        return llm.tokenize(text.encode(), add_bos=True, special=True)
    finally:
        llm.close()


@pytest.mark.parametrize("family", ["bos_family", "qwen"])
def test_raw_prompts_are_llama_cpps_ids(family, request):
    path = request.getfixturevalue(family)
    model = load_model(path, num_ctx=64)
    for text in TEXTS:
        assert model.tokenize_raw(text).ids.tolist() == llama_cpp_ids(path, text), text
    starts_with_bos = bool(model.tokenize_raw("Hello").ids[0] == model.tokenizer.bos_id)
    assert starts_with_bos is (family == "bos_family")  # Qwen: add_bos_token false, none


def test_a_raw_prompt_that_starts_with_the_bos_text_gets_one(bos_family):
    model = load_model(bos_family, num_ctx=64)
    bos = model.tokenizer.bos_id
    typed = model.tokenize_raw("<|endoftext|>Hello world").ids.tolist()
    assert typed == model.tokenize_raw("Hello world").ids.tolist()
    assert typed[0] == bos and typed.count(bos) == 1


def test_add_eos_token_ends_a_raw_prompt_as_llama_cpp_does(synthetic_gguf):
    path = synthetic_gguf("llama", TextSpec(vocab=400), overrides={
        **BOS_FAMILY, "tokenizer.ggml.add_eos_token": True})
    model = load_model(path, num_ctx=64)
    ids = model.tokenize_raw("Hello world").ids.tolist()
    assert ids == llama_cpp_ids(path, "Hello world")
    assert ids[0] == model.tokenizer.bos_id and ids[-1] == model.tokenizer.eos_id
    # one already there stays single (llama.cpp would add a second and warn)
    typed = model.tokenize_raw("Hello world<|im_end|>").ids.tolist()
    assert typed == ids


def test_run_raw_and_inspect_raw_read_the_bos(bos_family, capsys):
    model = load_model(bos_family, num_ctx=64)
    chat = LocalSession(model, Options(temperature=0, num_predict=2))
    list(chat.raw("Hello world"))
    assert chat.last_prompt.ids.tolist() == model.tokenize_raw("Hello world").ids.tolist()
    assert chat.last_prompt.ids[0] == model.tokenizer.bos_id
    assert main(["inspect", str(bos_family), "Hello world", "--raw", "--json"]) == 0
    tokens = json.loads(capsys.readouterr().out)["tokens"]
    assert [t["id"] for t in tokens] == chat.last_prompt.ids.tolist()


@pytest.fixture(scope="module")
def templateless(synthetic_gguf):
    """A base model: a BOS family's GGUF without tokenizer.chat_template."""
    return synthetic_gguf("llama", TextSpec(vocab=400),
                          overrides={**BOS_FAMILY, "tokenizer.chat_template": None})


def test_a_model_without_a_template_renders_ollamas_default(templateless):
    model = load_model(templateless, num_ctx=64)
    assert model.completion_only
    tokenizer = model.tokenizer
    ids = model.tokenize_chat([Message("user", "Hello world")], system="Be brief.").ids.tolist()
    # {{ .Prompt }}: the user's text alone, after the BOS; no ChatML, no system prompt
    assert ids == [tokenizer.bos_id] + tokenizer.encode("Hello world")
    # a control token the user typed stays text, as in any template's content
    typed = model.tokenize_chat([Message("user", "<|im_start|>")]).ids.tolist()
    assert typed == [tokenizer.bos_id] + tokenizer.encode("<|im_start|>")


def test_a_model_with_a_template_is_not_completion_only(qwen):
    assert not load_model(qwen, num_ctx=64).completion_only


def test_prompt_command_names_the_default_template(templateless, tmp_path, capsys):
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "Hello world"}]))
    assert main(["prompt", str(templateless), "--messages", str(chat)]) == 0
    text, _, summary = capsys.readouterr().out.rpartition("--- ")
    assert text == "Hello world\n"
    assert "Ollama's default template {{ .Prompt }}" in summary and "chatml" not in summary
    assert summary.startswith("3 tokens")  # BOS, "Hello", " world"
