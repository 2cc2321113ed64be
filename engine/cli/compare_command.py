"""`lantern compare MODEL_A MODEL_B PROMPT`: the same text teacher-forced through two
models (fp32 reference), each token's log-probability under both, the largest
disagreements marked; `--json` prints one object (engine/inspect/model_compare.py)."""

from __future__ import annotations

import argparse
import json
import sys

from engine.cli import add_models_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="two models' log-probabilities of the same text")
    p.add_argument("model_a", metavar="MODEL_A")
    p.add_argument("model_b", metavar="MODEL_B")
    p.add_argument("prompt", metavar="PROMPT")
    p.add_argument("--raw", action="store_true", help="PROMPT verbatim (control tokens parsed)")
    p.add_argument("--system", metavar="TEXT")
    p.add_argument("--marked", type=int, default=5, metavar="K",
                   help="how many of the largest disagreements to mark (default 5)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    add_models_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.chat.messages import Message
    from engine.cli.run_command import resolve_source
    from engine.inspect.model_compare import ComparisonError, compare_models
    from engine.runtime.loader import load_model

    loaded = []
    for name in (args.model_a, args.model_b):
        model = load_model(resolve_source(name, args.models_dir))
        if args.raw:
            prompt = model.tokenize_raw(args.prompt)
        else:
            prompt = model.tokenize_chat([Message("user", args.prompt)], system=args.system)
        loaded.append((model.name, model.gguf, prompt.ids.tolist(), model.tokenizer.id_to_piece))
        del model
    (name_a, gguf_a, ids, piece), (name_b, gguf_b, ids_b, _) = loaded
    if ids != ids_b:
        same = min(len(ids), len(ids_b))
        k = next((i for i in range(same) if ids[i] != ids_b[i]), same)
        raise ComparisonError(f"{name_a} and {name_b} tokenize the text differently (from "
                              f"token {k}): compare needs models with one vocabulary")
    result = compare_models(gguf_a, gguf_b, ids, [piece(i) for i in ids], (name_a, name_b),
                            args.marked)
    if args.json:
        json.dump(result.to_json(), sys.stdout, ensure_ascii=False)
        print()
        return 0
    print(f"{'#':>5}  {'token':<24}{'A: ' + name_a[:14]:>20}{'B: ' + name_b[:14]:>20}"
          f"{'Δ (B - A)':>12}")
    for r, d in enumerate(result.delta):
        mark = "   <-- largest" if r + 1 in result.marked else ""
        print(f"{r + 1:>5}  {result.tokens[r + 1]!r:<24}{result.logprobs[0, r]:>20.4f}"
              f"{result.logprobs[1, r]:>20.4f}{d:>+12.4f}{mark}")
    return 0
