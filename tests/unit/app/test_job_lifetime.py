"""A finished job is destroyed by its runner on the GUI thread once its thread has ended,
not by Python's garbage collector at some later moment on some thread (a crash now and
then: a segmentation fault once ended a test run). Once run, a job lets go of its work,
so what that work holds (a replaced model) is freed without waiting for the collector."""

import gc
import os
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import shiboken6

from app.workers import CallJob, GenerateJob, JobRunner

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


class Model:
    """Stands for what an answer's work holds (the model's session)."""


@pytest.mark.parametrize("make", [
    lambda work: CallJob(work),
    lambda work: GenerateJob(lambda: iter([work()]), lambda: None),
])
def test_a_finished_job_lets_go_of_its_work_without_the_collector(qtbot, make):
    runner = JobRunner()
    model = Model()
    held = weakref.ref(model)

    def work(model: Model = model) -> None:     # holds the model as a default
        job.cancel_event.is_set()                 # the closure names its job: a cycle

    gc.disable()
    try:
        job = make(work)
        del model
        runner.start(job)
        qtbot.waitUntil(lambda: not runner._running, timeout=10_000)
        del work
        assert held() is None                     # freed now, not at some full collection
    finally:
        gc.enable()
