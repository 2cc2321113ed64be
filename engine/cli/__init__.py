"""The ``lantern`` command line.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module
sets ``func`` on its parser. Errors derived from LanternError print as one line.
"""

import argparse
import importlib
import sys

from engine import __version__
from engine.errors import LanternError

COMMAND_MODULES = (
    "engine.cli.store_commands",   # list, show, import
    "engine.cli.tokenize_commands",  # tokenize
    "engine.cli.run_command",      # run
    "engine.cli.debug_command",    # debug
    "engine.cli.prompt_commands",  # prompt
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lantern",
        description="Chat with, and see inside, the models in your Ollama store.",
    )
    parser.add_argument("--version", action="version", version=f"lantern {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(sub)
    return parser


def add_models_dir(parser: argparse.ArgumentParser) -> None:
    """Every command accepts --models-dir (default: $OLLAMA_MODELS or ~/.ollama/models)."""
    parser.add_argument(
        "--models-dir",
        metavar="DIR",
        help="Ollama model store (default: $OLLAMA_MODELS or ~/.ollama/models)",
    )


def launch_desktop() -> int:
    """No subcommand: open the desktop window (the app package is a launch-time plug-in)."""
    try:
        app_main = importlib.import_module("app.main")
    except ImportError:
        print(
            "lantern: the desktop window is not available in this install yet; "
            "use a subcommand (lantern --help).",
            file=sys.stderr,
        )
        return 2
    return app_main.main()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        return launch_desktop()
    try:
        return args.func(args) or 0
    except LanternError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
