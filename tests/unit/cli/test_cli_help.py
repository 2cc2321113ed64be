"""`lantern run --help` explains every option and argument."""

import argparse

from engine.cli import build_parser


def test_every_run_option_has_help_text():
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    run = sub.choices["run"]
    silent = [a.option_strings[0] if a.option_strings else a.dest for a in run._actions
              if not a.help or a.help == argparse.SUPPRESS]
    assert silent == []
    assert "context size in tokens" in run.format_help()
