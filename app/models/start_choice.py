"""Which model to load when the window opens, and the note that says why when the user
did not choose it: the last one used, else the only one, else the model of the most
recent conversation, else the smallest (quickest to load and to answer)."""

from __future__ import annotations

from collections.abc import Sequence

from app.conversations.history import Conversation
from app.models.list_model import ModelEntry

PICK_ANOTHER = "Pick another on the left (Ctrl+K)."


def start_model(entries: Sequence[ModelEntry], last_model: str | None,
                conversations: Sequence[Conversation]) -> tuple[str | None, str]:
    """The model's name (None: none to load) and a note to show ("" when obvious)."""
    names = [e.name for e in entries]
    if last_model in names:
        return last_model, ""
    if len(entries) == 1:
        return names[0], ""
    local = [e for e in entries if e.remote is None and e.problem is None]
    if not local:
        return None, ""
    usable = {e.name for e in local}
    for conversation in sorted(conversations, key=lambda c: c.updated, reverse=True):
        if conversation.model in usable:
            return conversation.model, (f"Loaded {conversation.model}, the model of your most "
                                        f"recent conversation. {PICK_ANOTHER}")
    smallest = min(local, key=lambda e: (e.size, e.name))
    return smallest.name, (f"Loaded {smallest.name}, the smallest of your {len(local)} models "
                           f"(quickest to answer). {PICK_ANOTHER}")
