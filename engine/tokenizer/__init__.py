"""GGUF vocabulary -> tokenizer (byte-level BPE or SentencePiece), and a streaming detokenizer.

tokenizer = load_tokenizer(path)          # cached after the first build
ids = tokenizer.encode(user_text)         # control-token strings stay plain text
ids = tokenizer.encode_prompt([(markup, True), (user_text, False), ...])
stream = StreamDecoder(tokenizer); text = stream.push(token_id) ... + stream.flush()

The names are imported on first use: each tokenizer's encoder process imports this package
too, and needs none of the GGUF reading behind ``load_tokenizer``.
"""

from importlib import import_module

_HOMES = {"StreamDecoder": "engine.tokenizer.stream", "Tokenizer": "engine.tokenizer.tokenizer",
          "load_tokenizer": "engine.tokenizer.load"}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_HOMES[name]), name)
