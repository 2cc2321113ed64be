"""An error's remedy in the CLI's terms: the flag (or variable) that makes the choice."""

from __future__ import annotations

from engine.errors import LanternError, Remedy
from engine.remote.connection import API_KEY_ENV

FLAGS = {
    Remedy.PLAIN_HTTP: "pass --insecure",
    Remedy.SAME_WEIGHTS: "pass --same-weights",
    Remedy.API_KEY: f"pass --api-key or set ${API_KEY_ENV}",
    Remedy.MODELS_DIR: "pass --models-dir",
    Remedy.SPECULATE: "choose with --speculate",
    Remedy.TEMPLATE: "drop --raw",
    Remedy.PROMPT: "pass a PROMPT",
    Remedy.DUMP_MODEL: "pass the MODEL the dump was written for, or write one of this "
                       "MODEL with --dump",
    Remedy.PROJECTOR: "import the model as a text GGUF with its projector: lantern import "
                      "FILE.gguf NAME --projector MMPROJ.gguf",
    Remedy.OLLAMA: "run it with `ollama run`; lantern list notes the models Lantern cannot run",
}


def explain(error: LanternError) -> str:
    """The error's line with the flag that fixes it, where one does."""
    return with_hint(str(error), error.remedy)


def with_hint(message: str, remedy: Remedy | None) -> str:
    """``message`` with the remedy's hint, where there is one."""
    hint = FLAGS.get(remedy) if remedy is not None else None
    return f"{message} ({hint})" if hint else message
