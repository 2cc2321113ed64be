"""Split a streamed reply into thinking and answer, as Qwen3 / DeepSeek-R1 write it:
``<think>…</think>`` before the answer.

Text arrives in deltas that may cut a tag anywhere (``</th`` + ``ink>``), so a delta
that could be the start of a tag is held back until the next one decides it. The
thinking section is recognised only at the very start of a reply (after whitespace),
as Ollama's parser does: a ``<think>`` in the middle of an answer is text. Templates
that open the section themselves (R1's generation prompt ends in ``<think>\\n``) start
the splitter inside it (`opened`).
"""

from __future__ import annotations

from dataclasses import dataclass

OPEN_TAG, CLOSE_TAG = "<think>", "</think>"


def prompt_opens_thinking(prompt_tail: str) -> bool:
    """The prompt ends inside an open ``<think>`` (only whitespace after it)."""
    at = prompt_tail.rfind(OPEN_TAG)
    return at >= 0 and not prompt_tail[at + len(OPEN_TAG):].strip()


@dataclass(frozen=True)
class Split:
    thinking: str = ""      # delta for the thinking section
    answer: str = ""        # delta for the answer
    in_thinking: bool = False   # the splitter was inside the thinking section for this delta


class ThinkingSplitter:
    """Feed reply deltas with `push`, then `flush` at the end."""

    def __init__(self, opened: bool = False) -> None:
        self.state = "opened" if opened else "start"
        self._held = ""

    def push(self, delta: str) -> Split:
        text, self._held = self._held + delta, ""
        thinking, answer, inside = [], [], self.state in ("opened", "thinking")
        while text:
            if self.state == "start":
                stripped = text.lstrip()
                if not stripped or (OPEN_TAG.startswith(stripped) and stripped != OPEN_TAG):
                    self._held = text          # whitespace or a tag's beginning: wait
                    break
                if stripped.startswith(OPEN_TAG):
                    self.state, inside = "opened", True
                    text = stripped[len(OPEN_TAG):]
                    continue
                self.state = "answer"          # no thinking in this reply
            elif self.state in ("opened", "after"):
                text = text.lstrip()           # whitespace after a tag is no content
                if text:
                    self.state = "thinking" if self.state == "opened" else "answer"
            elif self.state == "thinking":
                at = text.find(CLOSE_TAG)
                if at >= 0:
                    thinking.append(text[:at])
                    self.state, text = "after", text[at + len(CLOSE_TAG):]
                    continue
                keep = _partial_suffix(text, CLOSE_TAG)
                thinking.append(text[:len(text) - keep])
                self._held = text[len(text) - keep:]
                break
            else:
                answer.append(text)
                break
        return Split("".join(thinking), "".join(answer), inside)

    def flush(self) -> Split:
        """Release what was held back (an unfinished tag is plain text after all)."""
        held, self._held = self._held, ""
        if self.state in ("opened", "thinking"):
            return Split(thinking=held, in_thinking=True)
        return Split(answer=held)


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that is a proper beginning of `tag`."""
    for n in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0
