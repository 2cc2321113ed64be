"""`--file` of `lantern run`: documents put into the prompt, counted before sending, and
cut only when `--truncate` says so."""

from __future__ import annotations

import sys

from engine.chat.documents import (
    Document,
    compose,
    fit,
    message_room,
    read_document,
    template_overhead,
    token_counter,
)
from engine.errors import GenerationError


def with_files(prompt: str, paths: list[str], chat, truncate: bool) -> str:
    """The prompt with the documents in front; each one's token count is noted on stderr."""
    model, num_ctx, num_predict = chat.model, chat.options.num_ctx, chat.options.num_predict
    documents: list[Document] = [read_document(path) for path in paths]
    count, exact = token_counter(model)
    about = "" if exact else "about "
    for document in documents:
        print(f"note: {document.name}: {about}{count(document.text)} tokens", file=sys.stderr)
    room = message_room(num_ctx, num_predict,
                        template_overhead(model, chat.system, chat.think))
    total = count(compose(prompt, documents))
    if total > room:
        if not truncate:
            raise GenerationError(
                f"the prompt with its file(s) is {about}{total} tokens, more than the "
                f"{room} the context leaves a message (num_ctx {num_ctx}): pass --truncate "
                "to cut the file(s) to fit, raise --num-ctx, or attach less")
        documents = fit(prompt, documents, count, room)
        print(f"note: file(s) truncated to fit the context: {about}"
              f"{count(compose(prompt, documents))} tokens", file=sys.stderr)
    return compose(prompt, documents)
