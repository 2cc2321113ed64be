"""A conversation with a model loaded here (LocalSession; a server's: RemoteSession):
render, fit into num_ctx, reuse the KV cache.

Every turn renders the whole conversation through the model's template; the decode loop
then prefills only what differs from what the cache already holds, so a follow-up turn
costs its new tokens, and an edit or regenerate truncates the cache to the common prefix.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from engine.chat.events import DoneEvent, Event, NoticeEvent, TokenEvent
from engine.chat.harmony import HarmonyParser, harmony_prompt
from engine.chat.messages import Message, drop_answers
from engine.chat.prompt_tokens import PromptTokens
from engine.chat.session import Answer, Session
from engine.chat.tool_loop import take_tool_calls
from engine.chat.tool_results import ToolResult, current_turn, cut_to_fit, result_room
from engine.chat.tools import ToolCall
from engine.errors import GenerationError
from engine.gguf.control_vector import Steering
from engine.runtime.cancel import CancelEvent
from engine.runtime.check import CheckReport, check_against_reference
from engine.runtime.constraint import Constraint
from engine.runtime.drafters import Drafter
from engine.runtime.generate import Generator
from engine.runtime.loaded_model import LoadedModel
from engine.runtime.thinking import (
    CLOSE_TAG,
    OPEN_TAG,
    ThinkingSplitter,
    prompt_opens_thinking,
)
from engine.vision.preprocess import ImageInput
from engine.vision.video import VideoInput


@dataclass
class LocalSession(Session):
    model: LoadedModel
    cancel_event: threading.Event = field(default_factory=CancelEvent)  # within a token
    think: bool | str | None = None # Ollama's option; None: the template's default
    drafter: Drafter | None = None  # speculative decoding (engine.runtime.speculation)
    steering: Steering = field(default_factory=Steering)  # control vectors, each its strength

    def __post_init__(self) -> None:
        # the decoder keeps the record of its cache: every session on the model sees what
        # the one KV cache really holds, so switching conversations never reuses another's rows
        self._generator = Generator(self.model.decoder, self.model.tokenizer)
        self.last_prompt: PromptTokens | None = None
        self._load_duration = self.model.load_duration

    def continue_answer(self) -> Iterator[Event]:
        """Go on with the last answer from where it stopped (stopped, cut at the length
        limit, interrupted): the model's turn is opened with the answer so far and more
        tokens follow it; the message then holds the whole answer. The events carry only
        the new text (the DoneEvent's too). Refused for a structured answer, whose format
        would start again."""
        if not self.messages or self.messages[-1].role != "assistant":
            raise GenerationError("there is no answer to continue: the conversation does "
                                  "not end with one")
        if self.format is not None:
            raise GenerationError("a structured answer cannot be continued: its format "
                                  "would start again; regenerate it instead")
        self.cancel_event.clear()
        return self._one_answer(continuing=True)

    def answer_once(self) -> Iterator[Event]:
        """Answer the conversation as it stands, once: tool calls the answer makes are
        recorded on its message, not run (a server hands them back to its client)."""
        self.cancel_event.clear()
        return self._answer_once()

    def _answer_once(self) -> Iterator[Event]:
        yield from self._one_answer()
        take_tool_calls(self.messages, self.tools)

    def prepare_image(self, path: str, max_pixels: int) -> ImageInput | VideoInput:
        """An image file as this backend takes it: preprocessed for the vision tower (an
        animated file on a video model: a video)."""
        return self.model.prepare_image(path, max_pixels)

    def raw(self, text: str) -> Iterator[Event]:
        """Answer a raw prompt sent verbatim (control tokens parsed); no template, no history."""
        self.cancel_event.clear()
        self.model.decoder.steer(self.steering_table())
        prompt = self.model.tokenize_raw(text)
        self.last_prompt = prompt
        return self._split_thinking(prompt, None, None, self._generator.run(
            prompt, self.options, cancel=self.cancel_event, num_top=self.num_top,
            load_duration=self._take_load_duration(),
            max_cache_len=self.model.decoder.max_cache_len, drafter=self.drafter,
            constraint=self._constraint(prompt)))

    def check_against_reference(self, cancel: threading.Event | None = None) -> CheckReport:
        """Compare the engine with the numpy reference on the last prompt, layer by layer.

        The check runs on the model's decoder when it has the debug outputs, which
        overwrites its cache: the next turn then prefills the conversation again.
        """
        if self.last_prompt is None:
            self.last_prompt = self.latest_prompt()
        return check_against_reference(
            self.model.gguf, self.last_prompt, self.model.tokenizer.id_to_piece,
            exact=self.model.exact, decoder=self.model.decoder, cancel=cancel,
            steering=self.steering_table(),
        )

    def steering_table(self) -> np.ndarray | None:
        """What this chat adds to each block's output, [n_layers, H]; None: not steered.
        ControlVectorMismatch when a vector was made for another model."""
        if not self.steering:
            return None
        cfg = self.model.gguf.config
        return self.steering.table(cfg.architecture, cfg.text.n_layers, cfg.text.hidden_size)

    def latest_prompt(self) -> PromptTokens:
        """The prompt the latest answer was made from (the conversation up to its last user
        message), for a conversation restored from history that has not answered here."""
        kept = list(self.messages)
        try:
            drop_answers(self.messages)
            prompt, _ = self._fit()
        finally:
            self.messages[:] = kept
        return prompt

    # -- generation -----------------------------------------------------------------------

    def _one_answer(self, continuing: bool = False) -> Answer:
        """One answer; ``continuing``: the last message is the answer so far, which this
        one goes on from (out of ``messages`` meanwhile, then back with what came added)."""
        # the decoder is shared by every chat on the model: each answer sets its own vectors
        self.model.decoder.steer(self.steering_table())
        partial = self.messages.pop() if continuing else None
        calls: list[ToolCall] = []  # a harmony reply's calls, known once it ends
        return (yield from self._collect(self._generate(partial, calls), before=partial,
                                         calls=calls))

    def _generate(self, partial: Message | None, calls: list[ToolCall]) -> Iterator[Event]:
        """The answer's events, from the conversation fitted into the context (and opened
        with ``partial``, the answer so far); ``calls`` gets a harmony reply's tool calls."""
        prompt, dropped = self._fit()
        opened = None
        if partial is not None:
            prompt, opened = self._opened_with(prompt, partial)
        self.last_prompt = prompt
        if dropped:
            yield NoticeEvent(
                f"{dropped} earlier message{'s' if dropped > 1 else ''} left out: the "
                f"conversation no longer fits num_ctx={self.options.num_ctx}"
            )
        yield from self._split_thinking(prompt, opened, calls, self._generator.run(
            prompt,
            self.options,
            cancel=self.cancel_event,
            num_top=self.num_top,
            load_duration=self._take_load_duration(),
            max_cache_len=self.model.decoder.max_cache_len,
            drafter=self.drafter,
            constraint=self._constraint(prompt),
        ))

    def _opened_with(self, prompt: PromptTokens, partial: Message) -> tuple[PromptTokens, bool]:
        """The prompt with the model's turn opened by the answer so far (its thinking in
        the model's own tags); True when that leaves the answer inside its thinking."""
        tail = self._prompt_tail(prompt)
        text, thinking_open = partial.content, False
        if partial.thinking:
            text = ("" if prompt_opens_thinking(tail) else OPEN_TAG) + partial.thinking
            thinking_open = not partial.content
            if partial.content:
                text += CLOSE_TAG + "\n\n" + partial.content
        prompt = prompt.extended(self.model.tokenizer.encode(text))
        if len(prompt) >= self._limit():
            raise GenerationError(f"the answer so far fills the context of {self._limit()} "
                                  "tokens (num_ctx): it cannot go on; raise num_ctx")
        return prompt, thinking_open

    def _split_thinking(self, prompt: PromptTokens, opened: bool | None,
                        calls: list[ToolCall] | None,
                        events: Iterator[Event]) -> Iterator[Event]:
        """Tag each token's text as thinking or answer (engine.runtime.thinking; after a
        harmony prompt, gpt-oss's channels, engine.chat.harmony, whose tool calls go into
        ``calls``); the DoneEvent's text is the answer alone and its `thinking` the
        thinking section.
        ``opened``: whether the answer starts inside its thinking (None: as the prompt's
        end says)."""
        tail = self._prompt_tail(prompt)
        if opened is None:
            opened = prompt_opens_thinking(tail)
        splitter: ThinkingSplitter | HarmonyParser = ThinkingSplitter(opened=opened)
        if harmony_prompt(tail):  # gpt-oss: thinking and calls are channels of its messages
            splitter = HarmonyParser()
        answer, thinking = [], []
        for event in events:
            if isinstance(event, TokenEvent):
                part = splitter.push(event.text)
                event = replace(event, text=part.answer, thinking_text=part.thinking,
                                thinking=part.in_thinking)
                answer.append(part.answer)
                thinking.append(part.thinking)
            elif isinstance(event, DoneEvent):
                end, rest = splitter.push(event.tail), splitter.flush()
                released = end.answer + rest.answer
                thinking.append(end.thinking + rest.thinking)
                event = replace(event, text="".join(answer) + released, tail=released,
                                thinking="".join(thinking),
                                steering=self.steering.label if self.steering else "")
                if isinstance(splitter, HarmonyParser) and calls is not None:
                    calls.extend(splitter.calls)
                if self.think is False and event.thinking:
                    yield NoticeEvent(f"{self.model.name} thought anyway: its template has no "
                                      "switch for thinking (think=false is ignored)")
            yield event

    def _constraint(self, prompt: PromptTokens) -> Constraint | None:
        """The answer's format; a prompt that opens thinking gets it after ``</think>``, a
        model whose template leaves ``<think>`` to it may open it first (unless think is
        off); offered tools may be called instead."""
        if self.format is None:
            return None
        tail = self._prompt_tail(prompt)
        opened = prompt_opens_thinking(tail)
        return Constraint(self.model.tokenizer, self.format,
                          after=CLOSE_TAG if opened else None, tools=self.tools,
                          may_think=not opened and self.think is not False
                          and self.model.may_think)

    def _prompt_tail(self, prompt: PromptTokens) -> str:
        """The prompt's last tokens as text: enough to see how the template opened the
        model's turn (a <think>, harmony's <|start|>assistant) in any vocabulary."""
        return self.model.tokenizer.decode([int(i) for i in prompt.ids[-32:]])

    def _take_load_duration(self) -> int:
        """The model's load time is reported once, with the first answer (as Ollama does
        for the request that loaded it)."""
        duration, self._load_duration = self._load_duration, 0
        return duration

    def _fit(self) -> tuple[PromptTokens, int]:
        """Render the conversation, dropping the oldest turns until it fits num_ctx.

        System messages and the latest message are always kept (as Ollama does); room is
        left for at least a short answer.
        """
        limit = self._limit()
        reserve = min(self.options.num_predict if self.options.num_predict > 0 else 256,
                      limit // 4)
        system = [m for m in self.messages if m.role == "system"]
        turns = [m for m in self.messages if m.role != "system"]
        if not turns:
            raise GenerationError("there is nothing to answer: send a message first")

        def render(dropped: int) -> PromptTokens:
            return self._tokenize(system + turns[dropped:])

        # the prompt only shrinks as turns are dropped: the fewest drops that fit are found
        # by bisection (a long conversation is rendered a few times, not once per turn)
        prompt, dropped = render(0), 0
        if len(prompt) + reserve > limit:
            fitting: tuple[PromptTokens, int] | None = None
            low, high = 1, len(turns) - 1
            while low <= high:
                middle = (low + high) // 2
                candidate = render(middle)
                if len(candidate) + reserve <= limit:
                    fitting, high = (candidate, middle), middle - 1
                else:
                    low = middle + 1
            # none leaves room for an answer: the latest message alone, if it fits at all
            prompt, dropped = fitting or (render(len(turns) - 1), len(turns) - 1)
        if len(prompt) >= limit:
            raise GenerationError(
                f"the last message alone is {len(prompt)} tokens, more than the context "
                f"of {limit} (num_ctx): shorten it or raise num_ctx"
            )
        return prompt, dropped

    def _limit(self) -> int:
        return min(self.options.num_ctx, self.model.decoder.max_cache_len)

    def _tokenize(self, messages: list[Message]) -> PromptTokens:
        return self.model.tokenize_chat(messages, system=self.system, think=self.think,
                                        tools=[t.api() for t in self.tools] or None)

    def _fit_tool_result(self, message: Message) -> ToolResult:
        """A tool's result cut, through the model's tokenizer, to the room the
        conversation leaves (engine.chat.tool_results.result_room)."""
        empty = [replace(message, content="")]
        room = result_room(
            self._limit(), self.options.num_predict,
            len(self._tokenize(self.messages + empty)),
            lambda: len(self._tokenize(current_turn(self.messages) + empty)))
        tokenizer = self.model.tokenizer
        return cut_to_fit(message.content, room, tokenizer.encode, tokenizer.decode)
