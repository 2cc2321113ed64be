"""Tokenizer tests on tiny vocabularies written by the test itself: pre-tokenizer regexes
(qwen2, llama-bpe, gpt2), NFC, added tokens, stop ids, BOS, refusals, the cache, streaming.
"""

import json
import os
import random
import unicodedata
from pathlib import Path

import gguf
import pytest
from tokenizers import Tokenizer as Backend
from tokenizers import decoders, models, pre_tokenizers

from engine.errors import CorruptModel, UnsupportedModel
from engine.gguf.reader import read_gguf
from engine.gguf.writing import add_value
from engine.tokenizer import StreamDecoder, load_tokenizer
from engine.tokenizer import entry as entry_module
from engine.tokenizer import load as tokenizer_load
from engine.tokenizer.build import build_tokenizer
from engine.tokenizer.byte_level import byte_to_char, piece_bytes, spell
from engine.tokenizer.encoder_process import EncoderProcess
from engine.tokenizer.load import cache_entry, check_tokenizer
from engine.tokenizer.vocab import read_vocabulary
from tests.data.tokenizer_corpus import generate
from tests.fixtures.synthetic_gguf import write_model

BYTES = [byte_to_char()[b] for b in range(256)]
MERGES = [
    ("h", "e"),
    ("l", "l"),
    ("he", "ll"),
    ("hell", "o"),
    ("Ġ", "w"),
    ("o", "r"),
    ("Ġw", "or"),
    ("l", "d"),
    ("Ġwor", "ld"),
    ("1", "2"),
    ("12", "3"),
    ("'", "s"),
    ("Ã", "©"),
    ("Ġ", "Ã©"),
]
NORMAL = BYTES + [a + b for a, b in MERGES] + ["abc"]  # "abc" has no merge path to it
CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
USER = ["<tool_call>"]
TOKENS = NORMAL + CONTROL + USER
TYPES = [1] * len(NORMAL) + [3] * len(CONTROL) + [4] * len(USER)
ID = {t: i for i, t in enumerate(TOKENS)}


