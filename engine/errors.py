"""One error hierarchy: the engine raises these with the values that explain the problem;
the CLI and the app show ``str(error)`` as one readable line (no traceback).

Every message names the thing that is wrong and what to do about it, in neutral words:
where the remedy is a choice of the user's, ``remedy`` names it, and the CLI (a flag,
engine.cli.hints) and the app (a control, app.hints) add how to make it there.
"""

from enum import Enum


class Remedy(Enum):
    """A choice of the user's that would fix an error."""

    PLAIN_HTTP = "allow plain http for a registry"
    SAME_WEIGHTS = "assert that a server runs the same weights"
    API_KEY = "set a server's API key"
    MODELS_DIR = "choose the model store's folder"
    SPECULATE = "choose how to speculate"
    TEMPLATE = "send the prompt through the model's template"
    PROMPT = "give a prompt"
    DUMP_MODEL = "compare a dump with the model it was written for"
    PROJECTOR = "keep the vision tower in a separate projector file"
    OLLAMA = "run the model with Ollama, or choose one Lantern runs"


class LanternError(Exception):
    """Base class of every error a user may see."""

    def __init__(self, *args: object, remedy: Remedy | None = None) -> None:
        super().__init__(*args)
        self.remedy = remedy


class InvalidName(LanternError):
    """A model name that does not follow Ollama's naming rules."""


class ModelNotFound(LanternError):
    """No manifest for the requested model name."""


class CorruptModel(LanternError):
    """A manifest, blob or GGUF file that cannot be read as what it claims to be."""


class MissingBlob(CorruptModel):
    """A manifest refers to a blob that is not in the store."""


class DigestMismatch(CorruptModel):
    """A blob whose content does not hash to its name."""


class UnsupportedModel(LanternError):
    """A well-formed model that Lantern cannot run (architecture, tokenizer, tensor type...)."""


class TemplateError(LanternError):
    """A chat template that cannot be parsed or rendered."""


class ImageError(LanternError):
    """An image that cannot be used as model input."""


class GenerationError(LanternError):
    """Generation could not proceed (context overflow that cannot be resolved, bad options...)."""


class ControlVectorMismatch(LanternError):
    """A control vector that cannot steer this model (another width, depth or architecture)."""


class RegistryError(LanternError):
    """A model registry that cannot be reached or answers with something unusable."""


class Unauthorized(RegistryError):
    """The registry refused access (HTTP 401/403), even after the anonymous token flow."""


class DiskFull(LanternError):
    """No space left where the store writes."""


class Cancelled(LanternError):
    """An operation the user stopped; what can be resumed is kept."""


class RemoteError(LanternError):
    """A remote engine (Ollama, an OpenAI-compatible server) could not be used: unreachable,
    refused the key, lacks the model, or cut its answer."""


class StreamCut(RemoteError):
    """The server's answer ended before it said it was done; what arrived is kept."""
