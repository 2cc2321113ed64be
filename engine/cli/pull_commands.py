"""``lantern pull | rm | cp``: the store managed without Ollama, with Ollama's words
(``deleted 'NAME'``, ``copied 'SRC' to 'DST'``). Pull draws a progress bar on a
terminal and prints plain status lines otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

from engine.cli import add_models_dir
from engine.store import Store
from engine.store.copy_remove import copy_model, remove_model
from engine.store.humanize import human_bytes
from engine.store.pull import PullProgress, pull_model

BAR_WIDTH = 24


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("pull", help="download a model from a registry into the store")
    p.add_argument("model", metavar="NAME", help="e.g. qwen2.5vl:3b or host:port/ns/model:tag")
    p.add_argument("--insecure", action="store_true",
                   help="allow a plain-http registry (a private one on your network)")
    add_models_dir(p)
    p.set_defaults(func=cmd_pull)

    p = subparsers.add_parser("rm", help="remove a model (and the blobs no other model uses)")
    p.add_argument("models", metavar="NAME", nargs="+")
    add_models_dir(p)
    p.set_defaults(func=cmd_rm)

    p = subparsers.add_parser("cp", help="copy a model to a new name (shares its blobs)")
    p.add_argument("source", metavar="SRC")
    p.add_argument("destination", metavar="DST")
    add_models_dir(p)
    p.set_defaults(func=cmd_cp)


class ProgressPrinter:
    """A one-line bar (percent, bytes, speed, ETA) on a TTY; status lines elsewhere."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.started = time.monotonic()
        self.status = ""
        self.width = 0

    def __call__(self, progress: PullProgress) -> None:
        if not self.tty:
            if progress.status != self.status:
                sizes = f" {human_bytes(progress.blob_size)}" if progress.blob_size else ""
                print(progress.status + sizes, file=self.out, flush=True)
            self.status = progress.status
            return
        if progress.status != self.status and not progress.status.startswith("pulling "):
            self._line(progress.status, end="\n")
        elif progress.total:
            self._line(self.bar(progress))
        self.status = progress.status

    def bar(self, progress: PullProgress) -> str:
        """``pulling 0e769075cd16  42% ▕██████    ▏ 1.3 GB of 3.2 GB · 12 MB/s · 2m05s left``"""
        filled = int(progress.fraction * BAR_WIDTH)
        return (f"{progress.status} {progress.fraction:4.0%} "
                f"▕{'█' * filled}{' ' * (BAR_WIDTH - filled)}▏ "
                f"{progress.describe(time.monotonic() - self.started)}")

    def _line(self, text: str, end: str = "") -> None:
        self.out.write("\r" + text.ljust(self.width) + end)
        self.out.flush()
        self.width = 0 if end else len(text)

    def close(self) -> None:
        if self.tty and self.width:
            self.out.write("\n")
            self.width = 0


def cmd_pull(args: argparse.Namespace) -> int:
    printer = ProgressPrinter(sys.stderr)
    try:
        result = pull_model(Store.open(args.models_dir), args.model, insecure=args.insecure,
                            progress=printer)
    except KeyboardInterrupt:
        printer.close()
        print("pull interrupted; what was downloaded is kept: run the same command to "
              "resume", file=sys.stderr)
        return 130
    finally:
        printer.close()
    note = f", {result.skipped} blobs already there" if result.skipped else ""
    resumed = f", resumed {human_bytes(result.resumed)}" if result.resumed else ""
    print(f"pulled {result.name.display} ({human_bytes(result.size)}; downloaded "
          f"{human_bytes(result.downloaded)}{resumed}{note})")
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    store = Store.open(args.models_dir)
    for name in args.models:
        removal = remove_model(store, name)
        kept = f", {removal.shared} blobs kept for other models" if removal.shared else ""
        print(f"deleted '{name}' (freed {human_bytes(removal.freed)}{kept})")
    return 0


def cmd_cp(args: argparse.Namespace) -> int:
    copy_model(Store.open(args.models_dir), args.source, args.destination)
    print(f"copied '{args.source}' to '{args.destination}'")
    return 0
