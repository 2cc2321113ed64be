"""`lantern crosscheck MODEL PROMPT --server URL`: Lantern against a server on the same
weights, token by token; exits 1 when a gap passes the tolerance (or the prompts differ)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from engine.cli import add_models_dir
from engine.cli.run_command import resolve_source
from engine.cli.server_options import add_server, connection_of
from engine.remote.crosscheck import TOLERANCE, cross_check, format_table, same_weights
from engine.store import LocalModel


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("crosscheck",
                       help="compare Lantern's log-probabilities with a server's, token by token")
    p.add_argument("model", metavar="MODEL", help="the local model (store name or .gguf)")
    p.add_argument("prompt", metavar="PROMPT")
    p.add_argument("--remote-model", metavar="NAME",
                   help="the model's name on the server (default: MODEL)")
    p.add_argument("--system", metavar="TEXT")
    p.add_argument("--num-predict", type=int, default=32, metavar="N",
                   help="tokens the server answers (default 32)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, metavar="T",
                   help=f"largest |Δ log-probability| that passes (default {TOLERANCE}, "
                        "measured: see BENCHMARKS.md)")
    p.add_argument("--same-weights", action="store_true",
                   help="assert that the server runs MODEL's weights (when it reports no digest)")
    p.add_argument("--fast", action="store_true",
                   help="Lantern's fast int8 activations instead of exact fp32")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    add_models_dir(p)
    add_server(p, required=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.chat.messages import Message
    from engine.remote.session import open_remote_model
    from engine.runtime.loader import load_model

    remote = open_remote_model(connection_of(args), args.remote_model or args.model)
    source = resolve_source(args.model, args.models_dir)
    path = source.model_path if isinstance(source, LocalModel) else source
    same_weights(path, args.model, remote, args.same_weights)      # before the slow load
    local = load_model(source, exact=not args.fast, num_ctx=2048)
    report = cross_check(local, remote, [Message("user", args.prompt)], args.system,
                         num_predict=args.num_predict, tolerance=args.tolerance,
                         same_weights_asserted=args.same_weights)
    if args.json:
        print(json.dumps({**asdict(report), "max_gap": report.max_gap,
                          "mean_gap": report.mean_gap, "agrees": report.agrees,
                          "verdict": report.verdict}, indent=2, ensure_ascii=False))
    else:
        print(format_table(report))
    return 0 if report.agrees else 1
