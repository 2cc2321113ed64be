"""The one decode loop, through LocalSession: KV reuse across turns equals a fresh prefill,
edit/regenerate truncate the cache, num_ctx overflow drops old turns, cancel is prompt,
seeded sampling is reproducible. Tiny random models keep this fast; the real 0.5B model
checks the behaviour a user sees."""

from __future__ import annotations

import json
import threading
import time

import pytest

from engine.chat.events import DoneEvent, NoticeEvent, TokenEvent
from engine.chat.messages import Message
from engine.chat.options import Options
from engine.cli import main
from engine.cpu import cpu_info
from engine.errors import GenerationError
from engine.native import ENV, custom_ops
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from tests.fixtures.synthetic_gguf import TextSpec

GREEDY = Options(temperature=0, num_predict=8)


@pytest.fixture(scope="module")
def tiny(synthetic_gguf):
    return synthetic_gguf("qwen2", TextSpec(vocab=400), seed=3)


def answer(events) -> tuple[list[int], DoneEvent, list]:
    tokens, done, notices = [], None, []
    for event in events:
        if isinstance(event, TokenEvent):
            tokens.append(event.id)
        elif isinstance(event, DoneEvent):
            done = event
        elif isinstance(event, NoticeEvent):
            notices.append(event.message)
    assert done is not None, "generation ended without a DoneEvent"
    return tokens, done, notices


def test_second_turn_reuses_cache_and_equals_fresh_prefill(tiny):
    model = load_model(tiny, num_ctx=512)
    chat = LocalSession(model, GREEDY)
    first, _, _ = answer(chat.send("Hello world"))
    second, done, _ = answer(chat.send("the thing"))
    conversation_len = len(chat.last_prompt)
    assert done.prompt_eval_count < conversation_len, "the second turn re-ran the whole prompt"

    fresh_model = load_model(tiny, num_ctx=512)
    fresh = LocalSession(fresh_model, GREEDY, messages=[
        Message("user", "Hello world"), Message("assistant", chat.messages[1].content)])
    again, fresh_done, _ = answer(fresh.send("the thing"))
    assert fresh_done.prompt_eval_count == conversation_len
    assert again == second


def test_regenerate_and_edit_truncate_to_the_common_prefix(tiny):
    model = load_model(tiny, num_ctx=512)
    chat = LocalSession(model, GREEDY)
    first, done, _ = answer(chat.send("Hello world"))
    prompt_len = done.prompt_eval_count
    again, redo, _ = answer(chat.regenerate())
    assert again == first                       # greedy: same answer
    assert redo.prompt_eval_count == 1          # whole prompt cached: only the last token re-runs
    assert [m.role for m in chat.messages] == ["user", "assistant"]

    _, edited, _ = answer(chat.edit_last_user("Hello there"))
    assert 1 < edited.prompt_eval_count < prompt_len
    assert chat.messages[0].content == "Hello there"


def test_overflow_drops_oldest_turns_and_says_so(tiny):
    model = load_model(tiny, num_ctx=96)
    chat = LocalSession(model, Options(temperature=0, num_predict=4, num_ctx=96))
    notices = []
    for turn in range(6):
        _, done, said = answer(chat.send(f"turn {turn}: the thing with the world"))
        notices += said
        assert done.done_reason in ("stop", "length")
        assert len(chat.last_prompt) <= 96
    assert notices and "left out" in notices[-1]
    assert chat.messages[-2].content.startswith("turn 5")


def test_overflow_drops_the_fewest_turns_that_fit_with_few_renders(tiny, monkeypatch):
    model = load_model(tiny, num_ctx=256)
    chat = LocalSession(model, Options(temperature=0, num_predict=16, num_ctx=256))
    chat.messages = [Message("user" if i % 2 == 0 else "assistant", f"turn {i}: the world")
                     for i in range(121)]
    renders = []
    tokenize = model.tokenize_chat
    monkeypatch.setattr(model, "tokenize_chat",
                        lambda messages, **kw: renders.append(1) or tokenize(messages, **kw))
    prompt, dropped = chat._fit()
    # the rule, one render per count: the fewest oldest turns dropped that leave 16 tokens
    lengths = [len(tokenize(chat.messages[d:])) for d in range(len(chat.messages))]
    assert dropped == next(d for d, n in enumerate(lengths) if n + 16 <= 256) > 0
    assert len(prompt) == lengths[dropped] and len(renders) <= 9


def test_a_message_longer_than_the_context_is_a_clear_error(tiny):
    from engine.errors import GenerationError

    model = load_model(tiny, num_ctx=32)
    chat = LocalSession(model, Options(temperature=0, num_ctx=32))
    with pytest.raises(GenerationError, match="num_ctx"):
        answer(chat.send("the world " * 40))


@pytest.mark.timing     # the latency is judged against the steps timed here
def test_cancel_from_another_thread_stops_within_a_token(tiny):
    model = load_model(tiny, num_ctx=4096)
    chat = LocalSession(model, Options(temperature=1.0, top_k=0, top_p=1.0, seed=1,
                                      num_predict=2000))
    steps, done = [], None
    for event in chat.send("Hello"):
        if isinstance(event, TokenEvent):
            steps.append(event.elapsed_ns)
            if len(steps) == 5:
                threading.Timer(0.0, chat.cancel).start()
                cancelled_at = time.perf_counter()
        elif isinstance(event, DoneEvent):
            done = event
    assert done is not None and done.done_reason == "cancel"
    latency = time.perf_counter() - cancelled_at
    assert latency < 1.0 + 5 * max(steps) / 1e9
    assert len(steps) < 50
    assert chat.messages[-1].role == "assistant"   # the partial answer is kept


