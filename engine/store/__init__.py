"""The user's Ollama model store: names, manifests, blobs, layers. Importing a GGUF and
describing a model read GGUF files, so they live above this package (engine.catalog)."""

from engine.store.names import ModelName
from engine.store.store import LocalModel, Store, StoreProblem

__all__ = ["LocalModel", "ModelName", "Store", "StoreProblem"]
