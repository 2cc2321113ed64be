"""An answer coloured by token probability while it streams: each frame appends the tokens
that came since the last one to the same view (all of them again each frame cost the
window more than a frame once an answer ran to a few hundred tokens), and what it shows
is what a view built at once shows; other tokens (a regenerated answer) build it anew."""

import math

from PySide6.QtGui import QTextCursor

from app.chat.view import TOKEN_PROPERTY, MessageWidget, probability_colour
from engine.chat.events import TokenEvent


def event(index: int, text: str, logprob: float) -> TokenEvent:
    return TokenEvent(index, 100 + index, text, text, 2.0, logprob, 0.5, (), 0)


def spans(widget: MessageWidget) -> list[tuple[int, str, str]]:
    """(token index, text, background colour) of each token span in the coloured view."""
    assert len(widget._blocks) == 1
    document = widget._blocks[0].document()
    found: dict[int, list] = {}
    cursor = QTextCursor(document)
    for position in range(document.characterCount() - 1):
        cursor.setPosition(position)
        cursor.setPosition(position + 1, QTextCursor.KeepAnchor)
        fmt = cursor.charFormat()
        index = fmt.property(TOKEN_PROPERTY)
        entry = found.setdefault(int(index), [int(index), "", fmt.background().color().name()])
        entry[1] += cursor.selectedText()
    return [tuple(v) for v in found.values()]


def test_a_streamed_coloured_answer_grows_in_place_and_equals_one_built_at_once(qtbot):
    events = [event(i, f" w{i}", -0.05 * i) for i in range(120)]
    streamed = MessageWidget("assistant", "Lantern")
    qtbot.addWidget(streamed)
    streamed.set_color_tokens(True)
    tokens: list[TokenEvent] = []
    streamed.tokens = tokens                          # the controller appends to its list
    views = set()
    for start in range(0, len(events), 7):            # a few tokens a frame
        tokens.extend(events[start:start + 7])
        streamed.set_text("".join(e.text for e in tokens), immediate=True)
        views.add(id(streamed._blocks[0].document()))
    assert len(views) == 1                             # appended to, never built again

    at_once = MessageWidget("assistant", "Lantern")
    qtbot.addWidget(at_once)
    at_once.tokens = list(events)
    at_once.set_color_tokens(True)
    expected = [(i, f" w{i}", probability_colour(math.exp(-0.05 * i)).name())
                for i in range(120)]
    assert spans(streamed) == spans(at_once) == expected

    regenerated = [event(i, f" r{i}", -1.0) for i in range(3)]
    streamed.tokens = regenerated
    streamed.set_text("".join(e.text for e in regenerated), immediate=True)
    assert spans(streamed) == [(i, f" r{i}", probability_colour(math.exp(-1.0)).name())
                               for i in range(3)]

    streamed.set_color_tokens(False)                   # markdown, then colour once more
    assert streamed._blocks[0].toPlainText().strip() == "r0 r1 r2"
    streamed.set_color_tokens(True)
    assert [s[1] for s in spans(streamed)] == [" r0", " r1", " r2"]
