"""Freed memory handed back to the system without holding the GIL (glibc's ``malloc_trim``).

A dropped ONNX Runtime session leaves glibc's per-thread heaps empty, and glibc unmaps
emptied heaps inside whichever ``free`` comes next on them: a small one, on any thread,
with the GIL held for tens of milliseconds (a window would freeze meanwhile).
``malloc_trim`` does the same work first, called through ctypes, which lets go of the GIL;
what is unmapped later costs next to nothing. Other C libraries and systems have no such
call and need none.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from functools import cache


def c_library(name: str) -> Callable[..., int] | None:
    """The process's C library function ``name`` on Linux (glibc's heap calls), else None."""
    return getattr(ctypes.CDLL(None), name, None) if sys.platform.startswith("linux") \
        else None


@cache
def _trim() -> Callable[..., int] | None:
    return c_library("malloc_trim")


def give_back_freed_memory() -> None:
    """Return the heaps' free pages to the system, the GIL released meanwhile."""
    trim = _trim()
    if trim is not None:
        trim(0)
