"""Run many short jobs through one JobRunner while the garbage collector runs on every
thread: each job's closure names the job (a reference cycle), as the window's do. Before
jobs were destroyed by the runner after their threads ended, about one run in three of
20 000 jobs ended in a segmentation fault. Usage: ``python -m tests.unit.app.job_stress N``.
"""

import gc
import sys

from PySide6.QtCore import QObject, QTimer, Slot
from PySide6.QtWidgets import QApplication

from app.workers import CallJob, JobRunner, wait_for_all

IN_FLIGHT = 4


class Driver(QObject):
    """Starts the next job when one reports, until ``total`` have."""

    def __init__(self, app: QApplication, total: int) -> None:
        super().__init__()
        self.app, self.total, self.done = app, total, 0
        self.runner = JobRunner(self)

    def start_one(self) -> None:
        def work() -> bool:
            gc.collect(0)                     # a collection on the job's thread
            return job.cancel_event.is_set()

        job = CallJob(work)
        job.result.connect(self.on_result)
        self.runner.start(job)

    @Slot(object)
    def on_result(self, _value: object) -> None:
        self.done += 1
        if self.done >= self.total:
            self.app.quit()
        else:
            self.start_one()


def main(total: int) -> int:
    app = QApplication([])
    driver = Driver(app, total)
    collect = QTimer(interval=0)
    collect.timeout.connect(lambda: gc.collect(0))   # and on the GUI thread, every turn
    collect.start()
    for _ in range(IN_FLIGHT):
        driver.start_one()
    app.exec()
    wait_for_all()
    print(driver.done)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
