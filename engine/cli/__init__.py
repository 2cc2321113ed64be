"""The ``lantern`` command line.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module
sets ``func`` on its parser. Errors derived from LanternError print as one line.
"""

import argparse
import importlib
import sys

from engine import __version__
from engine.cli.blas_threads import no_blas_spinning
from engine.cli.hints import explain
from engine.cli.huge_pages import restart_with_huge_pages
from engine.errors import LanternError

COMMAND_MODULES = (
    "engine.cli.store_commands",   # list, show, import
    "engine.cli.pull_commands",    # pull, rm, cp
    "engine.cli.tokenize_commands",  # tokenize
    "engine.cli.run_command",      # run
    "engine.cli.serve_command",    # serve
    "engine.cli.debug_command",    # debug
    "engine.cli.inspect_command",  # inspect
    "engine.cli.prompt_commands",  # prompt
    "engine.cli.crosscheck_command",  # crosscheck
    "engine.cli.compare_command",  # compare
    "engine.cli.trace_command",    # trace
    "engine.cli.steer_command",    # steer
)


def build_parser(modules: tuple[str, ...] = COMMAND_MODULES) -> argparse.ArgumentParser:
    """The parser of ``modules``' commands (all of them unless told)."""
    parser = argparse.ArgumentParser(
        prog="lantern",
        description="Chat with, and see inside, the models in your Ollama store.",
    )
    parser.add_argument("--version", action="version", version=f"lantern {__version__}")
    parser.add_argument("--install-desktop-entry", action="store_true",
                        help="add Lantern (and .gguf files) to this user's application menu")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in modules:
        importlib.import_module(module_name).register(sub)
    return parser


def add_models_dir(parser: argparse.ArgumentParser) -> None:
    """Every command accepts --models-dir (default: $OLLAMA_MODELS or ~/.ollama/models)."""
    parser.add_argument(
        "--models-dir",
        metavar="DIR",
        help="Ollama model store (default: $OLLAMA_MODELS or ~/.ollama/models)",
    )


def launch_desktop(module: str = "app.main", *args: object) -> int:
    """Hand over to the desktop app's ``module.main(*args)``: the window, or its desktop-entry
    installer (the app package is a launch-time plug-in)."""
    no_blas_spinning()                  # before the app's imports load numpy
    try:
        app_module = importlib.import_module(module)
    except ImportError:
        print(
            "lantern: the desktop window is not available in this install yet; "
            "use a subcommand (lantern --help).",
            file=sys.stderr,
        )
        return 2
    return app_module.main(*args)


def wants_desktop(argv: list[str]) -> bool:
    """No command but the window's own business: nothing, a .gguf to open, or an option
    this parser does not have (``--models-dir DIR``, ``--self-test``: see lantern-gui -h)."""
    if not argv:
        return True
    first = argv[0]
    return first.lower().endswith(".gguf") or (
        first.startswith("-") and first not in ("-h", "--help", "--version",
                                                "--install-desktop-entry"))


def window_process() -> None:
    """Make this process the window's before anything loads: BLAS threads that sleep when
    idle, then a restart with huge pages (the benchmarks of the window start so too)."""
    no_blas_spinning()
    restart_with_huge_pages()


def desktop() -> int:
    """``lantern-gui`` and ``python -m app``: the window, whatever the arguments."""
    window_process()
    return launch_desktop("app.main", sys.argv[1:])


def main(argv: list[str] | None = None) -> int:
    if argv is None and wants_desktop(sys.argv[1:]):
        return desktop()
    argv = sys.argv[1:] if argv is None else argv
    if wants_desktop(argv):
        return launch_desktop("app.main", argv)
    # `lantern run` parses with its own module only: a run that a server answers then
    # imports little more than the chat client (BENCHMARKS.md, '2026-11-25')
    parser = build_parser(("engine.cli.run_command",) if argv[0] == "run" else COMMAND_MODULES)
    args = parser.parse_args(argv)
    if args.install_desktop_entry:
        return launch_desktop("app.desktop.desktop_entry")
    try:
        return args.func(args) or 0
    except LanternError as error:
        print(f"Error: {explain(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
