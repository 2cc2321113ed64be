"""GPT-2's byte alphabet: byte-level BPE vocabularies spell each of the 256 byte values as one
printable character ("Ġ" is the space byte), so that every token can be stored as a string.

Added tokens (``<|im_end|>``) are stored as their plain text instead; a token that uses any
character outside the alphabet is therefore read as UTF-8 text, as llama.cpp and the
``tokenizers`` ByteLevel decoder both do.
"""

from functools import cache


@cache
def byte_to_char() -> dict[int, str]:
    """The 256-entry byte -> character table: printable Latin-1 bytes stand for themselves, the
    others are shifted to code points from U+0100 upwards, in byte order."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table


@cache
def char_to_byte() -> dict[str, int]:
    return {c: b for b, c in byte_to_char().items()}


def spell(text: str) -> str:
    """Text -> its UTF-8 bytes written in the byte alphabet (how the vocabulary stores it)."""
    table = byte_to_char()
    return "".join(table[b] for b in text.encode("utf-8"))


def piece_bytes(piece: str) -> bytes:
    """A vocabulary entry -> the bytes it stands for."""
    table = char_to_byte()
    try:
        return bytes(table[c] for c in piece)
    except KeyError:
        return piece.encode("utf-8")


def shown_bytes(data: bytes) -> str:
    """Bytes as a person reads them: UTF-8 text, with bytes that are not UTF-8 on their
    own (half a Chinese character) shown as <0xE4>."""
    shown: list[str] = []
    while data:
        try:
            shown.append(data.decode("utf-8"))
            break
        except UnicodeDecodeError as error:
            shown.append(data[: error.start].decode("utf-8"))
            shown.extend(f"<0x{b:02X}>" for b in data[error.start : error.end])
            data = data[error.end :]
    return "".join(shown)
