"""The ``lantern`` and ``lantern-gui`` programs: the window, or the command line.

``lantern`` with no command, a ``.gguf`` to open or only the window's own options opens the
window; any command goes to engine.cli. The window's process is set up before anything
loads numpy: BLAS threads that sleep when idle, then a restart with glibc's huge pages.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

from app.desktop.blas_threads import no_blas_spinning
from app.desktop.huge_pages import restart_with_huge_pages
from engine import cli


def wants_desktop(argv: list[str]) -> bool:
    """No command but the window's own business: nothing, a .gguf to open, or an option
    the command line does not have (``--models-dir DIR``, ``--self-test``: see lantern-gui -h)."""
    if not argv:
        return True
    first = argv[0]
    return first.lower().endswith(".gguf") or (
        first.startswith("-") and first not in ("-h", "--help", "--version",
                                                "--install-desktop-entry"))


def window_module() -> ModuleType:
    from app import main as window
    return window


def open_window(argv: list[str], window: Callable[[], ModuleType] = window_module) -> int:
    """The window in this process, its BLAS threads told not to spin before its imports
    load numpy."""
    no_blas_spinning()
    return window().main(argv)


def window_process() -> None:
    """Make this process the window's before anything loads (the window's benchmarks start
    so too): BLAS threads that sleep when idle, then a restart with huge pages."""
    no_blas_spinning()
    restart_with_huge_pages()


def desktop() -> int:
    """``lantern-gui`` and ``python -m app``: the window, whatever the arguments."""
    window_process()
    return open_window(sys.argv[1:])


def main(argv: list[str] | None = None) -> int:
    """``lantern``: the window when no command is given, else the command line."""
    if argv is None and wants_desktop(sys.argv[1:]):
        return desktop()
    argv = sys.argv[1:] if argv is None else argv
    if wants_desktop(argv):
        return open_window(argv)
    parser = cli.parser_for(argv)
    parser.add_argument("--install-desktop-entry", action="store_true",
                        help="add Lantern (and .gguf files) to this user's application menu")
    args = parser.parse_args(argv)
    if args.install_desktop_entry:
        from app.desktop import desktop_entry
        return desktop_entry.main()
    return cli.run(args)
