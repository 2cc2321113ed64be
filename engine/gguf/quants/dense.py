"""Float GGUF types, kept as dense matrices for a plain MatMul.

F32 stays a zero-copy view of the file; F16 stays float16 (exactly representable, half the
memory); BF16 widens to float32 (its exact value; ONNX Runtime's CPU MatMul has no bf16).
"""

from collections.abc import Callable

import numpy as np
from gguf import GGMLQuantizationType as T


def _f32(raw: np.ndarray, n: int, k: int) -> np.ndarray:
    return raw.view(np.float32).reshape(n, k)


def _f16(raw: np.ndarray, n: int, k: int) -> np.ndarray:
    return raw.view(np.float16).reshape(n, k)


def _bf16(raw: np.ndarray, n: int, k: int) -> np.ndarray:
    return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(n, k)


DENSE: dict[T, Callable[[np.ndarray, int, int], np.ndarray]] = {
    T.F32: _f32,
    T.F16: _f16,
    T.BF16: _bf16,
}