def test_seeded_sampling_is_reproducible(tiny):
    options = Options(temperature=0.9, seed=1234, num_predict=12)
    runs = []
    for _ in range(2):
        chat = LocalSession(load_model(tiny, num_ctx=256), options)
        runs.append(answer(chat.send("Hello world"))[0])
    assert runs[0] == runs[1]


def test_jsonl_stream_schema(tiny, capsys):
    code = main(["run", str(tiny), "Hello", "--format", "jsonl", "--top-logprobs", "3",
                 "--num-predict", "4", "--temperature", "0"])
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    *tokens, final = lines
    for token in tokens:
        assert set(token) == {"id", "token", "logprob", "top_logprobs"}
        assert len(token["top_logprobs"]) == 3
        assert set(token["top_logprobs"][0]) == {"id", "token", "logprob", "logit"}
        assert token["logprob"] <= 0
        assert token["top_logprobs"][0]["logprob"] >= token["top_logprobs"][-1]["logprob"]
    assert final["done"] is True
    assert final["done_reason"] in ("stop", "length")
    for key in ("prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration",
                "load_duration", "total_duration"):
        assert isinstance(final[key], int) and final[key] >= 0
    assert final["eval_count"] == len(tokens)


def test_run_speculates_by_default_in_both_modes(tiny, capsys, monkeypatch):
    """auto is prompt lookup on the CPU, fast and exact mode alike: no note about answers
    that may differ (the CUDA note is engine.runtime.speculation's, tested there).
    --verbose names the CPU and what multiplies by the weights: Lantern's GGUF matmul, or
    MatMulNBits with (in fast mode) the kernel choices made for this CPU."""
    args = ["run", str(tiny), "Hello", "--num-predict", "4", "--temperature", "0"]
    modes = (([], "matmul: Lantern's GGUF matmul"), (["--exact"], "matmul: Lantern's GGUF matmul"))
    if not custom_ops().available:
        modes = (([], "kernels: int8 activations"), (["--exact"], "weights repacked"))
    for mode, kernels in modes:
        assert main([*args, *mode, "--verbose"]) == 0
        err = capsys.readouterr().err
        assert "speculative decoding: ngram" in err and "may differ" not in err
        assert f"note: CPU {cpu_info().model}" in err and kernels in err
        assert main([*args, *mode, "--speculate", "off", "--verbose"]) == 0
        assert "speculative decoding: off" in capsys.readouterr().err
    monkeypatch.setenv(ENV, "off")  # the library's absence is said, with why
    assert main([*args, "--verbose"]) == 0
    assert f"MatMulNBits, weights repacked (turned off by {ENV})" in capsys.readouterr().err


def test_image_flag_without_vision_is_a_clear_message(tiny, capsys, tmp_path):
    image = tmp_path / "x.png"
    image.write_bytes(b"not really")
    assert main(["run", str(tiny), "describe", "--image", str(image)]) == 1
    assert "image" in capsys.readouterr().err


# -- the real 0.5B model -------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen(demo_05b):
    return load_model(demo_05b, num_ctx=2048)


@pytest.mark.slow
def test_real_model_answers_nihao_in_chinese(qwen):
    chat = LocalSession(qwen, Options(temperature=0, num_predict=16))
    _, done, _ = answer(chat.send("你好"))
    assert any("\u4e00" <= ch <= "\u9fff" for ch in done.text), done.text


@pytest.mark.slow
def test_real_model_stop_string_straddling_tokens_is_never_shown(qwen):
    prompt = "Write a Python function that checks whether a number is prime."
    chat = LocalSession(qwen, Options(temperature=0, num_predict=24))
    _, plain, _ = answer(chat.send(prompt))
    assert plain.text.startswith("Here's a Python function to check if a number is prime")
    stopped = LocalSession(qwen, Options(temperature=0, num_predict=24, stop=("Python func",)))
    shown = []
    for event in stopped.send(prompt):
        if isinstance(event, TokenEvent):
            shown.append(event.text)
        elif isinstance(event, DoneEvent):
            done = event
    assert done.done_reason == "stop"
    assert "".join(shown) + done.tail == done.text == "Here's a "


def test_sessions_sharing_a_model_never_reuse_each_others_cache(tiny):
    model = load_model(tiny, num_ctx=512)
    first = LocalSession(model, GREEDY)
    answer(first.send("Hello world"))
    other = LocalSession(model, GREEDY)
    answer(other.send("the thing with the world"))     # overwrites the one KV cache
    _, done, _ = answer(first.send("and then?"))

    fresh = LocalSession(load_model(tiny, num_ctx=512), GREEDY, messages=list(first.messages[:2]))
    answer(fresh.send("and then?"))
    assert done.prompt_eval_count > 1
    assert first.messages[-1].content == fresh.messages[-1].content


def test_continue_goes_on_from_the_answer_so_far_with_the_cache_kept(tiny):
    model = load_model(tiny, num_ctx=512)
    chat = LocalSession(model, Options(temperature=0, num_predict=6))
    _, first, _ = answer(chat.send("Hello world"))
    _, more, _ = answer(chat.continue_answer())
    assert [m.role for m in chat.messages] == ["user", "assistant"]
    assert chat.messages[-1].content == first.text + more.text
    # the answer so far is the end of the prompt: only what the cache lacks is evaluated
    assert more.prompt_eval_count < len(chat.last_prompt) // 2
    whole = LocalSession(load_model(tiny, num_ctx=512), Options(temperature=0, num_predict=12))
    _, once, _ = answer(whole.send("Hello world"))
    assert once.text.startswith(first.text)


def test_continue_needs_an_answer_to_go_on_from(tiny):
    chat = LocalSession(load_model(tiny, num_ctx=512), GREEDY,
                       messages=[Message("user", "Hello")])
    with pytest.raises(GenerationError, match="no answer to continue"):
        answer(chat.continue_answer())
