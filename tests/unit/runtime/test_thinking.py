"""Thinking models: the streaming splitter, the prompt options that turn thinking on and
off, and a real LocalSession on a tiny model whose output goes through the splitter."""

from __future__ import annotations

import pytest

from engine.prompt import render_prompt
from engine.runtime.thinking import ThinkingSplitter, prompt_opens_thinking

REPLY = "<think>\nLet me count: 1, 2.\n</think>\n\nThe answer is 2."


def split(deltas: list[str], opened: bool = False) -> tuple[str, str, list[bool]]:
    splitter = ThinkingSplitter(opened)
    thinking, answer, inside = [], [], []
    for delta in deltas:
        part = splitter.push(delta)
        thinking.append(part.thinking)
        answer.append(part.answer)
        inside.append(part.in_thinking)
    end = splitter.flush()
    return "".join(thinking) + end.thinking, "".join(answer) + end.answer, inside


def chunks(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 100])
def test_tags_cut_anywhere_give_the_same_parts(size: int) -> None:
    thinking, answer, _ = split(chunks(REPLY, size))
    assert thinking == "Let me count: 1, 2.\n"
    assert answer == "The answer is 2."


def test_tokens_are_marked_as_thinking_until_the_close_tag() -> None:
    deltas = ["<think>", "\n", "hmm", "</think>", "\n\n", "Yes", "."]
    thinking, answer, inside = split(deltas)
    assert (thinking, answer) == ("hmm", "Yes.")
    assert inside == [True, True, True, True, False, False, False]


def test_a_template_that_opened_the_section_starts_inside_it() -> None:
    thinking, answer, inside = split(["Weigh", " it", "</think>", "Done"], opened=True)
    assert (thinking, answer) == ("Weigh it", "Done")
    assert inside[0] is True


def test_a_model_that_never_thinks_passes_through_unchanged() -> None:
    text = "Plain answer with a <think> tag later on."
    thinking, answer, inside = split(chunks(text, 3))
    assert thinking == ""
    assert answer == text
    assert not any(inside)


def test_an_unfinished_section_stays_thinking_and_a_partial_tag_is_released() -> None:
    thinking, answer, _ = split(["<think>", "still going </th"])
    assert thinking == "still going </th"
    assert answer == ""
    assert split(["<thi"])[1] == "<thi"          # never became a tag: it was text


def test_prompt_tail_says_whether_thinking_is_open() -> None:
    assert prompt_opens_thinking("<｜Assistant｜><think>\n")
    assert not prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not prompt_opens_thinking("<|im_start|>assistant\n")


QWEN3_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n{% endif %}{% endif %}"
)
OLLAMA_THINK = (
    "{{ range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
    "<|im_start|>assistant\n{{ if and .IsThinkSet (not .Think) }}<think>\n\n</think>\n\n"
    "{{ else if .Think }}<think>\n{{ end }}"
)


@pytest.mark.parametrize("think, closed", [(None, False), (True, False), (False, True)])
def test_jinja_templates_get_enable_thinking(think, closed: bool) -> None:
    text = render_prompt([{"role": "user", "content": "Hi"}], chat_template=QWEN3_LIKE,
                         think=think).text
    assert text.endswith("<think>\n\n</think>\n\n") is closed


def test_ollama_templates_get_think_and_is_think_set() -> None:
    messages = [{"role": "user", "content": "Hi"}]
    unset = render_prompt(messages, template_layer=OLLAMA_THINK).text
    on = render_prompt(messages, template_layer=OLLAMA_THINK, think=True).text
    off = render_prompt(messages, template_layer=OLLAMA_THINK, think=False).text
    assert unset.endswith("assistant\n")
    assert prompt_opens_thinking(on)
    assert off.endswith("<think>\n\n</think>\n\n") and not prompt_opens_thinking(off)


@pytest.fixture(scope="module")
def thinking_model(synthetic_gguf):
    from engine.runtime.loader import load_model
    from tests.fixtures.synthetic_gguf import TextSpec

    model = load_model(synthetic_gguf("qwen2", TextSpec(vocab=400), seed=5), num_ctx=256)
    model.template = OLLAMA_THINK
    return model


def run_session(model, think):
    from engine.chat.events import DoneEvent, TokenEvent
    from engine.chat.options import Options
    from engine.runtime.session import LocalSession

    chat = LocalSession(model, Options(temperature=0, num_predict=6), think=think)
    events = list(chat.send("Hello world"))
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    done = next(e for e in events if isinstance(e, DoneEvent))
    return chat, tokens, done


def test_a_session_whose_template_opens_thinking_streams_it_as_thinking(thinking_model):
    chat, tokens, done = run_session(thinking_model, True)
    assert tokens and all(t.thinking and t.text == "" for t in tokens)
    assert done.text == ""
    assert done.thinking and done.thinking.startswith("".join(t.thinking_text for t in tokens))
    assert chat.messages[-1].thinking == done.thinking       # history keeps both parts


