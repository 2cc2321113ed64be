"""`lantern compare MODEL_A MODEL_B PROMPT`: the same text teacher-forced through two
models (fp32 reference), each token's log-probability under both, the largest
disagreements marked; `--json` prints one object (engine/inspect/model_compare.py).
With `--image`, each model builds the prompt with the picture as a chat does and reads
the picture through its own vision tower; an image's rows print as one line."""

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
    p.add_argument("--image", action="append", default=[], metavar="FILE")
    p.add_argument("--marked", type=int, default=5, metavar="K",
                   help="how many of the largest disagreements to mark (default 5)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    add_models_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.cli.run_command import resolve_source
    from engine.inspect.model_compare import compare_contexts
    from engine.runtime.loader import load_model

    loaded = []
    for name in (args.model_a, args.model_b):
        model = load_model(resolve_source(name, args.models_dir))
        loaded.append((model.name, model.gguf, _context(model, args),
                       model.tokenizer.id_to_piece))
        del model
    (name_a, gguf_a, context_a, piece), (name_b, gguf_b, context_b, _) = loaded
    ids = context_a.ids.tolist()
    result = compare_contexts(gguf_a, gguf_b, (context_a, context_b),
                              [piece(i) for i in ids], (name_a, name_b), args.marked)
    if args.json:
        json.dump(result.to_json(), sys.stdout, ensure_ascii=False)
        print()
        return 0
    _print(result)
    return 0


def _context(model, args: argparse.Namespace):
    """The prompt as a chat with ``model`` builds it, its pictures read by the model's own
    tower in the reference."""
    from engine.chat.messages import Message
    from engine.cli.run_command import load_images
    from engine.inspect.compare_images import own_images, picture_inputs

    images = load_images(model, args.image, args.raw, model.prepare_image)
    if args.raw:
        return model.tokenize_raw(args.prompt)
    prompt = model.tokenize_chat([Message("user", args.prompt, images)], system=args.system)
    return own_images(model.gguf, model.name, prompt, picture_inputs(images))


def _print(result) -> None:
    name_a, name_b = result.names
    print(f"{'#':>5}  {'token':<24}{'A: ' + name_a[:14]:>20}{'B: ' + name_b[:14]:>20}"
          f"{'Δ (B - A)':>12}")
    starts = {grid.start: (k, grid) for k, grid in enumerate(result.images)}
    for r, (d, text) in enumerate(zip(result.delta, result.text, strict=True)):
        if r + 1 in starts:
            k, grid = starts[r + 1]
            print(f"{r + 1:>5}  [image {k + 1}: {grid.height} x {grid.width} patches, tokens "
                  f"{grid.start}..{grid.stop - 1}]")
        if not text:
            continue
        mark = "   <-- largest" if r + 1 in result.marked else ""
        print(f"{r + 1:>5}  {result.tokens[r + 1]!r:<24}{result.logprobs[0, r]:>20.4f}"
              f"{result.logprobs[1, r]:>20.4f}{d:>+12.4f}{mark}")
