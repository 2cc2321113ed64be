"""The user's Ollama model store: names, manifests, blobs, layers, import."""

from engine.store.names import ModelName
from engine.store.store import LocalModel, Store, StoreProblem

__all__ = ["LocalModel", "ModelName", "Store", "StoreProblem"]
