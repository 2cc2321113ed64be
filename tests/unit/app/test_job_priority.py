"""A job's thread, and every thread it starts (as ONNX Runtime starts its workers), gives
way to the GUI thread: on Linux it runs BACKGROUND_NICE steps below the process."""

import os
import sys
import threading

import pytest

from app.workers import BACKGROUND_NICE, CallJob, JobRunner

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="a thread's own nice value is Linux's")


def nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_a_job_and_the_threads_it_starts_run_below_the_window(qtbot):
    window_nice = nice_of_this_thread()
    seen: dict[str, int] = {}

    def work() -> None:
        seen["job"] = nice_of_this_thread()
        started = threading.Thread(target=lambda: seen.setdefault("child",
                                                                  nice_of_this_thread()))
        started.start()
        started.join()

    runner = JobRunner()
    job = runner.start(CallJob(work))
    qtbot.waitUntil(job.ended.is_set, timeout=10_000)
    wanted = min(19, window_nice + BACKGROUND_NICE)
    assert seen == {"job": wanted, "child": wanted}
    assert nice_of_this_thread() == window_nice          # the GUI thread keeps its own


def test_a_job_run_inline_leaves_its_callers_priority_alone(qtbot):
    """Tests (and any caller) may run a job on their own thread: only the threads JobRunner
    starts are lowered, since an unprivileged thread can never raise itself back."""
    before = nice_of_this_thread()
    seen: list[int] = []
    CallJob(lambda: seen.append(nice_of_this_thread())).run()
    assert seen == [before]
    assert nice_of_this_thread() == before
