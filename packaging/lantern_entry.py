"""The bundle's program: the whole ``lantern`` command line; with no command (as when
double-clicked) or only window options it opens the desktop window.

Each loaded tokenizer encodes in a spawned child process (engine/tokenizer/
encoder_process.py), which a frozen bundle starts as this same program:
``freeze_support`` turns such a start into the child, and the ``__main__`` guard keeps the
child from running the command line again."""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from app.launcher import main

    sys.exit(main())
