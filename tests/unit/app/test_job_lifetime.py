"""A finished job is destroyed by its runner on the GUI thread once its thread has ended,
not by Python's garbage collector at some later moment on some thread (a crash now and
then: a segmentation fault once ended a test run)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import shiboken6

from app.workers import CallJob, JobRunner

ROOT = Path(__file__).resolve().parents[3]


def test_a_finished_job_is_destroyed_by_its_runner(qtbot):
    runner = JobRunner()

    def work() -> bool:
        return job.cancel_event.is_set()          # the closure names its job: a cycle

    job = CallJob(work)
    runner.start(job)
    qtbot.waitUntil(lambda: not runner._running, timeout=10_000)    # reaped
    assert not shiboken6.isValid(job)               # now, not when a collection meets it
    assert job.ended.is_set()                       # its Python side stays readable


@pytest.mark.slow
def test_many_jobs_with_collections_on_every_thread_do_not_crash():
    for _ in range(3):
        run = subprocess.run([sys.executable, "-m", "tests.unit.app.job_stress", "20000"],
                             cwd=ROOT, capture_output=True, text=True, timeout=600,
                             env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
        assert run.returncode == 0, run.stderr[-2000:]
        assert int(run.stdout.split()[-1]) >= 20000