def write_vocab_gguf(path: Path, **overrides: object) -> Path:
    """A GGUF holding only tokenizer metadata; ``overrides`` replace or drop (None) keys."""
    metadata: dict[str, object] = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.tokens": TOKENS,
        "tokenizer.ggml.token_type": TYPES,
        "tokenizer.ggml.merges": [f"{a} {b}" for a, b in MERGES],
        "tokenizer.ggml.bos_token_id": ID["<|endoftext|>"],
        "tokenizer.ggml.eos_token_id": ID["<|endoftext|>"],
        "tokenizer.ggml.add_bos_token": False,
    }
    for key, value in overrides.items():
        metadata[f"tokenizer.ggml.{key}"] = value
    writer = gguf.GGUFWriter(str(path), arch="qwen2")
    for key, value in metadata.items():
        if value is None:
            continue
        add_value(writer, key, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def tokenizer(tmp_path: Path, name: str = "vocab.gguf", **overrides: object):
    return load_tokenizer(write_vocab_gguf(tmp_path / name, **overrides))


def pieces(tok, text: str) -> list[str]:
    """The pre-tokenizer's split, by the pipeline the encoder's process runs."""
    pre_tokenizer = Backend.from_str(tok.pipeline()).pre_tokenizer
    return [piece for piece, _ in pre_tokenizer.pre_tokenize_str(text)]


def test_qwen2_encodes_merges_and_decodes_back(tmp_path):
    tok = tokenizer(tmp_path)
    assert tok.encode("hello world") == [ID["hello"], ID["Ġworld"]]
    assert tok.decode(tok.encode("hello world")) == "hello world"
    assert tok.vocab_size == len(TOKENS)
    assert tok.add_bos is False


def test_qwen2_normalises_to_nfc(tmp_path):
    tok = tokenizer(tmp_path)
    assert tok.encode("e\u0301") == tok.encode("é") == [ID["Ã©"]]
    assert tok.encode(" e\u0301") == [ID["ĠÃ©"]]


def test_llama_bpe_does_not_normalise(tmp_path):
    tok = tokenizer(tmp_path, pre="llama-bpe")
    assert tok.encode("é") == [ID["Ã©"]]
    assert tok.encode("e\u0301") == [ID["e"], ID["Ì"], ID[byte_to_char()[0x81]]]


@pytest.mark.parametrize(
    ("pre", "text", "expected"),
    [
        ("qwen2", "12345", ["1", "2", "3", "4", "5"]),
        ("llama-bpe", "12345", ["123", "45"]),
        ("gpt2", "12345", ["12345"]),
        ("qwen2", "IT'S", ["IT", "'S"]),
        ("llama-bpe", "we'LL", ["we", "'LL"]),
        ("gpt2", "IT'S", ["IT", "'", "S"]),
        ("gpt2", "it's", ["it", "'s"]),
        ("qwen2", "a\n\nb", ["a", "ĊĊ", "b"]),
        ("qwen2", "x  y", ["x", "Ġ", "Ġy"]),
        ("gpt2", "x  y", ["x", "Ġ", "Ġy"]),
        ("qwen2", "f(x);", ["f", "(x", ");"]),
        ("gpt2", "f(x);", ["f", "(", "x", ");"]),
        ("qwen2", "!hello", ["!hello"]),
        ("gpt2", "!hello", ["!", "hello"]),
    ],
)
def test_pre_tokenizer_splits(tmp_path, pre, text, expected):
    assert pieces(tokenizer(tmp_path, pre=pre), text) == expected


def test_gpt2_regex_equals_tokenizers_builtin_byte_level(tmp_path):
    tok = tokenizer(tmp_path, pre="gpt2")
    reference = Backend(models.BPE({t: i for i, t in enumerate(NORMAL)}, MERGES))
    reference.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    reference.decoder = decoders.ByteLevel()
    for text in generate.corpus()[::7]:
        assert tok.encode(text) == reference.encode(text).ids, text


def test_default_and_missing_pre_use_gpt2_regex(tmp_path):
    assert pieces(tokenizer(tmp_path, "a.gguf", pre="default"), "IT'S 123") == [
        "IT",
        "'",
        "S",
        "Ġ123",
    ]
    assert pieces(tokenizer(tmp_path, "b.gguf", pre=None), "IT'S 123") == ["IT", "'", "S", "Ġ123"]


def test_llama_bpe_keeps_whole_vocabulary_words(tmp_path):
    assert tokenizer(tmp_path, "a.gguf", pre="llama-bpe").encode("abc") == [ID["abc"]]
    assert tokenizer(tmp_path, "b.gguf", pre="qwen2").encode("abc") == [ID["a"], ID["b"], ID["c"]]


def test_normal_token_stored_as_plain_text_is_respelled(tmp_path):
    tok = tokenizer(tmp_path, pre="llama-bpe", tokens=[*TOKENS, "你"], token_type=[*TYPES, 1])
    assert tok.encode("你") == [len(TOKENS)]
    assert tok.id_to_piece(len(TOKENS)) == tok.decode([len(TOKENS)]) == "你"


def test_control_tokens_only_when_asked(tmp_path):
    tok = tokenizer(tmp_path)
    text = "<|im_start|>hello<|im_end|>"
    plain = tok.encode(text)
    assert not set(plain) & {ID[c] for c in CONTROL}
    assert tok.decode(plain) == text
    assert tok.encode(text, parse_special=True) == [
        ID["<|im_start|>"],
        ID["hello"],
        ID["<|im_end|>"],
    ]


def test_user_defined_tokens_are_always_whole(tmp_path):
    tok = tokenizer(tmp_path)
    assert tok.encode("hello<tool_call>") == [ID["hello"], ID["<tool_call>"]]
    assert tok.encode("hello<tool_call>", parse_special=True) == [ID["hello"], ID["<tool_call>"]]


def test_segments_parse_control_tokens_in_markup_only(tmp_path):
    tok = tokenizer(tmp_path)
    segments = [("<|im_start|>", True), ("hello <|im_end|>", False), ("<|im_end|>", True)]
    ids = tok.encode_segments(segments)
    assert ids[0] == ID["<|im_start|>"] and ids[-1] == ID["<|im_end|>"]
    assert ids.count(ID["<|im_end|>"]) == 1
    assert tok.decode(ids) == "<|im_start|>hello <|im_end|><|im_end|>"


def test_segments_join_text_across_boundaries(tmp_path):
    tok = tokenizer(tmp_path)
    # "hel" + "lo" is one word: split encoding would give [he, l, l, o].
    assert tok.encode_segments([("<|im_start|>hel", True), ("lo", False)]) == [
        ID["<|im_start|>"],
        ID["hello"],
    ]


def test_stop_ids_include_eos_and_end_of_turn_tokens(tmp_path):
    tok = tokenizer(tmp_path, eos_token_id=ID["<|im_end|>"])
    assert {ID["<|im_end|>"], ID["<|endoftext|>"]} <= tok.stop_ids
    assert ID["<|im_start|>"] not in tok.stop_ids
    assert tok.eos_id == ID["<|im_end|>"]


def test_eos_token_ids_list_is_read(tmp_path):
    tok = tokenizer(tmp_path, eos_token_ids=[ID["hello"]])
    assert ID["hello"] in tok.stop_ids


def test_bos_added_to_prompts_when_the_model_asks(tmp_path):
    tok = tokenizer(tmp_path, pre="llama-bpe", add_bos_token=True)
    bos = ID["<|endoftext|>"]
    assert tok.encode("hello") == [ID["hello"]]
    assert tok.encode_prompt([("hello", False)]) == [bos, ID["hello"]]
    assert tok.encode_prompt([("<|endoftext|>hello", True)]) == [bos, ID["hello"]]


@pytest.mark.parametrize(("pre", "expected"), [("llama-bpe", True), ("qwen2", False)])
def test_bos_default_when_the_file_does_not_say(tmp_path, pre, expected):
    assert tokenizer(tmp_path, pre=pre, add_bos_token=None).add_bos is expected


def test_pieces_for_display(tmp_path):
    tok = tokenizer(tmp_path)
    assert tok.id_to_piece(ID["Ġworld"]) == " world"
    assert tok.id_to_piece(ID[byte_to_char()[0xE4]]) == "<0xE4>"
    assert tok.id_to_piece(ID["<|im_end|>"]) == "<|im_end|>"
    assert tok.token_to_id(" world") == tok.token_to_id("Ġworld") == ID["Ġworld"]
    assert tok.token_to_id("<|im_end|>") == ID["<|im_end|>"]
    assert tok.token_to_id("not a token") is None


def test_unsupported_tokenizer_model_is_named(tmp_path):
    path = write_vocab_gguf(tmp_path / "t5.gguf", model="t5")
    with pytest.raises(UnsupportedModel) as error:
        load_tokenizer(path)
    message = str(error.value)
    assert all(part in message for part in ("'t5'", str(path), "llama (SentencePiece)", "gpt2",
                                            "qwen2"))


def test_byte_level_vocabulary_labelled_sentencepiece_is_named(tmp_path):
    path = write_vocab_gguf(tmp_path / "mislabelled.gguf", model="llama")
    with pytest.raises(CorruptModel, match="says llama .* spelled for byte-level BPE"):
        load_tokenizer(path)


def test_unknown_pre_tokenizer_is_named(tmp_path):
    path = write_vocab_gguf(tmp_path / "pre.gguf", pre="deepseek-llm")
    with pytest.raises(UnsupportedModel, match="deepseek-llm.*qwen2, llama-bpe, gpt2"):
        load_tokenizer(path)


def test_file_without_vocabulary_is_refused(tmp_path):
    path = write_vocab_gguf(tmp_path / "mmproj.gguf", model=None)
    with pytest.raises(UnsupportedModel, match="no tokenizer"):
        load_tokenizer(path)


@pytest.mark.parametrize(
    "overrides",
    [
        {"merges": ["h e", "q zz"]},
        {"merges": ["h e x"]},
        {"token_type": [1, 1]},
        {"eos_token_id": len(TOKENS) + 5},
    ],
)
def test_damaged_vocabulary_is_corrupt_model(tmp_path, overrides):
    with pytest.raises(CorruptModel):
        load_tokenizer(write_vocab_gguf(tmp_path / "bad.gguf", **overrides))


def test_cache_is_written_then_used(tmp_path, monkeypatch):
    path = write_vocab_gguf(tmp_path / "m.gguf")
    entry = cache_entry(path)
    assert not entry.exists()
    first = load_tokenizer(path)
    assert entry.exists()

    def no_build(*_):
        raise AssertionError("rebuilt although cached")

    monkeypatch.setattr(EncoderProcess, "build", no_build)
    second = load_tokenizer(path)
    assert second.encode("hello <|im_end|>", parse_special=True) == first.encode(
        "hello <|im_end|>", parse_special=True
    )
    assert second.info == first.info
    built, _ = build_tokenizer(read_vocabulary(read_gguf(path).metadata, path))
    assert second.pipeline() == built.to_str()  # model, added tokens, ids


def test_a_cached_entry_adds_its_added_tokens_in_one_call_per_run(tmp_path, monkeypatch):
    """Each add_tokens call rebuilds the matcher of every added token so far: added one at
    a time, Gemma 3's thousands made a cached load slower than building from the GGUF."""
    unused = [f"<unused{i}>" for i in range(300)]
    path = write_vocab_gguf(tmp_path / "m.gguf", tokens=TOKENS + unused,
                            token_type=TYPES + [4] * len(unused))
    load_tokenizer(path).close()
    calls: list[int] = []

    class Counted:
        """The pipeline, with its add_tokens / add_special_tokens calls counted."""

        def __init__(self, real: Backend) -> None:
            object.__setattr__(self, "real", real)

        @classmethod
        def from_str(cls, text: str) -> "Counted":
            return cls(Backend.from_str(text))

        def __getattr__(self, name: str):
            value = getattr(self.real, name)
            if name in ("add_tokens", "add_special_tokens"):
                return lambda tokens: calls.append(len(tokens)) or value(tokens)
            return value

        def __setattr__(self, name: str, value) -> None:
            setattr(self.real, name, value)

    monkeypatch.setattr(entry_module, "Backend", Counted)
    rebuilt = entry_module.pipeline(cache_entry(path).read_bytes().split(b"\n"))
    assert calls == [len(CONTROL), len(USER) + len(unused)]   # the controls, then the rest
    assert rebuilt.token_to_id("<unused299>") == len(TOKENS) + 299


def test_check_tokenizer_reads_the_vocabulary_only_until_it_is_cached(tmp_path, monkeypatch):
    bad = write_vocab_gguf(tmp_path / "bad.gguf", merges=["h e x"])
    with pytest.raises(CorruptModel):
        check_tokenizer(read_gguf(bad).metadata, bad)
    path = write_vocab_gguf(tmp_path / "m.gguf")
    reads: list[Path] = []

    def counted(metadata, source):
        reads.append(Path(source))
        return read_vocabulary(metadata, source)

    monkeypatch.setattr(tokenizer_load, "read_vocabulary", counted)
    check_tokenizer(read_gguf(path).metadata, path)
    assert reads == [path]                       # not cached: the vocabulary is read
    load_tokenizer(path).close()
    reads.clear()
    check_tokenizer(read_gguf(path).metadata, path)
    assert reads == []                           # cached: it was checked when it was built


def test_corrupt_cache_entry_is_rebuilt(tmp_path):
    path = write_vocab_gguf(tmp_path / "m.gguf")
    expected = load_tokenizer(path).encode("hello world")
    entry = cache_entry(path)
    entry.write_text('{"info": {"vocab_size": 3}, "tokenizer": "{not json')
    assert load_tokenizer(path).encode("hello world") == expected
    head = json.loads(entry.read_text().splitlines()[0])  # the rewritten entry's first line
    assert head["info"]["vocab_size"] == len(TOKENS)


def test_cache_key_follows_content_identity(tmp_path):
    digest = "ab" * 32
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        write_vocab_gguf(tmp_path / folder / f"sha256-{digest}")
    assert cache_entry(tmp_path / "one" / f"sha256-{digest}") == cache_entry(
        tmp_path / "two" / f"sha256-{digest}"
    )

    plain = write_vocab_gguf(tmp_path / "plain.gguf")
    before = cache_entry(plain)
    write_vocab_gguf(plain, pre="llama-bpe")
    stat = plain.stat()
    os.utime(plain, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert cache_entry(plain) != before
    assert load_tokenizer(plain).info.pre == "llama-bpe"


def byte_id(value: int) -> int:
    return ID[byte_to_char()[value]]


def test_stream_holds_back_partial_characters(tmp_path):
    tok = tokenizer(tmp_path)
    stream = StreamDecoder(tok)
    assert [stream.push(byte_id(b)) for b in "你".encode()] == ["", "", "你"]
    assert [stream.push(byte_id(b)) for b in "👍".encode()] == ["", "", "", "👍"]
    assert stream.push(ID["hello"]) == "hello"
    assert stream.flush() == ""


def test_stream_flushes_unfinished_bytes_like_decode(tmp_path):
    tok = tokenizer(tmp_path)
    ids = [ID["hello"], byte_id(0xE4), byte_id(0xBD)]
    stream = StreamDecoder(tok)
    assert "".join(stream.push(i) for i in ids) == "hello"
    assert stream.flush() == "\ufffd" == tok.decode(ids)[len("hello") :]


def test_stream_equals_decode_for_random_bytes(tmp_path):
    tok = tokenizer(tmp_path)
    rng = random.Random(7)
    lead = [0xC3, 0xE4, 0xF0, 0xED, 0xF4, 0xC0, 0xFF, 0x80, 0xBF]
    for _ in range(300):
        data = bytes(
            rng.choice(lead) if rng.random() < 0.5 else rng.randrange(256) for _ in range(12)
        )
        ids = [byte_id(b) for b in data]
        stream = StreamDecoder(tok)
        deltas = [stream.push(i) for i in ids] + [stream.flush()]
        assert "".join(deltas) == tok.decode(ids) == data.decode("utf-8", errors="replace")


def test_byte_alphabet_round_trips():
    assert len(set(BYTES)) == 256
    assert piece_bytes(spell("a 你\n")) == "a 你\n".encode()
    assert piece_bytes("<|im_end|>") == b"<|im_end|>"
    assert piece_bytes("<｜end▁of▁sentence｜>") == "<｜end▁of▁sentence｜>".encode()


def test_corpus_file_is_the_generator_output():
    assert generate.CORPUS.read_text(encoding="ascii") == generate.render()
    assert len(generate.corpus()) >= 2000


# Whole model files from the shared fixture (tests/fixtures/synthetic_gguf.py).


@pytest.mark.parametrize(
    ("arch", "pre"), [("qwen2", "qwen2"), ("llama", "llama-bpe"), ("qwen2", "gpt2")]
)
def test_fixture_model_matches_hf(tmp_path, arch, pre):
    transformers = pytest.importorskip("transformers")
    path = write_model(tmp_path / "m.gguf", arch, overrides={"tokenizer.ggml.pre": pre})
    ours = load_tokenizer(path)
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=path.name)
    # The one deliberate difference: Llama 3's own tokenizer.json and llama.cpp keep a word
    # that is itself in the vocabulary whole (ignore_merges); HF's GGUF loader does not.
    assert hf.backend_tokenizer.model.ignore_merges is False
    hf.backend_tokenizer.model.ignore_merges = json.loads(ours.pipeline())["model"]["ignore_merges"]
    lines = [unicodedata.normalize("NFC", line) for line in generate.corpus()[::5]]
    plain = hf(lines, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    parsed = hf(lines, add_special_tokens=False)["input_ids"]
    for line, plain_ids, parsed_ids in zip(lines, plain, parsed, strict=True):
        assert ours.encode(line) == plain_ids, line
        assert ours.encode(line, parse_special=True) == parsed_ids, line
        assert ours.decode(parsed_ids) == hf.decode(parsed_ids, skip_special_tokens=False)


def test_fixture_model_with_its_vocab_labelled_sentencepiece_is_refused(tmp_path):
    path = write_model(tmp_path / "m.gguf", "llama", overrides={"tokenizer.ggml.model": "llama"})
    with pytest.raises(CorruptModel, match=r"m\.gguf: tokenizer.ggml.model says llama"):
        load_tokenizer(path)
