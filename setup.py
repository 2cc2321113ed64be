"""Builds Lantern's ONNX Runtime custom-op library, engine/native/_lantern_ops (ARCHITECTURE.md §3).

Everything else about the package is in pyproject.toml. The library is a plain shared
library loaded by ONNX Runtime (not a Python module); it is optional: where no C compiler
is found the package still installs and the engine runs its MatMulNBits mapping instead.
Every file is compiled with the same flags: the SIMD kernels choose their instructions
per function at run time, so there is never a -march flag.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = Path("engine/native")
# what ONNX Runtime (RegisterCustomOps), engine.native and the kernels' tests call
EXPORTS = ["RegisterCustomOps", "lq_isa", "lq_row_bytes", "lq_act_bytes", "lq_quantize_act",
           "lq_dequantize_row", "lq_matmul_exact", "lq_matmul_fast"]


class BuildCustomOps(build_ext):
    """A shared library with no PyInit_ function: export the C entry points instead."""

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return EXPORTS

    def get_ext_filename(self, fullname: str) -> str:
        # _lantern_ops.so / .dll / .dylib: no interpreter tag, any Python loads it the same
        suffix = {"win32": ".dll", "darwin": ".dylib"}.get(sys.platform, ".so")
        return str(Path(*fullname.split("."))) + suffix


def _flags() -> list[str]:
    if sys.platform == "win32":
        return ["/O2", "/fp:precise"]
    # no contraction of a * b + c into one FMA behind the code's back: the kernels' rounding
    # is what they write (exact mode equals gguf.quants.dequantize's values)
    return ["-O2", "-ffp-contract=off"]


setup(
    ext_modules=[Extension(
        "engine.native._lantern_ops",
        sources=sorted(str(p) for p in NATIVE.glob("*.c")),
        include_dirs=[str(NATIVE)],
        extra_compile_args=_flags(),
        optional=True,  # no compiler: installs without it, and the engine falls back
    )],
    cmdclass={"build_ext": BuildCustomOps},
)
