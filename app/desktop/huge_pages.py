"""The desktop app's process asks glibc for transparent huge pages for its large blocks.

Dropping a model (a model switch, the reference check's own decoder) frees its ONNX Runtime
session's memory inside one call that holds the GIL: the window runs no Python until it
returns, and the kernel's share of that work grows with the number of pages handed back.
In 2 MiB pages it is a fraction of the time in 4 KiB ones, with the same speed and memory
otherwise (docs/benchmarks-journal.md, 'Freeing a model in huge pages'). glibc does so
only when told at
process start (the ``glibc.malloc.hugetlb=1`` tunable), so the window's start replaces its
process once with the same command and the tunable set.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

TUNABLE = "glibc.malloc.hugetlb"
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def wanted() -> bool:
    """Linux with glibc, huge pages not switched off, a command that can be started again,
    and the tunable not set yet (the restarted process finds it set: no second restart)."""
    if not sys.platform.startswith("linux") or getattr(sys, "frozen", False):
        return False
    if TUNABLE in os.environ.get("GLIBC_TUNABLES", "") or not sys.executable:
        return False
    if platform.libc_ver()[0] != "glibc" or not getattr(sys, "orig_argv", None):
        return False
    try:
        return "[never]" not in THP_MODE.read_text()
    except OSError:
        return False


def restart_with_huge_pages() -> None:
    """Replace this process with its own command line and the tunable added; returns only
    when that is not wanted (or the system refuses, which costs nothing but the speed)."""
    if not wanted():
        return
    tunables = [t for t in os.environ.get("GLIBC_TUNABLES", "").split(":") if t]
    env = {**os.environ, "GLIBC_TUNABLES": ":".join([*tunables, f"{TUNABLE}=1"])}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, sys.orig_argv, env)
    except OSError:
        return
