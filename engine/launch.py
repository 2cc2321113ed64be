"""One way to open a chat, from a model on this computer or on a server, with the user's
settings: the CLI (`lantern run`) and the app both come through here, so a chat is
assembled once (where the model runs, load, options, drafter, what the user should be told
about speculation).

Order: ``ready_model`` (it decides where the model runs, and loads it there when that is
here: ``load_local``), then ``open_chat`` with ``options_for``'s options, then
``speculate`` and ``steer`` for a local model.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.chat.answer_format import Format
from engine.chat.backend import Capability, ChatBackend
from engine.chat.messages import Message
from engine.chat.options import Options
from engine.chat.tools import Tool
from engine.errors import ControlVectorMismatch, GenerationError
from engine.remote.connection import Connection
from engine.remote.session import RemoteModel, RemoteSession, open_remote_model
from engine.store import LocalModel, Store

if TYPE_CHECKING:  # the runtime is imported where a local model is made: a server's chat
    from engine.gguf.control_vector import Steering  # needs none of it
    from engine.runtime.loaded_model import LoadedModel
    from engine.runtime.loader import Progress

    Model = LoadedModel | RemoteModel


@dataclass(frozen=True)
class EngineChoices:
    """How the user wants a model run on this computer (CLI flags, Settings → Engine)."""

    exact: bool = False              # fp32 activations
    provider: str = "cpu"
    requantize: str | None = None    # opt-in 4-bit weights, NOT the GGUF's exact ones
    layer_stats: bool = False        # per-layer statistics of every token


@dataclass(frozen=True)
class Where:
    """Where the user wants a model run: on ``server`` when they chose one; else on the
    Lantern server (`lantern serve`) of the store in ``shared`` when one answers; else
    here."""

    server: Connection | None = None
    shared: Path | None = None      # a store whose Lantern server may run its models


def ready_model(model: str | LocalModel | Path, where: Where, choices: EngineChoices,
                overrides: Mapping[str, object], *, progress: Progress | None = None,
                cancel: threading.Event | None = None) -> Model:
    """``model`` ready to chat with where ``where`` says, the one place that decides: a
    server's model (``model``: its name there) is asked for and nothing loads here; a
    store's model a shared Lantern server answers for keeps the store's params layer, as
    it would here; else ``model`` is loaded as ``choices`` say, its context from the
    options it will run with (``overrides`` over its params layer)."""
    if where.server is not None:
        return _ask(where.server, str(model), progress)
    if where.shared is not None and isinstance(model, LocalModel):
        from engine.remote.lantern_server import find_server, server_url

        connection = find_server(server_url(), where.shared)
        if connection is not None:
            remote = _ask(connection, model.name.display, progress)
            return replace(remote, params=dict(model.params))
    return load_local(model, choices, options_for(model, overrides).num_ctx,
                      progress=progress, cancel=cancel)


def _ask(connection: Connection, name: str, progress: Progress | None) -> RemoteModel:
    """A server's model: make sure the server has it (nothing is loaded here)."""
    if progress is not None:
        progress(f"Asking {connection.host}", 0.5)
    return open_remote_model(connection, name)


def load_local(source: LocalModel | Path, choices: EngineChoices, num_ctx: int, *,
               progress: Progress | None = None,
               cancel: threading.Event | None = None) -> LoadedModel:
    """``source`` loaded as ``choices`` say, its KV cache holding ``num_ctx`` tokens."""
    # the chat's module too: ``open_chat`` follows a load, in the app on the window's thread
    import engine.runtime.session  # noqa: F401
    from engine.runtime.loader import load_model

    return load_model(source, exact=choices.exact, provider=choices.provider,
                      num_ctx=num_ctx, layer_stats=choices.layer_stats,
                      requantize=choices.requantize, progress=progress, cancel=cancel)


def options_for(source: Model | LocalModel | Path,
                overrides: Mapping[str, object]) -> Options:
    """The sampling options: Ollama's defaults, the model's params layer (none for a bare
    GGUF; a server applies its own), then the user's ``overrides``."""
    return Options.resolve(getattr(source, "params", None) or {}, overrides)


def open_chat(model: Model, options: Options, *, system: str | None = None,
              num_top: int = 5, think: bool | str | None = None,
              messages: Sequence[Message] = (), answer_format: Format | None = None,
              tools: Sequence[Tool] = ()) -> ChatBackend:
    """A conversation with ``model``, wherever it runs (no drafter yet: ``speculate``):
    the CLI, the window and ``lantern serve`` all open their chats here. ``messages`` are
    the turns so far, ``answer_format`` the structured output, ``tools`` the tools offered
    through the model's template (a caller that runs them attaches their runner)."""
    if isinstance(model, RemoteModel):
        chat: ChatBackend = RemoteSession(model, options, system, num_top=num_top)
    else:
        from engine.runtime.session import LocalSession

        chat = LocalSession(model, options, system, num_top=num_top)
    chat.think = think
    chat.messages = list(messages)
    chat.format = answer_format
    chat.tools = list(tools)
    return chat


def speculate(chat: ChatBackend, choice: str, store: Store | None,
              requantize: str | None = None) -> str | None:
    """Give a local ``chat`` the drafter ``choice`` names (draft models come from
    ``store``; None: a bare GGUF); returns what the user should know about it, if anything.
    A chat that cannot speculate (a server's) is left as it is."""
    if Capability.SPECULATION not in chat.capabilities:
        return None
    from engine.runtime.speculation import drafter_for, speculation_note

    chat.drafter = drafter_for(choice, chat.model, store, requantize=requantize)
    return speculation_note(choice, chat.model.row_invariant)


def steer(chat: ChatBackend, steering: Steering) -> None:
    """Steer a local ``chat``'s answers by control vectors from its next answer on;
    ControlVectorMismatch when one was made for another model (checked now, not later)."""
    from engine.runtime.session import LocalSession

    if not isinstance(chat, LocalSession):
        raise GenerationError("control vectors steer a model Lantern runs, not a server's")
    previous, chat.steering = chat.steering, steering
    try:
        chat.steering_table()
    except ControlVectorMismatch:
        chat.steering = previous
        raise
