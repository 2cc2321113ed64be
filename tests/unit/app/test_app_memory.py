"""Start-up's objects leave the garbage collector's full passes; garbage is still freed."""

import gc
import weakref
from collections.abc import Iterator

import pytest

from app.desktop.memory import freeze_startup_objects


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
