"""Start-up's objects leave the garbage collector's full passes; garbage is still freed;
a replaced model is freed on a thread of its own; small freed blocks are merged at once
(glibc)."""

import gc
import platform
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.desktop.memory import freeze_startup_objects, let_go


class Node:
    """A tracked object that can point at itself (a cycle only the collector frees)."""

    def __init__(self) -> None:
        self.link: Node | None = None


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_startup_objects_are_frozen_and_garbage_made_before_is_collected(unfrozen):
    kept = Node()
    garbage = Node()
    garbage.link = garbage
    dead = weakref.ref(garbage)
    del garbage
    before = gc.get_freeze_count()
    freeze_startup_objects()
    assert dead() is None                               # collected first, not frozen
    assert gc.get_freeze_count() > before
    assert not any(o is kept for o in gc.get_objects())  # no later pass walks it
    later = Node()
    later.link = later
    gone = weakref.ref(later)
    del later
    gc.collect()
    assert gone() is None                               # what comes after is collected


class Model:
    """Stands for a replaced model: records the thread its last reference went on."""

    def __init__(self, freed_on: list[str]) -> None:
        self.freed_on = freed_on

    def __del__(self) -> None:
        self.freed_on.append(threading.current_thread().name)


def test_a_replaced_model_is_freed_off_the_calling_thread():
    freed_on: list[str] = []
    let_go([Model(freed_on), None])
    deadline = time.monotonic() + 10
    while not freed_on and time.monotonic() < deadline:
        time.sleep(0.01)
    assert freed_on and freed_on[0] != threading.current_thread().name


FAST_BIN_BLOCKS = """
import ctypes, sys
from app.desktop.memory import merge_freed_blocks
if sys.argv[1] == "merged":
    merge_freed_blocks()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
                .split()]
libc.mallinfo.restype = Info
pairs = [(libc.malloc(48), libc.malloc(48)) for _ in range(20000)]
for block, _ in pairs:      # each freed block between two kept ones: none merges with the
    libc.free(ctypes.c_void_p(block))  # next or the heap's end, which would merge them all
print(libc.mallinfo().smblks)   # counted before any large request merges them
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's fast bins")
def test_small_freed_blocks_are_not_left_for_a_later_call_to_merge():
    def fast_bin_blocks(mode: str) -> int:
        return int(subprocess.run([sys.executable, "-c", FAST_BIN_BLOCKS, mode], check=True,
                                  capture_output=True, text=True,
                                  cwd=Path(__file__).parents[4]).stdout)

    assert fast_bin_blocks("as is") > 1000        # what a later large request merges
    assert fast_bin_blocks("merged") == 0