def test_thinking_off_streams_the_answer_and_marks_no_token(thinking_model):
    chat, tokens, done = run_session(thinking_model, False)
    assert tokens and not any(t.thinking for t in tokens)
    assert done.thinking == ""
    assert done.text == "".join(t.text for t in tokens) + done.tail and done.text.strip()
    assert chat.messages[-1].content == done.text


@pytest.fixture(scope="module")
def thinking_store(tmp_path_factory):
    from engine.catalog.importer import import_gguf
    from engine.store import Store
    from tests.fixtures.synthetic_gguf import TextSpec, write_model

    root = tmp_path_factory.mktemp("store")
    path = write_model(root / "tiny.gguf", "qwen2", TextSpec(vocab=400), seed=5)
    import_gguf(Store.open(root / "models"), path, "thinker", template=OLLAMA_THINK)
    return root / "models"


@pytest.mark.parametrize("flags, shows_thinking", [
    (["--think"], True), (["--think", "--hidethinking"], False), (["--think=false"], False)])
def test_lantern_run_think_flags(thinking_store, capsys, flags, shows_thinking) -> None:
    from engine.cli import main

    code = main(["run", "thinker", "Hello", "--temperature", "0", "--num-predict", "5",
                 "--models-dir", str(thinking_store), *flags])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("Thinking...\n") is shows_thinking
    if flags == ["--think", "--hidethinking"]:
        assert out == "\n"                 # the random model never leaves its thinking
    if flags == ["--think=false"]:
        assert out.strip()                 # it answers instead


def test_lantern_run_rejects_an_unknown_think_value(thinking_store, capsys) -> None:
    from engine.cli import main

    with pytest.raises(SystemExit):
        main(["run", "thinker", "Hello", "--think", "maybe", "--models-dir",
              str(thinking_store)])
    assert "--think takes true, false, high, medium or low" in capsys.readouterr().err


def test_the_terminal_shows_thinking_as_ollama_run_does(monkeypatch) -> None:
    from engine.cli.run_command import ThinkingPrinter

    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    shown = ThinkingPrinter(hide=False)
    out = shown.thinking("Count") + shown.thinking(" them.") + shown.answer("") + \
        shown.answer("Three.") + shown.answer(" Done")
    assert out == "Thinking...\nCount them.\n...done thinking.\n\nThree. Done"
    hidden = ThinkingPrinter(hide=True)
    assert hidden.thinking("Count") + hidden.answer("Three.") == "Three."


def test_a_model_that_thinks_although_told_not_to_gets_a_notice(thinking_model, monkeypatch):
    from engine.chat.events import DoneEvent, NoticeEvent, TokenEvent
    from engine.chat.options import Options
    from engine.runtime.session import LocalSession

    pieces = ["<think>", "hm", "</think>", "Yes"]

    def run(self, prompt, options, **_):
        for i, piece in enumerate(pieces):
            yield TokenEvent(i, i, piece, piece, 0.0, 0.0, 0.0, (), 1)
        yield DoneEvent("stop", "".join(pieces), "", len(prompt), 1, 4, 1, 0, 2)
    monkeypatch.setattr("engine.runtime.generate.Generator.run", run)
    thinking_model.template = QWEN3_LIKE_OLLAMA_IGNORING_THINK
    try:
        events = list(LocalSession(thinking_model, Options(), think=False).send("Hi"))
    finally:
        thinking_model.template = OLLAMA_THINK
    notices = [e.message for e in events if isinstance(e, NoticeEvent)]
    assert notices and "think=false is ignored" in notices[0]
    assert events[-1].text == "Yes" and events[-1].thinking == "hm"


QWEN3_LIKE_OLLAMA_IGNORING_THINK = (
    "{{ range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
    "<|im_start|>assistant\n"
)


def test_interactive_set_think_and_nothink(thinking_model, capsys) -> None:
    from engine.chat.options import Options
    from engine.cli.run_command import _command
    from engine.runtime.session import LocalSession

    chat = LocalSession(thinking_model, Options())
    _command(chat, "/set nothink", {})
    assert chat.think is False and "Set 'nothink' mode." in capsys.readouterr().out
    _command(chat, "/set think", {})
    assert chat.think is True


def test_lantern_prompt_shows_what_think_does_to_the_template(thinking_store, tmp_path,
                                                               capsys) -> None:
    from engine.cli import main

    messages = tmp_path / "chat.json"
    messages.write_text('[{"role": "user", "content": "Hi"}]')
    base = ["prompt", "thinker", "--messages", str(messages), "--models-dir",
            str(thinking_store)]
    assert main([*base, "--think=false"]) == 0
    assert "<|im_start|>assistant\n<think>\n\n</think>\n\n" in capsys.readouterr().out
    assert main([*base, "--think"]) == 0
    assert "<|im_start|>assistant\n<think>\n---" in capsys.readouterr().out
