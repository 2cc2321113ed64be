"""The desktop app's process restarts once with glibc's huge pages for large blocks
(app/desktop/huge_pages.py): the tunable reaches the new process, other tunables are kept,
a process that has it does not restart again, and large blocks then sit in huge pages."""

import os
import subprocess
import sys
from pathlib import Path

from app.desktop.huge_pages import THP_MODE, TUNABLE, wanted

ROOT = Path(__file__).resolve().parents[4]
# A restarted child prints its tunables, how often it ran and the huge pages under a
# 64 MiB block it wrote.
CHILD = """
import os, sys
from app.desktop.huge_pages import restart_with_huge_pages
runs = int(os.environ.get("RUNS", "0")) + 1
os.environ["RUNS"] = str(runs)
restart_with_huge_pages()
block = bytearray(64 << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
huge = sum(int(line.split()[1]) for line in open("/proc/self/smaps_rollup")
           if line.startswith("AnonHugePages:"))
print(os.environ.get("GLIBC_TUNABLES", ""), runs, huge)
"""


def run_child(tunables: str) -> tuple[str, int, int]:
    env = {**os.environ, "GLIBC_TUNABLES": tunables, "RUNS": "0"}
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True, timeout=60).stdout.split()
    *tunable, runs, huge = out
    return (tunable[0] if tunable else ""), int(runs), int(huge)


def huge_pages_possible() -> bool:
    return sys.platform.startswith("linux") and THP_MODE.exists() and \
        "[never]" not in THP_MODE.read_text()


def test_the_process_restarts_once_with_the_tunable_and_keeps_the_others():
    tunables, runs, huge_kib = run_child("glibc.malloc.arena_max=4")
    if not huge_pages_possible():
        assert (tunables, runs) == ("glibc.malloc.arena_max=4", 1)
        return
    assert tunables == f"glibc.malloc.arena_max=4:{TUNABLE}=1"
    assert runs == 2                                  # restarted once, not again
    assert huge_kib >= 2048                           # the block sits in huge pages


def test_a_process_that_has_the_tunable_is_not_restarted(monkeypatch):
    monkeypatch.setenv("GLIBC_TUNABLES", f"{TUNABLE}=0")
    assert not wanted()
    assert run_child(f"{TUNABLE}=0")[:2] == (f"{TUNABLE}=0", 1)


def test_a_frozen_bundle_is_not_restarted(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert not wanted()
