"""The labels ``ollama show`` / ``ollama list`` print for a model: parameter count, size
label ("494.03M", "1.5B") and quantization ("Q4_K_M"), computed the way Ollama does
(format.HumanNumber and fs/ggml FileType names).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from engine.gguf.reader import TensorInfo

# general.file_type values (llama_ftype) as Ollama names them; gaps were never in GGUF files.
_FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
    16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
    22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
    28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE",
}


def parameter_count(tensors: Iterable[TensorInfo]) -> int:
    return sum(t.n_elements for t in tensors)


def human_number(n: int) -> str:
    """Ollama's format.HumanNumber: 494032768 -> "494.03M", 1543714304 -> "1.5B"."""
    for scale, suffix, decimals in ((10**9, "B", 1), (10**6, "M", 2)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f}{suffix}" if value.is_integer() else f"{value:.{decimals}f}{suffix}"
    if n >= 1000:
        return f"{n / 1000:.0f}K"
    return str(n)


def quantization_label(file_type: int | None, tensors: Iterable[TensorInfo]) -> str:
    """``general.file_type`` by Ollama's name, else the type holding most weights."""
    if file_type in _FILE_TYPES:
        return _FILE_TYPES[file_type]
    weights: Counter[str] = Counter()
    for tensor in tensors:
        if len(tensor.shape) >= 2:
            weights[tensor.ggml_type.name] += tensor.n_elements
    return weights.most_common(1)[0][0] if weights else "unknown"
