"""Plain numpy forward passes that every ONNX graph is checked against."""

from engine.reference.compare import LayerComparison, compare_layers, layer_label
from engine.reference.text import KVCache, ReferenceOutput, forward, greedy
from engine.reference.weights import LayerWeights, ReferenceWeights

__all__ = [
    "KVCache",
    "LayerComparison",
    "LayerWeights",
    "ReferenceOutput",
    "ReferenceWeights",
    "compare_layers",
    "forward",
    "greedy",
    "layer_label",
]
