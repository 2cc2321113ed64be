"""`lantern debug MODEL PROMPT`: the engine against the numpy reference, layer by layer.

Prints one row per hidden state (embeddings, then each block) with the engine's
statistics of the last token and the largest difference from the reference, then the
top-5 next tokens of both side by side. Exits 1 when they disagree beyond tolerance.

`--dump DIR` writes the reference's ids, hidden states and logits as .npy files with a
manifest (README "Your engine against Lantern"); `--against DIR` reads another engine's
dump in that format, runs the reference over its ids and names the first layer off, by how
much, and the usual suspects for the pattern; exits 1 when one is. With `--image FILE` the
prompt holds the picture: the dump's embeddings hold its rows as Lantern's vision tower
made them, and `--against` runs the reference over that prompt (the dump must hold its ids).
Both are engine/inspect/dump_compare.py's, which the app's Reference tab shares.

`--llama-layers` runs the same ids through llama.cpp (needs lantern[llama]) and the
reference and prints every block's output side by side (mean and std of the last token,
max |Δ|, relative and cosine over every position) and the first block that diverges
(engine/inspect/llama_layers.py); `--json` prints that as one object; exits 1 when one does.
With `--control-vector FILE[:STRENGTH]` both run steered, as `lantern run` steers an answer.
With `--image FILE` llama.cpp reads the picture through libmtmd from the model's projector
file (engine/inspect/llama_pictures.py) and the picture's rows are compared too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.cli import add_models_dir
from engine.cli.steering_args import add_control_vector_args, steering_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("debug", help="compare the engine with the numpy reference, per layer")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("prompt", metavar="PROMPT")
    p.add_argument("--raw", action="store_true", help="PROMPT verbatim (control tokens parsed)")
    p.add_argument("--exact", action="store_true", help="fp32 activations, tight tolerance")
    p.add_argument("--system", metavar="TEXT")
    p.add_argument("--dump", metavar="DIR", type=Path,
                   help="write the reference's ids, hidden states and logits (.npy) to DIR")
    p.add_argument("--against", metavar="DIR", type=Path,
                   help="compare another engine's dump in DIR with the reference")
    p.add_argument("--image", action="append", default=[], metavar="FILE",
                   help="--dump / --against / --llama-layers: a picture the prompt holds "
                        "(repeatable; a vision model)")
    p.add_argument("--tolerance", type=float, default=1e-2, metavar="T",
                   help="--against: max |Δ| allowed per layer, relative to each position's "
                        "largest value (default 1e-2)")
    p.add_argument("--llama-layers", action="store_true",
                   help="compare every block's output with llama.cpp's (needs lantern[llama])")
    p.add_argument("--json", action="store_true", help="--llama-layers: one JSON object")
    add_control_vector_args(p, "llama.cpp and the reference (--llama-layers)")
    add_models_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.chat.messages import Message
    from engine.cli.run_command import load_images, resolve_source
    from engine.inspect.second_opinion import SecondOpinionUnavailable, missing
    from engine.runtime.check import check_against_reference
    from engine.runtime.loader import load_model

    if (args.json or args.control_vector or args.control_vector_scaled) \
            and not args.llama_layers:
        print("--json and --control-vector go with --llama-layers", file=sys.stderr)
        return 2
    if args.image and not (args.dump or args.against or args.llama_layers):
        print("--image goes with --dump, --against or --llama-layers", file=sys.stderr)
        return 2
    if args.llama_layers and (hint := missing()) is not None:
        raise SecondOpinionUnavailable(hint)   # before loading the model, not after
    source = resolve_source(args.model, args.models_dir)
    model = load_model(source, exact=args.exact, layer_stats=not (args.dump or args.against
                                                                 or args.llama_layers))
    images = load_images(model, args.image, args.raw, model.prepare_image)
    if args.raw:
        prompt = model.tokenize_raw(args.prompt)
    else:
        prompt = model.tokenize_chat([Message("user", args.prompt, images)], system=args.system)
    if args.llama_layers:
        return _llama_layers(args, model, prompt, images)
    if args.dump or args.against:
        return _dump_or_against(args, model, prompt)
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


def _dump_or_against(args: argparse.Namespace, model, prompt) -> int:
    from engine.inspect.dump_compare import compare_dump, reference_dump
    from engine.reference.dump import write_dump

    comparison = None
    if args.against:
        comparison = compare_dump(model.gguf, model.name, args.against, expected=prompt,
                                  tolerance=args.tolerance)
        if (note := comparison.ids_note("Lantern's tokenization of PROMPT")) is not None:
            print(f"note: {note}")
    ours = comparison.ours if comparison else reference_dump(model.gguf, model.name, prompt)
    if args.dump:
        write_dump(args.dump, ours)
        print(f"wrote {len(ours.hidden_states)} hidden states of {len(ours.ids)} tokens and "
              f"the logits to {args.dump}")
    if comparison is None:
        return 0
    result = comparison.result
    print(f"{'layer':<22}{'max |Δ|':>12}{'relative':>12}{'cosine':>12}")
    rows = result.rows + ((result.logits,) if result.logits is not None else ())
    for i, row in enumerate(rows):
        mark = "   <-- first off" if i == result.first_off else ""
        print(f"{row.label:<22}{row.max_abs:>12.4g}{row.relative:>12.3g}{row.cosine:>12.6f}{mark}")
    print()
    print(result.verdict())
    for suspect in result.suspects:
        print(f"  suspect: {suspect}")
    return 0 if result.ok else 1


def _llama_layers(args: argparse.Namespace, model, prompt, images) -> int:
    from engine.inspect.llama_layers import llama_layers
    from engine.inspect.llama_pair import llama_text
    from engine.inspect.llama_pictures import llama_pictures
    from engine.vision.video import pictures

    ids = prompt.ids
    seen = [picture for image in images for picture in pictures(image)]
    result = llama_layers(llama_text(model.gguf), model.gguf, ids,
                          steering=steering_table(args, model.gguf),
                          pictures=llama_pictures(model.gguf, prompt, seen))
    if args.json:
        json.dump(result.to_json(), sys.stdout)
        print()
        return 0 if result.ok else 1
    print(f"{len(ids)} tokens through llama-cpp-python {result.version} and Lantern's fp32 "
          f"reference{', both steered' if result.steered else ''}; mean and std of the last "
          f"token")
    print(f"{'layer':<20}{'mean':>10}{'llama.cpp':>11}{'std':>10}{'llama.cpp':>11}"
          f"{'max |Δ|':>11}{'relative':>10}{'cosine':>10}")
    for i, side in enumerate(result.rows):
        d = side.delta
        mark = "   <-- first off" if i == result.first_off else ""
        print(f"{d.label:<20}{side.ours[0]:>10.4g}{side.theirs[0]:>11.4g}{side.ours[1]:>10.4g}"
              f"{side.theirs[1]:>11.4g}{d.max_abs:>11.4g}{d.relative:>10.3g}"
              f"{d.cosine:>10.5f}{mark}")
    if (logits := result.result.logits) is not None:
        mark = "   <-- first off" if result.first_off == len(result.rows) else ""
        print(f"{'logits':<62}{logits.max_abs:>11.4g}{logits.relative:>10.3g}"
              f"{logits.cosine:>10.5f}{mark}")
    print()
    print(result.verdict())
    for suspect in result.result.suspects:
        print(f"  suspect: {suspect}")
    return 0 if result.ok else 1
