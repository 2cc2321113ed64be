"""Which execution providers this onnxruntime build can run, under Lantern's short names.

The settings dialog offers only these, so a user never picks a provider that would
silently fall back to the CPU.
"""

from __future__ import annotations

import onnxruntime as ort

from engine.graph.kernels import describe, kernels_for
from engine.native import custom_ops
from engine.runtime.decoder import PROVIDERS


def available_providers() -> list[str]:
    """Short names ("cpu", "cuda", "coreml") of the providers this build has, CPU first."""
    have = set(ort.get_available_providers())
    return [name for name, provider in PROVIDERS.items() if provider in have]


def runtime_version() -> str:
    """The onnxruntime version (the About box shows it; app/ does not import onnxruntime)."""
    return ort.__version__


def cpu_kernels() -> str:
    """This CPU's features and fast mode's kernel choices for it (engine.graph.kernels)."""
    return describe(kernels_for())


def cpu_matmul() -> str:
    """What multiplies by the weights on the CPU: Lantern's GGUF matmul (and its kernels),
    or MatMulNBits and why the library is not used (engine.native)."""
    return custom_ops().describe()
