"""Lantern's ONNX Runtime custom-op library (engine/native/op.c): where it is, whether it
loads, and why not (ARCHITECTURE.md §3).

The library is built by ``pip install -e .`` (setup.py) when a C compiler is present. Without
it (or with ``LANTERN_NATIVE=off``) the engine maps GGUF weights onto ONNX Runtime's
MatMulNBits instead, and says so. Read once per process; ``LANTERN_NATIVE`` is read each
time ``custom_ops`` is asked, so tests can switch it.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

ENV = "LANTERN_NATIVE"          # "off": never use the library
DOMAIN = "lantern"              # the op's ONNX domain
OP = "GgufMatMul"
MOE_OP = "GgufMoE"              # its sibling: each row by the experts its token chose
_NAME = "_lantern_ops" + {"win32": ".dll", "darwin": ".dylib"}.get(sys.platform, ".so")


@dataclass(frozen=True)
class CustomOps:
    """The library when it loads (``path``, ``isa``), else ``why`` it cannot be used."""

    path: Path | None
    isa: str | None = None       # the kernels this CPU runs: "avx512-vnni", ..., "portable"
    why: str | None = None
    _lib: ctypes.CDLL | None = field(default=None, repr=False, compare=False)

    @property
    def available(self) -> bool:
        return self.path is not None

    def reads(self, ggml_type: int, k: int, fast: bool = False) -> bool:
        """Does the op multiply by this GGML type with rows of k values (in fast mode: with
        quantized activations)?"""
        if self._lib is None:
            return False
        if fast:
            return self._lib.lq_act_bytes(ggml_type, k) > 0
        return self._lib.lq_row_bytes(ggml_type, k) > 0

    def gather_rows(self, ggml_type: int, k: int, matrix: np.ndarray,
                    ids: np.ndarray) -> np.ndarray | None:
        """Rows ``ids`` of a GGUF matrix (its bytes, uint8 [n, row bytes]) de-quantized to
        float32 [len(ids), k], gguf-py's values; in one call that does not hold the
        interpreter (a long prompt's embeddings would hold it for tens of milliseconds, in
        the window's way). None where the library does not read the type; ids are
        trusted to lie within the matrix."""
        if not self.reads(ggml_type, k) or not matrix.flags.c_contiguous:
            return None
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        out = np.empty((len(ids), k), dtype=np.float32)
        self._lib.lq_gather_rows(ggml_type, k, matrix.ctypes.data, ids.ctypes.data, len(ids),
                                 out.ctypes.data)
        return out

    def describe(self) -> str:
        """One line for `lantern run --verbose` and the engine's description."""
        if self.available:
            return f"Lantern's GGUF matmul ({self.isa} kernels), weights read in place"
        return f"ONNX Runtime's MatMulNBits, weights repacked ({self.why})"


def library_path() -> Path:
    """Where the build puts the library: beside this file (frozen apps: the same place
    under the bundle's root)."""
    return Path(__file__).with_name(_NAME)


def custom_ops() -> CustomOps:
    """The library's state for this process (``LANTERN_NATIVE=off`` turns it off)."""
    if os.environ.get(ENV, "").strip().lower() in {"off", "0", "no", "false"}:
        return CustomOps(None, why=f"turned off by {ENV}")
    return load(library_path())


@cache
def load(path: Path) -> CustomOps:
    """The library at ``path``, or why it cannot be used."""
    if not path.is_file():
        return CustomOps(None, why=f"{path.name} was not built; install a C compiler and "
                                   f"run `pip install -e .` again")
    try:
        lib = ctypes.CDLL(str(path))
        lib.lq_isa.restype = ctypes.c_char_p
        for sizer in (lib.lq_row_bytes, lib.lq_act_bytes):
            sizer.argtypes, sizer.restype = [ctypes.c_int, ctypes.c_int64], ctypes.c_size_t
        lib.lq_gather_rows.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_void_p,
                                       ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
        lib.lq_gather_rows.restype = None
        isa = lib.lq_isa().decode()
        lib.RegisterCustomOps  # noqa: B018 — the entry point ONNX Runtime calls must exist
    except (OSError, AttributeError) as e:
        return CustomOps(None, why=f"{path.name} does not load: {e}")
    return CustomOps(path, isa=isa, _lib=lib)
