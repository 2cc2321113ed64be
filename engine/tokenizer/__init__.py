"""GGUF vocabulary -> tokenizer (byte-level BPE or SentencePiece), and a streaming detokenizer.

tokenizer = load_tokenizer(path)          # cached after the first build
ids = tokenizer.encode(user_text)         # control-token strings stay plain text
ids = tokenizer.encode_prompt([(markup, True), (user_text, False), ...])
stream = StreamDecoder(tokenizer); text = stream.push(token_id) ... + stream.flush()
"""

from engine.tokenizer.load import load_tokenizer
from engine.tokenizer.stream import StreamDecoder
from engine.tokenizer.tokenizer import Tokenizer

__all__ = ["StreamDecoder", "Tokenizer", "load_tokenizer"]
