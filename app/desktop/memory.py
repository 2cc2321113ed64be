"""A replaced model freed off the GUI thread and its memory handed back to the system,
and start-up's objects kept out of the garbage collector's full passes.

glibc keeps the memory a dropped model's ONNX Runtime session freed in its per-thread
arenas, so without a trim the process grows by part of a model's working set with every
switch (the soak in BENCHMARKS.md). ``malloc_trim`` returns it; other C libraries and
systems have no such call and need none.

glibc also keeps small freed blocks in "fast bins", unmerged, until a larger request
merges them all at once: a long chat's bubbles leave some 200 000 of them, and whichever
call comes next on the GUI thread (a history query) paid tens of milliseconds for the lot.
Without fast bins each free merges its block as it goes, inside the slices that destroy
the bubbles.

A full pass of the garbage collector walks every tracked object of the process while it
holds the GIL, on whichever thread allocated last: a worker's pass stops the window as
long as one of its own. Most of those objects are made at start (modules, classes, the
window's widgets) and live as long as the process; frozen once the window is built, no
later pass walks them again.
"""

from __future__ import annotations

import gc
import queue
import threading
import time
import weakref

from engine.heap import c_library, give_back_freed_memory

M_MXFAST = 1            # mallopt's parameter: the largest block a fast bin keeps
RELEASE_WAIT_S = 10.0   # how long the trim waits for a replaced model's last holders
_releases: queue.SimpleQueue[list[object]] = queue.SimpleQueue()
_releaser: threading.Thread | None = None


def let_go(dropped: list[object]) -> None:
    """Drop what ``dropped`` holds (a replaced model and its session) on the release
    thread; the caller keeps no other reference. Unmapping a model's files takes tens of
    milliseconds without the GIL: on the GUI thread the window would wait for it. One
    long-lived thread, not one per call: the GUI thread starting a thread waits for it
    to run, which is for the GIL that a model's teardown holds."""
    global _releaser
    if _releaser is None:
        _releaser = threading.Thread(target=_release_forever, name="lantern-release",
                                     daemon=True)
        _releaser.start()
    _releases.put(dropped)


def _release_forever() -> None:
    """Drops each list's objects, waits until they are gone (an interrupted answer's job
    may hold the model a moment longer) and trims glibc's heaps."""
    while True:
        dropped = _releases.get()
        watched = [weakref.ref(thing) for thing in dropped if _watchable(thing)]
        dropped.clear()
        deadline = time.monotonic() + RELEASE_WAIT_S
        while any(ref() is not None for ref in watched) and time.monotonic() < deadline:
            time.sleep(0.05)
        give_back_freed_memory()


def _watchable(thing: object) -> bool:
    try:
        weakref.ref(thing)
    except TypeError:                # None, or a type without weak references
        return False
    return True


def merge_freed_blocks() -> None:
    """Turn glibc's fast bins off for the whole process (other C libraries: nothing to
    do). Call it at start, before the window is built."""
    mallopt = c_library("mallopt")
    if mallopt is not None:
        mallopt(M_MXFAST, 0)


def freeze_startup_objects() -> None:
    """Collect once, then move every object left into the collector's permanent generation
    (``gc.freeze``); call it when start-up is done, before the window shows."""
    gc.collect()
    gc.freeze()
