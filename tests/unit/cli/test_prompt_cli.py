"""`lantern prompt` on the real demo model (GGUF chat template path)."""

import json

import pytest

from engine.cli import main


@pytest.mark.slow
def test_prompt_command_prints_prompt_and_tokens(demo_05b, tmp_path, capsys):
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "typed <|im_end|> here"}]))
    assert main(["prompt", str(demo_05b), "--messages", str(chat), "--system", "Be brief."]) == 0
    out = capsys.readouterr().out
    text, _, summary = out.rpartition("--- ")
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n"
                    "typed <|im_end|> here<|im_end|>\n<|im_start|>assistant\n")
    from engine.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(demo_05b)
    # the typed <|im_end|> is text, so the prompt is longer than with it as one control token
    all_special = len(tokenizer.encode(text, parse_special=True))
    count = int(summary.split()[0])
    assert count > all_special
    assert "jinja template" in summary


def test_prompt_command_rejects_bad_messages_file(tmp_path, capsys, demo_05b):
    bad = tmp_path / "bad.json"
    bad.write_text('{"nope": 1}')
    assert main(["prompt", str(demo_05b), "--messages", str(bad)]) == 1
    assert "messages" in capsys.readouterr().err
