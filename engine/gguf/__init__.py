"""GGUF models: metadata -> a checked ``ModelConfig``, tensors as zero-copy views.

    model = open_model(path, projector_path=None)
    model.config, model.metadata, model.tensors["blk.0.attn_q.weight"].dequantize()
"""

from engine.gguf.model import GGUFModel, open_model
from engine.gguf.reader import TensorInfo

__all__ = ["GGUFModel", "TensorInfo", "open_model"]
