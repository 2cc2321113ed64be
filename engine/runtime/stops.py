"""Stop strings that may straddle token boundaries.

Text is held back while it could still be the beginning of a stop string, so the user
never sees any part of the stop text; once a stop string appears the text before it is
released and generation ends.
"""

from dataclasses import dataclass


@dataclass
class StopResult:
    text: str        # safe to show now
    stopped: bool    # a stop string was found; `text` ends right before it


class StopMatcher:
    def __init__(self, stops: tuple[str, ...] | list[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._pending = ""

    def push(self, delta: str) -> StopResult:
        if not self._stops:
            return StopResult(delta, False)
        text = self._pending + delta
        first = min(
            (i for i in (text.find(s) for s in self._stops) if i >= 0),
            default=-1,
        )
        if first >= 0:
            self._pending = ""
            return StopResult(text[:first], True)
        hold = self._longest_partial_suffix(text)
        self._pending = text[len(text) - hold:] if hold else ""
        return StopResult(text[: len(text) - hold], False)

    def flush(self) -> str:
        """End of generation without a stop string: release what was held back."""
        text, self._pending = self._pending, ""
        return text

    def _longest_partial_suffix(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:n]):
                    best = n
                    break
        return best
