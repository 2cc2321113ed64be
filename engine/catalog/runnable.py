"""Whether Lantern can run a store model, asked before any load: the checks a load starts
with (the architecture, every tensor, the projector, the tokenizer's kind), building
nothing. The model list and ``lantern list`` ask it of every model, so a model Lantern
cannot run is marked with the reason before anyone tries it."""

from __future__ import annotations

from engine.errors import LanternError
from engine.gguf import GGUFModel, open_model
from engine.store import LocalModel
from engine.tokenizer.load import check_tokenizer


def open_checked(model: LocalModel) -> GGUFModel:
    """The model's GGUF (with its projector), checked as a load would check it; raises the
    load's own CorruptModel or UnsupportedModel."""
    gguf = open_model(model.model_path, model.projector_path)
    check_tokenizer(gguf.metadata, model.model_path)
    return gguf


def without_path(message: str, model: LocalModel) -> str:
    """An error's line without the blob path it starts with (a digest means nothing to the
    user, who knows the model by name)."""
    for path in (model.model_path, model.projector_path):
        if path is not None and message.startswith(f"{path}: "):
            return message[len(f"{path}: "):]
    return message


def by_name(error: LanternError, model: LocalModel) -> LanternError:
    """``error`` (of the same kind and remedy) naming the model where it named its blob."""
    message = without_path(str(error), model)
    if message == str(error):
        return error
    return type(error)(f"{model.name.display}: {message}", remedy=error.remedy)
