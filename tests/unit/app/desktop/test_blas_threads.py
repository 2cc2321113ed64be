"""The desktop app's process tells numpy's BLAS threads not to spin between calls
(app/desktop/blas_threads.py): set before the app's imports load numpy, so an idle worker
then burns no CPU; a value the user set stands."""

import os
import subprocess
import sys
from pathlib import Path

from app.desktop.blas_threads import SHORTEST_SPIN, SPIN, no_blas_spinning

ROOT = Path(__file__).resolve().parents[4]
# Started as the window is (app.launcher.open_window), the "app" multiplies once and then idles:
# it prints the spin setting it found and the CPU its process used while idle.
APP = """
import os, time
import numpy as np

def main(argv):
    a = np.ones((512, 512), np.float32)
    a @ a
    started = time.process_time()
    time.sleep(0.3)
    print(os.environ.get("OPENBLAS_THREAD_TIMEOUT"), time.process_time() - started)
    return 0
"""


def run_window(tmp_path: Path, **env: str) -> tuple[str, float]:
    (tmp_path / "idle_app.py").write_text(APP)
    base = {k: v for k, v in os.environ.items() if k != SPIN}
    child_env = {**base, **env, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c",
                          "import importlib, sys; from app.launcher import open_window; "
                          "sys.exit(open_window([], lambda: importlib.import_module('idle_app')))"],
                         cwd=ROOT, env=child_env, check=True, capture_output=True, text=True,
                         timeout=60).stdout.split()
    return out[0], float(out[1])


def test_the_window_process_starts_with_blas_threads_that_sleep_when_idle(tmp_path):
    spin, idle_cpu_s = run_window(tmp_path)
    assert spin == SHORTEST_SPIN
    # OpenBLAS's default spin burns about 0.1 s a worker thread after each call
    assert idle_cpu_s < 0.03


def test_a_value_the_user_set_stands(tmp_path, monkeypatch):
    assert run_window(tmp_path, **{SPIN: "20"})[0] == "20"
    monkeypatch.setenv(SPIN, "12")
    no_blas_spinning()
    assert os.environ[SPIN] == "12"
    monkeypatch.delenv(SPIN)
    no_blas_spinning()
    assert os.environ[SPIN] == SHORTEST_SPIN
