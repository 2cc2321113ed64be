"""Start-up's objects leave the garbage collector's full passes; garbage is still freed;
a replaced model is freed on a thread of its own."""

import gc
import threading
import time
import weakref
from collections.abc import Iterator

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
