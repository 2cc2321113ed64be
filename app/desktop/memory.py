"""Freed memory handed back to the system after a model switch, and start-up's objects
kept out of the garbage collector's full passes.

glibc keeps the memory a dropped model's ONNX Runtime session freed in its per-thread
arenas, so without a trim the process grows by part of a model's working set with every
switch (the soak in BENCHMARKS.md). ``malloc_trim`` returns it; other C libraries and
systems have no such call and need none.

A full pass of the garbage collector walks every tracked object of the process while it
holds the GIL, on whichever thread allocated last: a worker's pass stops the window as
long as one of its own. Most of those objects are made at start (modules, classes, the
window's widgets) and live as long as the process; frozen once the window is built, no
later pass walks them again.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading


def return_freed_memory() -> None:
    """Trim glibc's heaps on a thread of its own (a large heap takes milliseconds)."""
    if not sys.platform.startswith("linux"):
        return
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        threading.Thread(target=trim, args=(0,), name="malloc-trim", daemon=True).start()


def freeze_startup_objects() -> None:
    """Collect once, then move every object left into the collector's permanent generation
    (``gc.freeze``); call it when start-up is done, before the window shows."""
    gc.collect()
    gc.freeze()
