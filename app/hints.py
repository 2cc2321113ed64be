"""An error's remedy in the app's terms: the control that makes the choice."""

from __future__ import annotations

from engine.errors import LanternError, Remedy

CONTROLS = {
    Remedy.SAME_WEIGHTS: "tick “The server runs the same weights” in the cross-check",
    Remedy.API_KEY: "File → Connections…",
    Remedy.MODELS_DIR: "File → Choose model folder…",
    Remedy.SPECULATE: "Settings → Engine → speculative decoding",
    Remedy.PROMPT: "type a message",
    Remedy.DUMP_MODEL: "load the model it was written for, or write one of this model "
                       "with Export layer dump…",
    Remedy.PROJECTOR: "import the model as a text GGUF with its projector: lantern import "
                      "FILE.gguf NAME --projector MMPROJ.gguf",
    Remedy.OLLAMA: "run it with Ollama; pick another model on the left to chat here",
}


def explain(error: LanternError) -> str:
    """The error's line with the control that fixes it, where the app has one."""
    return with_hint(str(error), error.remedy)


def with_hint(message: str, remedy: Remedy | None) -> str:
    """``message`` with the remedy's hint, where there is one."""
    hint = CONTROLS.get(remedy) if remedy is not None else None
    return f"{message} ({hint})" if hint else message
