"""A streamed answer reaches the GUI thread in batches: tokens that come within BATCH_S of
the last batch wait for the next one, tokens further apart go one by one, and nothing is
held back by the end of the answer, a tool call or a failure."""

import time

from app.workers import BATCH_S, GenerateJob
from engine.chat.events import DoneEvent, TokenEvent, ToolCallEvent
from engine.errors import GenerationError


def token(index: int) -> TokenEvent:
    return TokenEvent(index, index, f"t{index}", f"t{index}", 1.0, -0.1, 0.1, (), 1000)


def done() -> DoneEvent:
    return DoneEvent("stop", "", "", 0, 0, 0, 0, 0, 0)


def batches_of(events) -> list:
    job = GenerateJob(lambda: iter(events()), lambda: None)
    seen = []
    job.tokens.connect(lambda batch: seen.append([e.index for e in batch]))
    job.done.connect(lambda _: seen.append("done"))
    job.toolCall.connect(lambda _: seen.append("call"))
    job.failed.connect(lambda message: seen.append(message))
    job.run()
    return seen


def test_fast_tokens_come_together_slow_ones_alone():
    def fast():
        yield from (token(i) for i in range(5))
        yield done()
    seen = batches_of(fast)
    # the first goes at once; the rest, microseconds apart, together (a pause of the
    # machine longer than BATCH_S may split them once more)
    assert seen[0] == [0] and seen[-1] == "done" and len(seen) <= 4
    assert sum(seen[1:-1], []) == [1, 2, 3, 4]

    def slow():
        for i in range(3):
            time.sleep(BATCH_S * 1.5)
            yield token(i)
        yield done()
    assert batches_of(slow) == [[0], [1], [2], "done"]


def test_nothing_is_held_back_by_a_call_or_a_failure():
    def with_call():
        yield from (token(i) for i in range(3))
        yield done()
        yield ToolCallEvent("calculator", {"expression": "1+1"}, "2")
        yield token(3)
        yield done()
    seen = batches_of(with_call)
    assert seen[seen.index("call"):] == ["call", [3], "done"]
    assert sum(seen[:seen.index("call")], []) == [0, 1, 2]

    def failing():
        yield from (token(i) for i in range(3))
        raise GenerationError("the stream was cut")
    seen = batches_of(failing)
    assert sum(seen[:-1], []) == [0, 1, 2] and seen[-1] == "the stream was cut"
