"""The desktop app's process keeps numpy's BLAS threads from spinning between calls.

OpenBLAS's worker threads wait for the next call by spinning, by default for 2**28 cycles
(about a tenth of a second) after each one. The reference check, the inspection and the
attribution run numpy on a worker thread while the window is in use; on a machine with few
cores the spinning threads hold the cores the window's thread needs, and the window stalls
(docs/benchmarks-journal.md, 'BLAS threads that spin'). The wait is read once, when the
library loads, so it is set before numpy is imported; a value the user set stands.
"""

from __future__ import annotations

import os

SPIN = "OPENBLAS_THREAD_TIMEOUT"
SHORTEST_SPIN = "4"     # 2**4 cycles, OpenBLAS's least: an idle thread sleeps at once


def no_blas_spinning() -> None:
    os.environ.setdefault(SPIN, SHORTEST_SPIN)
