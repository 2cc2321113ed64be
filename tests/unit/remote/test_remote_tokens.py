"""The cross-check's token matching on the real Qwen vocabulary: llama-cpp-python sends a
token's text with the bytes of a split character dropped; Ollama sends the bytes."""

from types import SimpleNamespace

import pytest

from engine.errors import RemoteError
from engine.remote.crosscheck import token_ids
from engine.remote.records import ServerToken
from engine.tokenizer import load_tokenizer


@pytest.fixture(scope="module")
def model(demo_05b):
    return SimpleNamespace(tokenizer=load_tokenizer(demo_05b), name="demo")


def ids_of(model, pieces: list[bytes]) -> list[int]:
    from engine.tokenizer.byte_level import byte_to_char

    table = byte_to_char()
    return [model.tokenizer.token_to_id("".join(table[b] for b in p)) for p in pieces]


def test_split_characters_are_matched_by_their_bytes(model):
    # "1. 春季" as the server generated it: " " + the first two bytes of 春, then its last
    pieces = [b"1", b".", " 春".encode()[:3], "春".encode()[2:], "季".encode()]
    expected = ids_of(model, pieces)
    assert None not in expected
    lossy = [ServerToken(p.decode("utf-8", "ignore"), -0.1, ()) for p in pieces]
    assert [t.piece for t in lossy][2:4] == [" ", ""]       # what llama-cpp-python sends
    assert token_ids(model, lossy, "1. 春季", "h") == expected
    with_bytes = [ServerToken("?", -0.1, (), p) for p in pieces]
    assert token_ids(model, with_bytes, "1. 春季", "h") == expected


def test_another_tokenizer_is_named(model):
    with pytest.raises(RemoteError, match="another tokenizer"):
        token_ids(model, [ServerToken("Hel", -0.1, ()), ServerToken("lo", -0.1, ())],
                  "Hi there", "h")
