"""Which model to load when the window opens, and the note that says why when the user
did not choose it: the last one used, else the only one, else the model of the most
recent conversation, else the smallest chat model (quickest to load and to answer; a base
model without a chat template only when there is nothing else)."""

from __future__ import annotations

from collections.abc import Sequence

from app.conversations.history import Conversation
from app.models.list_model import ModelEntry

PICK_ANOTHER = "Pick another on the left (Ctrl+K)."


def start_model(entries: Sequence[ModelEntry], last_model: str | None,
                conversations: Sequence[Conversation]) -> tuple[str | None, str]:
    """The model's name (None: none to load) and a note to show ("" when obvious). A model
    known not to run is never chosen."""
    names = [e.name for e in entries if e.problem is None]
    if last_model in names:
        return last_model, ""
    if len(entries) == 1 and names:
        return names[0], ""
    local = [e for e in entries if e.remote is None and e.problem is None]
    if not local:
        return None, ""
    usable = {e.name for e in local}
    for conversation in sorted(conversations, key=lambda c: c.updated, reverse=True):
        if conversation.model in usable:
            return conversation.model, (f"Loaded {conversation.model}, the model of your most "
                                        f"recent conversation. {PICK_ANOTHER}")
    if not all(e.checked for e in local):
        return None, ""              # which are chat models is known once each is described
    chat = [e for e in local if not e.completion_only]
    smallest = min(chat or local, key=lambda e: (e.size, e.name))
    if len(chat) == 1:
        why = "your only chat model (the others have no chat template)"
    else:
        why = (f"the smallest of your {len(chat or local)} {'chat ' if chat else ''}models "
               "(quickest to answer)")
    return smallest.name, f"Loaded {smallest.name}, {why}. {PICK_ANOTHER}"
