"""Against a REAL OpenAI-compatible server: llama-cpp-python's `python -m llama_cpp.server`
serving the 0.5B demo GGUF on loopback (started once for this module, stopped after).

- Greedy text and log-probabilities streamed through Lantern's client equal the server's
  own non-streamed answer. llama.cpp reuses its prompt cache: the first request of a
  prompt evaluates it in one batch, later ones re-run only its last token, which moves
  the log-probabilities in the 3rd decimal. So each comparison first warms the server
  with the same prompt, putting both requests in the same cache state; then they are
  compared exactly.
- `lantern list --server` and `lantern run --server ... --format jsonl --top-logprobs K`.
- Structured output through the server: `--format SCHEMA.json` and `--format json`; the
  server enforces them (this one takes a schema only in the older `json_object` form,
  which Lantern falls back to), and the answers parse and validate.
- The cross-check agrees with Lantern's local exact run within the measured tolerance
  (engine.remote.crosscheck.TOLERANCE), and fails when the tolerance is too tight.
"""

import json

import jsonschema
import pytest

from engine.chat.events import DoneEvent, TokenEvent
from engine.chat.options import Options
from engine.cli import main
from engine.launch import open_chat
from engine.remote.connection import Connection
from engine.remote.http import post_json
from engine.remote.session import open_remote_model

pytest.importorskip("llama_cpp.server", reason="needs llama-cpp-python[server] (test extra)")

ALIAS = "qwen05"
PROMPT = "Write a Python function that returns the square of a number."
TOKENS = 24


@pytest.fixture(scope="module")
def server(demo_05b):
    from tests.fixtures.llama_server import llama_server

    with llama_server(demo_05b, ALIAS) as url:
        yield url


def non_streamed(url: str, k: int) -> dict:
    body = {"model": ALIAS, "messages": [{"role": "user", "content": PROMPT}],
            "temperature": 0, "max_tokens": TOKENS, "logprobs": True, "top_logprobs": k}
    return post_json(Connection(url), "/v1/chat/completions", body, read_timeout=None)


def test_streamed_greedy_answer_equals_the_servers_own(server):
    non_streamed(server, 3)                                   # warm the prompt cache
    reference = non_streamed(server, 3)["choices"][0]
    session = open_chat(open_remote_model(Connection(server), ALIAS),
                        Options(temperature=0.0, num_predict=TOKENS), num_top=3)
    events = list(session.send(PROMPT))
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.done_reason == "length"
    assert done.text == reference["message"]["content"]
    expected = reference["logprobs"]["content"]
    assert [t.piece for t in tokens] == [e["token"] for e in expected]
    assert [t.logprob for t in tokens] == [e["logprob"] for e in expected]
    assert [[(a.piece, a.logprob) for a in t.top] for t in tokens] == [
        [(a["token"], a["logprob"]) for a in e["top_logprobs"]] for e in expected]
    assert all(t.logit is None for t in tokens)


def test_cli_list_and_run(server, capsys):
    assert main(["list", "--server", server]) == 0
    out = capsys.readouterr().out
    assert ALIAS in out and "(openai)" in out
    non_streamed(server, 4)
    reference = non_streamed(server, 4)["choices"][0]["logprobs"]["content"]
    assert main(["run", "--server", server, ALIAS, PROMPT, "--format", "jsonl",
                 "--top-logprobs", "4", "--temperature", "0",
                 "--num-predict", str(TOKENS)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1]["done"] is True and lines[-1]["done_reason"] == "length"
    assert [(t["token"], t["logprob"]) for t in lines[:-1]] == [
        (e["token"], e["logprob"]) for e in reference]
    assert all(len(t["top_logprobs"]) == 4 for t in lines[:-1])


def test_cli_run_with_a_schema_answers_valid_json(server, tmp_path, capsys):
    schema = {"type": "object", "properties": {
        "city": {"type": "string"}, "population": {"type": "integer", "minimum": 0},
        "landmarks": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "kind": {"enum": ["capital", "town"]}},
        "required": ["city", "population", "landmarks", "kind"], "additionalProperties": False}
    schema_file = tmp_path / "city.json"
    schema_file.write_text(json.dumps(schema))
    base = ["run", "--server", server, ALIAS, "Tell me about Lisbon.", "--temperature", "0",
            "--num-predict", "200"]
    assert main([*base, "--format", str(schema_file)]) == 0
    jsonschema.validate(json.loads(capsys.readouterr().out), schema)
    assert main([*base, "--format", "jsonl", "--format", str(schema_file)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1]["done_reason"] == "stop"
    jsonschema.validate(json.loads("".join(t["token"] for t in lines[:-1])), schema)


def test_cli_missing_model_and_raw_are_messages(server, capsys):
    assert main(["run", "--server", server, "nope", "hi"]) == 1
    assert f"has no model 'nope'; it offers: {ALIAS}" in capsys.readouterr().err
    assert main(["run", "--server", server, ALIAS, "hi", "--raw"]) == 1
    assert "raw prompts need a local model" in capsys.readouterr().err


def test_crosscheck_agrees_with_lantern_exact(server, demo_05b, capsys):
    args = ["crosscheck", str(demo_05b), PROMPT, "--server", server, "--remote-model", ALIAS,
            "--num-predict", str(TOKENS)]
    assert main(args) == 1                        # no digest from this server: must be asserted
    assert "--same-weights" in capsys.readouterr().err
    assert main(args + ["--same-weights", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["agrees"] and len(report["rows"]) == TOKENS
    assert report["prompt_tokens"] == report["server_prompt_tokens"]  # same template, same ids
    assert report["lantern_mode"] == "exact"
    assert sum(r["marked"] for r in report["rows"]) == 3
    assert 0 < report["max_gap"] <= report["tolerance"]
    # the same comparison fails past a tolerance below what it measured
    tight = f"{report['max_gap'] / 2:.6f}"
    assert main(args + ["--same-weights", "--tolerance", tight]) == 1
    table = capsys.readouterr().out
    assert "DISAGREE" in table and table.count(" *") == 3
