"""Freed memory handed back to the system after a model switch.

glibc keeps the memory a dropped model's ONNX Runtime session freed in its per-thread
arenas, so without a trim the process grows by part of a model's working set with every
switch (the soak in BENCHMARKS.md). ``malloc_trim`` returns it; other C libraries and
systems have no such call and need none.
"""

from __future__ import annotations

import ctypes
import sys
import threading


def return_freed_memory() -> None:
    """Trim glibc's heaps on a thread of its own (a large heap takes milliseconds)."""
    if not sys.platform.startswith("linux"):
        return
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        threading.Thread(target=trim, args=(0,), name="malloc-trim", daemon=True).start()
