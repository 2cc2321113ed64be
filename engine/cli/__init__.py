"""The ``lantern`` command line.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module
sets ``func`` on its parser. Errors derived from LanternError print as one line.
"""

import argparse
import importlib
import sys

from engine import __version__
from engine.cli.hints import explain
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


def parser_for(argv: list[str]) -> argparse.ArgumentParser:
    """The parser for ``argv``: `lantern run` parses with its own module only, so a run that a
    server answers imports little more than the chat client
    (docs/benchmarks-journal.md, '2026-11-25')."""
    return build_parser(("engine.cli.run_command",) if argv[:1] == ["run"] else COMMAND_MODULES)


def run(args: argparse.Namespace) -> int:
    """Run the parsed command; an error derived from LanternError prints as one line."""
    if not hasattr(args, "func"):
        print("lantern: name a command (lantern --help lists them)", file=sys.stderr)
        return 2
    try:
        return args.func(args) or 0
    except LanternError as error:
        print(f"Error: {explain(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def main(argv: list[str] | None = None) -> int:
    """The command line alone (``python -m engine.cli``); the ``lantern`` program is
    app.launcher, which also opens the window."""
    argv = sys.argv[1:] if argv is None else argv
    return run(parser_for(argv).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
