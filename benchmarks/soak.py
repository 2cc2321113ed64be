"""Soak: the real window through a long conversation, to see that nothing piles up.

One conversation of ``--turns`` turns (200 by default) on a small num_ctx, so the oldest
turns are left out again and again (context overflow); every ``--switch-every`` turns
the other model is loaded while an answer streams (the answer is interrupted), every
``--cancel-every`` turns the answer is stopped after its first tokens (Stop). Prints the
process's RSS every ``--rss-every`` turns, then checks that the log holds no traceback
and that the history has every turn, each answer complete unless it was stopped or
interrupted. A tiny synthetic model by default; ``--models-dir --model --model2`` for
real ones. Exit status 1 when a check fails. It starts as the app does: BLAS threads
told not to spin (app/desktop/blas_threads.py), the process restarted with glibc's huge
pages (app/desktop/huge_pages.py).

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m benchmarks.soak
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from PySide6.QtWidgets import QApplication

from benchmarks.ui_stalls import settle, tiny_store, wait_until


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--switch-every", type=int, default=25)
    parser.add_argument("--cancel-every", type=int, default=7)
    parser.add_argument("--rss-every", type=int, default=20)
    parser.add_argument("--num-ctx", type=int, default=1024)
    parser.add_argument("--num-predict", type=int, default=24)
    parser.add_argument("--models-dir")
    parser.add_argument("--model", help="the model to start with (with --models-dir)")
    parser.add_argument("--model2", help="the model to switch to (with --models-dir)")
    return parser.parse_args()


def history_problems(history, conversation: int | None, sent: list[str],
                     given_up: set[int]) -> list[str]:
    """What is wrong with the stored conversation: a turn missing or out of order, an
    answer incomplete that was not given up (or complete that was)."""
    if conversation is None or len(history.conversations()) != 1:
        return ["the turns did not stay in one conversation"]
    stored = history.messages(conversation)
    users = [m for m in stored if m.role == "user"]
    answers = [m for m in stored if m.role == "assistant"]
    problems = []
    if [m.content for m in users] != sent:
        problems.append(f"{len(users)} user messages stored for {len(sent)} sent")
    if [m.role for m in stored] != ["user", "assistant"] * len(sent):
        problems.append("the stored messages do not alternate user, answer")
    incomplete = {turn for turn, m in enumerate(answers) if not m.complete}
    if incomplete != given_up:
        problems.append(f"incomplete answers at turns {sorted(incomplete)}, given up at "
                        f"{sorted(given_up)}")
    return problems


def main() -> int:
    from app.launcher import window_process

    window_process()                    # as the app's start does
    args = parse_args()
    from app.desktop.memory import freeze_startup_objects, merge_freed_blocks

    merge_freed_blocks()                # as app.main does at start
    app = QApplication.instance() or QApplication(sys.argv)
    from app.conversations.history import History
    from app.desktop.logging_setup import setup_logging
    from app.settings.store import Settings
    from app.window import MainWindow
    from app.workers import wait_for_all

    scratch = Path(tempfile.mkdtemp(prefix="soak-"))
    if args.models_dir:
        models, first, second = Path(args.models_dir), args.model, args.model2
    else:
        models, first, second = tiny_store(scratch)
    log = scratch / "lantern.log"
    setup_logging(log)
    history = History(scratch / "h.sqlite3")
    window = MainWindow(Settings(models_dir=str(models), num_ctx=args.num_ctx,
                                 options={"temperature": 0.0,
                                          "num_predict": args.num_predict}),
                        history, auto_load=False)
    freeze_startup_objects()            # as app.main does before the window shows
    window.show()
    controller = window.controller

    def load(name: str) -> None:
        wait_until(app, lambda: window.models.row_of(name) >= 0)
        window.models_controller.load(window.models.entry(window.models.row_of(name)))
        wait_until(app, lambda: controller.model is not None and controller.model.name == name)

    load(first)
    sent: list[str] = []
    given_up: set[int] = set()
    reasons: list[str] = []                      # each finished answer's done_reason
    controller.answerDone.connect(lambda event: reasons.append(event.done_reason))
    started = time.perf_counter()
    print(f"{'turn':>5} {'RSS MiB':>8} {'seconds':>8}")
    for turn in range(args.turns):
        text = f"Turn {turn}: tell me about item {turn * 7 % 13} again"
        window.chat.input.editor.setPlainText(text)
        window.chat.input.submit()
        sent.append(text)
        switch = turn > 0 and turn % args.switch_every == 0
        cancel = turn % args.cancel_every == args.cancel_every - 1
        stopped = False
        if switch or cancel:
            wait_until(app, lambda: bool(controller.answer.text) or not controller.busy)
            if controller.busy and switch:       # interrupted: never complete
                given_up.add(turn)
                load(second if controller.model_name == first else first)
            elif controller.busy:
                stopped = True
                controller.answer.stop()
        wait_until(app, lambda: not controller.busy)
        if stopped and reasons[-1] == "cancel":   # not when it ended before Stop reached it
            given_up.add(turn)
        if turn % args.rss_every == 0 or turn == args.turns - 1:
            print(f"{turn:>5} {rss_mib():8.1f} {time.perf_counter() - started:8.1f}",
                  flush=True)
    settle(app, 0.5)
    conversation = controller.conversation_id
    window.close()
    wait_for_all()

    problems = history_problems(history, conversation, sent, given_up)
    logged = log.read_text(encoding="utf-8")
    if "Traceback" in logged:
        problems.append(f"the log has a traceback: {log}")
    print(f"{len(sent)} turns, {len(given_up)} answers stopped or interrupted, "
          f"log {len(logged.splitlines())} lines, no traceback: {'Traceback' not in logged}")
    for problem in problems:
        print("PROBLEM:", problem)
    if not problems:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
