"""A replaced model freed off the GUI thread and its memory handed back to the system,
and start-up's objects kept out of the garbage collector's full passes.

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
import weakref


def let_go(dropped: list[object]) -> None:
    """Drop what ``dropped`` holds (a replaced model) on a thread of its own; the caller
    keeps no other reference. Unmapping a model's files takes tens of milliseconds
    without the GIL: on the GUI thread the window would wait for it. Whoever lets go of
    each object last (an interrupted answer's job may still hold the model a moment
    longer), glibc's heaps are trimmed once it is gone."""
    for thing in dropped:
        if thing is not None:
            weakref.finalize(thing, return_freed_memory)
    threading.Thread(target=dropped.clear, name="lantern-release", daemon=True).start()


def return_freed_memory() -> None:
    """Trim glibc's heaps on a thread of its own (a large heap takes milliseconds)."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None) \
        if sys.platform.startswith("linux") else None
    if trim is not None:
        threading.Thread(target=trim, args=(0,), name="malloc-trim", daemon=True).start()


def freeze_startup_objects() -> None:
    """Collect once, then move every object left into the collector's permanent generation
    (``gc.freeze``); call it when start-up is done, before the window shows."""
    gc.collect()
    gc.freeze()
