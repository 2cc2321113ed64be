"""`lantern debug MODEL PROMPT`: the engine against the numpy reference, layer by layer.

Prints one row per hidden state (embeddings, then each block) with the engine's
statistics of the last token and the largest difference from the reference, then the
top-5 next tokens of both side by side. Exits 1 when they disagree beyond tolerance.
"""

from __future__ import annotations

import argparse

from engine.cli import add_models_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("debug", help="compare the engine with the numpy reference, per layer")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("prompt", metavar="PROMPT")
    p.add_argument("--raw", action="store_true", help="PROMPT verbatim (control tokens parsed)")
    p.add_argument("--exact", action="store_true", help="fp32 activations, tight tolerance")
    p.add_argument("--system", metavar="TEXT")
    add_models_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.chat.messages import Message
    from engine.cli.run_command import resolve_source
    from engine.runtime.check import check_against_reference
    from engine.runtime.loader import load_model

    source = resolve_source(args.model, args.models_dir)
    model = load_model(source, exact=args.exact, layer_stats=True)
    if args.raw:
        prompt = model.tokenize_raw(args.prompt)
    else:
        prompt = model.tokenize_chat([Message("user", args.prompt)], system=args.system)
    report = check_against_reference(
        model.gguf, prompt, model.tokenizer.id_to_piece, exact=args.exact, decoder=model.decoder
    )
    print(f"{'layer':<22}{'mean':>11}{'std':>11}{'min':>11}{'max':>11}{'max |Δ|':>12}"
          f"{'tolerance':>12}")
    for row in report.rows:
        mark = "" if row.ok else "   <-- off"
        print(f"{row.label:<22}" + "".join(f"{v:>11.4g}" for v in row.stats)
              + f"{row.max_abs_diff:>12.3g}{row.tolerance:>12.3g}{mark}")
    print()
    print(f"{'#':<3}{'engine':<28}{'logit':>9}    {'reference':<28}{'logit':>9}")
    for rank, (e, r) in enumerate(zip(report.engine_top, report.reference_top, strict=True), 1):
        print(f"{rank:<3}{e.piece!r:<28}{e.logit:>9.3f}    {r.piece!r:<28}{r.logit:>9.3f}")
    print()
    print(report.verdict)
    return 0 if report.ok else 1
