"""``python -m app``: the desktop window, started as ``lantern-gui`` starts it (the
application menu's entry runs this)."""

import sys

from app.launcher import desktop

if __name__ == "__main__":
    sys.exit(desktop())
