"""Documents: text, PDF and DOCX files made here convert to their text; the message
carries each one between delimiters with its name, and the history keeps both; a
message too long for the context asks to truncate or cancel (app) or stops unless
--truncate (CLI), never a silent cut."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import docx
import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from app.chat.conversation import title_of
from app.chat.input_box import InputBox, Submission
from app.conversations.history import History
from engine.chat.documents import (
    Document,
    DocumentError,
    compose,
    fit,
    message_room,
    read_document,
    split,
)
from tests.fixtures.synthetic_gguf import TextSpec
from tests.unit.app.test_app_daily import one_model, send, start  # noqa: F401 (fixture)

PDF_LINES = ["Quarterly report", "Revenue grew by 12 percent."]


def make_pdf(path: Path, pages: list[list[str]]) -> Path:
    """A PDF with real text (Helvetica text operators), written with pypdf itself."""
    writer = PdfWriter()
    for lines in pages:
        page = writer.add_blank_page(width=612, height=792)
        font = DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                 NameObject("/Subtype"): NameObject("/Type1"),
                                 NameObject("/BaseFont"): NameObject("/Helvetica")})
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject(
            {NameObject("/F1"): writer._add_object(font)})})
        body = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({line}) Tj T*" for line in lines)
        stream = DecodedStreamObject()
        stream.set_data((body + " ET").encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    with path.open("wb") as f:
        writer.write(f)
    return path


def make_docx(path: Path) -> Path:
    document = docx.Document()
    document.add_heading("Meeting notes", level=1)
    document.add_paragraph("Décisions: ship on Friday — ünïcode kept.")
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate([["name", "role"], ["Ada", "engineer"]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    document.save(str(path))
    return path


def test_a_pdf_made_here_converts_to_its_text(tmp_path):
    document = read_document(make_pdf(tmp_path / "report.pdf", [PDF_LINES, ["Page two."]]))
    assert document.name == "report.pdf"
    lines = [line.strip() for line in document.text.splitlines() if line.strip()]
    assert lines == [*PDF_LINES, "Page two."]


def test_a_docx_made_here_converts_to_its_text(tmp_path):
    document = read_document(make_docx(tmp_path / "notes.docx"))
    assert document.text.splitlines() == [
        "Meeting notes", "Décisions: ship on Friday — ünïcode kept.", "name | role",
        "Ada | engineer"]


def test_text_and_source_files_and_what_is_refused(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    return 'é'\n", encoding="utf-8")
    assert read_document(tmp_path / "a.py") == Document("a.py", "def f():\n    return 'é'")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "empty.md").write_text("\n\n")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (tmp_path / "blank.pdf").write_bytes(make_pdf(tmp_path / "b.pdf", [[]]).read_bytes())
    for name, problem in (("blob.bin", "not a text, PDF or DOCX file"),
                          ("latin.txt", "not UTF-8 text"), ("empty.md", "has no text"),
                          ("broken.pdf", "cannot be read as PDF"),
                          ("blank.pdf", "scanned PDF"), ("missing.txt", "is not a file")):
        with pytest.raises(DocumentError, match=problem):
            read_document(tmp_path / name)


def test_the_message_delimits_each_document_with_its_name_and_splits_back():
    documents = [Document("a.txt", "first\nfile"), Document("b.md", "# second")]
    message = compose("Compare them.", documents)
    assert message == ('<document name="a.txt">\nfirst\nfile\n</document>\n\n'
                       '<document name="b.md">\n# second\n</document>\n\nCompare them.')
    assert split(message) == (documents, "Compare them.")
    assert split("no documents") == ([], "no documents")
    assert split(compose("", documents)) == (documents, "")


def test_documents_round_trip_through_the_history(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    conversation = history.create("Docs", "tiny")
    documents = [read_document(make_docx(tmp_path / "notes.docx")),
                 read_document(make_pdf(tmp_path / "report.pdf", [PDF_LINES]))]
    history.add(conversation.id, "user", compose("Summarize both.", documents))
    history.close()
    again = History(tmp_path / "h.sqlite3")
    stored = again.messages(conversation.id)[0]
    assert split(stored.content) == (documents, "Summarize both.")
    assert again.search("Revenue")[0].id == conversation.id   # the text is searchable
    again.close()


def words(text: str) -> int:
    return len(text.split())


def test_fit_cuts_the_last_documents_first_and_says_so():
    documents = [Document("a.txt", "alpha " * 50), Document("b.txt", "beta " * 500)]
    assert words(compose("Go.", documents)) > 300
    cut = fit("Go.", documents, words, 300)
    assert words(compose("Go.", cut)) <= 300
    assert cut[0] == documents[0]
    assert "[… truncated: the first" in cut[1].text and "of 500 tokens]" in cut[1].text
    with pytest.raises(DocumentError, match="too long for the context even without"):
        fit("many words " * 100, documents, words, 50)
    assert message_room(4096, -1, 30) == 4096 - 30 - 256
    assert message_room(1024, 20, 30) == 1024 - 30 - 20


def test_the_input_box_asks_before_cutting_a_document_that_does_not_fit(qtbot, tmp_path):
    box = InputBox()
    qtbot.addWidget(box)
    box.documents.count_tokens = lambda text: (words(text), True)
    box.documents.message_room = lambda: 100
    sent: list[Submission] = []
    box.submitted.connect(sent.append)
    (tmp_path / "long.txt").write_text("word " * 400)
    (tmp_path / "short.md").write_text("tiny note")
    box.attach([str(tmp_path / "short.md"), str(tmp_path / "long.txt")])
    assert [c.label.text() for c in box.documents.chips()] == [
        "short.md · 2 tokens", "long.txt · 400 tokens"]
    questions: list[str] = []
    box.documents.ask_truncate = lambda q: questions.append(q) or False   # Cancel
    box.editor.setPlainText("Summarize.")
    box.submit()
    assert not sent and "409 tokens" in questions[0] and "room for 100" in questions[0]
    assert len(box.documents.documents) == 2                  # nothing lost on Cancel
    box.documents.ask_truncate = lambda q: True               # Truncate to fit
    box.submit()
    documents, text = split(sent[0].text)
    assert text == "Summarize." and words(sent[0].text) <= 100
    assert documents[0] == Document("short.md", "tiny note")
    assert "[… truncated: the first" in documents[1].text
    box.accept_submission()
    assert box.documents.documents == [] and not box.documents.isVisibleTo(box)
    rejected: list[str] = []
    box.documentRejected.connect(rejected.append)
    (tmp_path / "x.bin").write_bytes(b"\x00binary")
    box.attach([str(tmp_path / "x.bin")])
    assert "not a text, PDF or DOCX file" in rejected[0] and "attach a text" in rejected[0]


def test_a_message_that_fits_is_sent_without_asking(qtbot, tmp_path):
    box = InputBox()
    qtbot.addWidget(box)
    box.documents.ask_truncate = lambda q: pytest.fail("asked although it fits")
    sent: list[Submission] = []
    box.submitted.connect(sent.append)
    box.attach([str(make_pdf(tmp_path / "r.pdf", [PDF_LINES]))])
    box.submit()                                                  # documents alone suffice
    assert split(sent[0].text)[0][0].name == "r.pdf"


@pytest.fixture(scope="module")
def tiny(synthetic_gguf) -> Path:
    return synthetic_gguf("qwen2", TextSpec(vocab=400), seed=3)


def test_cli_file_counts_tokens_and_stops_or_truncates_when_too_long(tiny, tmp_path):
    notes = make_docx(tmp_path / "notes.docx")
    long = tmp_path / "long.txt"
    long.write_text("the thing " * 2000)
    base = [sys.executable, "-m", "engine.cli", "run", str(tiny), "Summarize.",
            "--num-predict", "2", "--temperature", "0"]
    ok = subprocess.run([*base, "--file", str(notes)], capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "note: notes.docx:" in ok.stderr and "tokens" in ok.stderr
    too_long = subprocess.run([*base, "--file", str(long), "--num-ctx", "512"],
                              capture_output=True, text=True, timeout=120)
    assert too_long.returncode == 1
    assert "more than the" in too_long.stderr and "pass --truncate" in too_long.stderr
    cut = subprocess.run([*base, "--file", str(long), "--num-ctx", "512", "--truncate"],
                         capture_output=True, text=True, timeout=120)
    assert cut.returncode == 0, cut.stderr
    assert "truncated to fit the context" in cut.stderr
    missing = subprocess.run([*base, "--file", str(tmp_path / "nope.pdf")],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "nope.pdf is not a file" in missing.stderr


def test_cli_files_go_to_a_server_counted_about(tmp_path, capsys):
    """Through a remote engine (Ollama's API, the loopback stand-in): no tokenizer here,
    so the counts say "about"; too long stops unless --truncate, which cuts visibly."""
    from engine.cli import main
    from tests.fixtures.fake_servers import BLOB, FakeOllama

    notes = make_docx(tmp_path / "notes.docx")
    long = tmp_path / "long.txt"
    long.write_text("the thing " * 2000)
    with FakeOllama({"tiny:latest": {"blob": BLOB, "vision": False}}) as ollama:
        base = ["run", "--server", ollama.url, "tiny", "Summarize.", "--num-ctx", "2048"]
        assert main([*base, "--file", str(notes)]) == 0
        sent = ollama.requests[-1][2]["messages"][-1]["content"]
        assert split(sent) == ([read_document(notes)], "Summarize.")
        assert "note: notes.docx: about " in capsys.readouterr().err
        chats = lambda: [r for r in ollama.requests if r[0] == "/api/chat"]  # noqa: E731
        asked = len(chats())
        assert main([*base, "--file", str(long)]) == 1
        assert "pass --truncate" in capsys.readouterr().err and len(chats()) == asked
        assert main([*base, "--file", str(long), "--truncate"]) == 0
        [cut], text = split(ollama.requests[-1][2]["messages"][-1]["content"])
        assert text == "Summarize." and "[… truncated: the first" in cut.text
        assert "truncated to fit the context" in capsys.readouterr().err


def test_the_window_counts_with_the_models_tokenizer_and_keeps_the_document(
        qtbot, tmp_path, one_model):  # noqa: F811
    window = start(qtbot, tmp_path, one_model, options={"num_predict": 2})
    notes = make_docx(tmp_path / "notes.docx")
    window.chat.input.attach([str(notes)])
    tokens = len(window.controller.model.tokenizer.encode(read_document(notes).text))
    assert [c.label.text() for c in window.chat.input.documents.chips()] == [
        f"notes.docx · {tokens:,} tokens"]
    done = send(qtbot, window, "What was decided?")
    assert done.done_reason in ("stop", "length")
    stored = window.history.messages(window.controller.conversation_id)[0]
    assert split(stored.content) == ([read_document(notes)], "What was decided?")
    # the conversation is named for what was typed, not for the document's tag
    assert window.history.conversation(window.controller.conversation_id).title == (
        "What was decided?")
    assert title_of(compose("", [read_document(notes)]), ()) == "notes.docx"
    assert window.controller.session.messages[0].content == stored.content
    assert not window.chat.input.documents.chips()


def test_a_sent_message_shows_its_documents_as_chips_that_open(qtbot):
    # the bubble showed the raw <document name=…> markup with each file's whole text
    from PySide6.QtWidgets import QTextBrowser

    from app.chat.sent_document import SentDocument
    from app.chat.view import MessageWidget

    documents = [Document("notes.md", "line one\nline two"), Document("a.py", "x = 1")]
    widget = MessageWidget("user", "You", compose("Compare them.", documents))
    qtbot.addWidget(widget)
    widget.show()
    chips = widget.findChildren(SentDocument)
    assert [c.document for c in chips] == documents
    assert "notes.md" in chips[0].toggle.text() and "2 lines" in chips[0].toggle.text()
    shown = [b.toPlainText() for b in widget.findChildren(QTextBrowser) if b.isVisible()]
    assert shown == ["Compare them."]
    assert chips[0].text.isHidden()
    chips[0].toggle.click()
    assert chips[0].text.isVisible() and chips[0].text.toPlainText() == "line one\nline two"
    assert widget.text == compose("Compare them.", documents)     # Copy / Edit keep it all
