"""The bundle's program: the whole ``lantern`` command line; with no command (as when
double-clicked) or only window options it opens the desktop window."""

import sys

from engine.cli import main

sys.exit(main())
