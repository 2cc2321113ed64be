"""What a remote engine's answers come down to, whichever API carried them: small frozen
records the session turns into Lantern's events."""

from __future__ import annotations

from dataclasses import dataclass, fields

from engine.chat.options import Options

DEFAULTS = Options()


@dataclass(frozen=True)
class ServerToken:
    """One generated token as a server reports it: text and log-probabilities, no id and
    no logit (servers send log-probabilities only)."""

    piece: str
    logprob: float
    top: tuple[tuple[str, float], ...]      # (piece, logprob), best first
    data: bytes | None = None               # the token's bytes, where the server sends them


@dataclass(frozen=True)
class Delta:
    """A piece of the streamed answer."""

    text: str
    tokens: tuple[ServerToken, ...] = ()    # empty when the server sent no log-probabilities
    tool_calls: tuple = ()                  # engine.chat.tools ToolCall records the server parsed
    thinking: str = ""                      # Ollama's "thinking": the model's thinking section


@dataclass(frozen=True)
class Finish:
    """The server's last word on an answer (counts it reports; 0 when it reports none)."""

    reason: str                             # "stop", "length"
    prompt_eval_count: int = 0
    eval_count: int = 0
    prompt_eval_duration: int = 0           # ns, Ollama only
    eval_duration: int = 0
    load_duration: int = 0


@dataclass(frozen=True)
class RemoteModelInfo:
    """A model a server offers."""

    name: str
    details: str = ""                       # "7.6B · qwen2 · Q4_K_M" where the server says
    vision: bool | None = None              # None: the server does not say (it decides)
    blob_digest: str | None = None          # Ollama: sha256 of the weights blob (from /api/show)


def chosen_options(options: Options) -> dict[str, object]:
    """The options to send: those that differ from Ollama's defaults, and the temperature
    always. The rest is left to the server, whose model may carry its own defaults."""
    chosen = {f.name: getattr(options, f.name) for f in fields(Options)
              if getattr(options, f.name) != getattr(DEFAULTS, f.name)}
    chosen["temperature"] = options.temperature
    if chosen.get("stop") is not None:
        chosen["stop"] = list(options.stop)
    return chosen
