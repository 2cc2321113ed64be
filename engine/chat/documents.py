"""Documents attached to a message: text, source, PDF and DOCX files as plain text.

PDF text comes from pypdf, DOCX from python-docx (both small, no hand-written parsing);
any other file is read as UTF-8 text when it is text. The text goes into the user
message between ``<document name="...">`` and ``</document>``, so the model sees where
each file starts and ends and the history keeps the file's name and text with the message.
What does not fit the context is never cut silently: ``fit`` truncates only when the
caller (the user's choice) asks, and marks the cut in the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from engine.errors import LanternError

PDF, DOCX = ".pdf", ".docx"
OPEN, CLOSE = '<document name="{name}">\n', "\n</document>"
_BLOCK = re.compile(r'<document name="(?P<name>[^"\n]*)">\n(?P<text>.*?)\n</document>(?:\n\n)?',
                    re.S)
TRUNCATED = "\n[… truncated: the first {kept} of {total} tokens]"


class DocumentError(LanternError):
    """A file that cannot be read as a document."""


@dataclass(frozen=True)
class Document:
    name: str           # the file's name as the model and the history see it
    text: str


def read_document(path: str | Path) -> Document:
    """The text of a text / source, PDF or DOCX file."""
    path = Path(path)
    if not path.is_file():
        raise DocumentError(f"{path} is not a file")
    suffix = path.suffix.lower()
    try:
        if suffix == PDF:
            text = _pdf_text(path)
        elif suffix == DOCX:
            text = _docx_text(path)
        else:
            text = _plain_text(path)
    except DocumentError:
        raise
    except Exception as error:  # a converter's own error on a damaged file
        kind = {PDF: "PDF", DOCX: "DOCX"}.get(suffix, "text")
        raise DocumentError(f"{path.name} cannot be read as {kind}: {error}") from None
    if not text.strip():
        what = " (a scanned PDF? its pages are pictures)" if suffix == PDF else ""
        raise DocumentError(f"{path.name} has no text{what}")
    return Document(path.name, text.strip("\n"))


def _pdf_text(path: Path) -> str:
    from pypdf import PdfReader

    reader = PdfReader(path)
    if reader.is_encrypted and not reader.decrypt(""):
        raise DocumentError(f"{path.name} is a password-protected PDF")
    return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)


def _docx_text(path: Path) -> str:
    import docx

    document = docx.Document(str(path))
    parts = [p.text for p in document.paragraphs]
    for table in document.tables:
        parts += [" | ".join(cell.text for cell in row.cells) for row in table.rows]
    return "\n".join(parts)


def _plain_text(path: Path) -> str:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise DocumentError(f"{path.name} is not a text, PDF or DOCX file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DocumentError(f"{path.name} is not UTF-8 text (nor a PDF or DOCX file)") \
            from None


def compose(text: str, documents: Sequence[Document]) -> str:
    """The user message: each document in its delimiters, then what the user typed."""
    blocks = [OPEN.format(name=d.name.replace('"', "'")) + d.text + CLOSE for d in documents]
    return "\n\n".join([*blocks, *([text] if text else [])])


def split(message: str) -> tuple[list[Document], str]:
    """``compose``'s inverse: the documents leading a message, and the typed text."""
    documents, at = [], 0
    while match := _BLOCK.match(message, at):
        documents.append(Document(match["name"], match["text"]))
        at = match.end()
    return documents, message[at:]


def token_counter(model) -> tuple[Callable[[str], int], bool]:
    """Counts tokens with the model's tokenizer (True: exact); a server's model has none
    here, so about three characters a token (False: say "about")."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return (lambda text: -(-len(text) // 3)), False
    return (lambda text: len(tokenizer.encode(text))), True


def template_overhead(model, system: str | None, think: bool | str | None) -> int:
    """Tokens the chat template adds around a message (system prompt, role markers); a
    server's model: a typical 64."""
    if getattr(model, "tokenizer", None) is None:
        return 64
    from engine.chat.messages import Message

    return len(model.tokenize_chat([Message("user", "")], system=system, think=think))


def message_room(num_ctx: int, num_predict: int, overhead: int) -> int:
    """Tokens a new message may take: the context less the template's own tokens around it
    (``overhead``) and the room LocalSession keeps for an answer (num_predict, else 256, at
    most a quarter of the context)."""
    return num_ctx - overhead - min(num_predict if num_predict > 0 else 256, num_ctx // 4)


def fit(text: str, documents: Sequence[Document], count: Callable[[str], int],
        room: int) -> list[Document]:
    """The documents cut (last ones first) so that ``compose(text, documents)`` takes at
    most ``room`` tokens by ``count``; each cut one says so in its text."""
    out = list(documents)
    for index in range(len(out) - 1, -1, -1):
        original, cut = out[index], 0
        total = count(original.text)
        while (excess := count(compose(text, out)) - room) > 0 and cut < total:
            cut += excess                   # the cut's edge may tokenize differently: again
            out[index] = _cut(original, cut, count)
        if excess <= 0:
            return out
    raise DocumentError("the message is too long for the context even without its "
                        "documents")


def _cut(document: Document, excess: int, count: Callable[[str], int]) -> Document:
    """The document with about ``excess`` tokens fewer (the longest prefix that fits)."""
    total = count(document.text)
    budget = total - excess - count(TRUNCATED.format(kept=total, total=total))
    if budget <= 0:
        return replace(document, text=TRUNCATED.format(kept=0, total=total).strip())
    low, high = 0, len(document.text)
    while low < high:                       # longest prefix of at most `budget` tokens
        middle = (low + high + 1) // 2
        if count(document.text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    kept = document.text[:low]
    return replace(document, text=kept + TRUNCATED.format(kept=count(kept), total=total))
