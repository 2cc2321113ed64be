"""A job's signals reach the window through bound methods only.

A job emits on its own thread. PySide6 queues a signal to a bound method of a QObject on
the GUI thread, but calls a lambda, a ``functools.partial`` or a plain function right
where the signal is emitted: on the job's thread, writing widgets the GUI thread reads
(what made the Settings box's MCP verdict and its tooltip race). This reads every module
of the app and refuses such a connection to a job's signal, wherever a new one is added.
"""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[3] / "app"


def names_a_job(node: ast.expr) -> bool:
    """``job``, ``self.job``, ``self._load_job``...: the object a signal hangs from."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return "job" in name.lower()


def unbound(slot: ast.expr) -> str | None:
    """What kind of callable runs on the emitting thread, if ``slot`` is one."""
    if isinstance(slot, ast.Lambda):
        return "a lambda"
    if isinstance(slot, ast.Call) and getattr(slot.func, "id", getattr(slot.func, "attr",
                                                                       "")) == "partial":
        return "a functools.partial"
    return None


def job_connections_off_the_gui_thread(source: str) -> list[tuple[int, str]]:
    """(line, what) of each ``<job>.<signal>.connect(<lambda or partial>)`` in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "connect" and node.args):
            continue
        signal = node.func.value
        if isinstance(signal, ast.Attribute) and names_a_job(signal.value):
            kind = unbound(node.args[0])
            if kind is not None:
                found.append((node.lineno, kind))
    return found


def test_the_check_sees_a_lambda_and_a_partial_on_a_jobs_signal():
    source = ("job.done.connect(lambda r: box.set(r))\n"
              "self._job.failed.connect(partial(self._said, 'x'))\n"
              "job.failed.connect(self._failed)\n"
              "button.clicked.connect(lambda: run())\n")
    assert job_connections_off_the_gui_thread(source) == [(1, "a lambda"),
                                                         (2, "a functools.partial")]


def test_no_jobs_signal_is_connected_to_a_lambda_or_partial():
    offending = [f"{path.relative_to(APP.parent)}:{line}: {kind}"
                 for path in sorted(APP.rglob("*.py"))
                 for line, kind in job_connections_off_the_gui_thread(
                     path.read_text(encoding="utf-8"))]
    assert not offending, ("a job's signal runs these on the job's thread; connect a bound "
                           "method of a QObject instead: " + "; ".join(offending))
