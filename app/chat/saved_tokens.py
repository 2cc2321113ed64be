"""An answer's tokens as the history keeps them, back as TokenEvents for the view and the
panel: a reopened or imported chat colours by probability and shows each token's best
alternatives as the live answer did. Only log-probabilities are kept (no ids, logits,
entropy or sampler reasons), so the events look like a server's (engine.chat.events).
"""

from __future__ import annotations

import math

from app.conversations.history import StoredMessage
from engine.chat.events import TokenEvent, TopToken


def saved_tokens(message: StoredMessage) -> list[TokenEvent]:
    """The answer's tokens, or [] when the history holds none that spell its text (an
    answer saved before the tokens were, or edited)."""
    rows = [row for row in message.logprobs if isinstance(row, dict) and "token" in row]
    if not rows:
        return []
    # "text" is kept since the answer's own text per token; earlier rows have the piece
    texts = [str(row.get("text", row["token"])) if not row.get("thinking") else ""
             for row in rows]
    if "".join(texts) != message.content:
        return []
    return [
        TokenEvent(
            index=index, id=-1, piece=str(row["token"]), text=text, logit=None,
            logprob=float(row.get("logprob", math.nan)), entropy=math.nan,
            top=tuple(TopToken(-1, str(piece), None, float(logprob))
                      for piece, logprob in row.get("top", ())),
            elapsed_ns=0, thinking=bool(row.get("thinking")),
        )
        for index, (row, text) in enumerate(zip(rows, texts, strict=True))
    ]
