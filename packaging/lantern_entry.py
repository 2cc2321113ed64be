"""The bundle's program: the whole ``lantern`` command line; with no command (as when
double-clicked) or only window options it opens the desktop window.

Each loaded tokenizer encodes in a child process (engine/tokenizer/encoder_process.py),
which a frozen bundle, having no interpreter of its own, starts as this same program with
``FROZEN_FLAG``: then it is that child and nothing else."""

import sys

if __name__ == "__main__":
    from engine.tokenizer.encoder_child import FROZEN_FLAG

    if sys.argv[1:] == [FROZEN_FLAG]:
        from engine.tokenizer.encoder_child import main as tokenizer_child

        sys.exit(tokenizer_child())
    from app.launcher import main

    sys.exit(main())
