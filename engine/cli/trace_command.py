"""`lantern trace MODEL --clean TEXT --corrupt TEXT [--image FILE [--noise]]`: causal
tracing (fp32 reference).

For every hidden state (embeddings, each block) and every position, the share of the clean
answer's logit difference that comes back when that one state of the corrupted run is
restored to its clean value (engine/inspect/tracing.py). With --image both texts go with
the same image(s), whose merged patches are restored in square groups (one line each);
--noise replaces the corrupted prompt's pictures by noise (then --corrupt may be left out:
the same question over a noised picture shows which patches carry the answer).
Prints a position x layer map; `--json` prints one object with "restored": [n_layers + 1][U]
over "units", the positions restored together.
"""

from __future__ import annotations

import argparse
import json
import sys

from engine.cli import add_models_dir

RAMP = " .:-=+*#%@"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="causal tracing: which hidden states carry the answer")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("--clean", required=True, metavar="TEXT")
    p.add_argument("--corrupt", metavar="TEXT",
                   help="the clean text with a word changed (same token count; default with "
                        "--noise: the clean text)")
    p.add_argument("--raw", action="store_true", help="the texts verbatim (no chat template)")
    p.add_argument("--image", action="append", default=[], metavar="FILE",
                   help="an image both texts go with (repeatable; a vision model)")
    p.add_argument("--noise", action="store_true",
                   help="the corrupted prompt's images replaced by noise of their size")
    p.add_argument("--patch-group", type=int, metavar="N",
                   help="restore an image's merged patches in N x N blocks (default: the "
                        "smallest that keeps an image to 16 blocks)")
    p.add_argument("--system", metavar="TEXT")
    p.add_argument("--json", action="store_true", help="one JSON object")
    add_models_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.chat.messages import Message
    from engine.cli.run_command import load_images, resolve_source
    from engine.errors import GenerationError
    from engine.inspect.occlusion import fitting_patch_group
    from engine.inspect.tracing import IMAGE_COLUMNS, noised, trace
    from engine.runtime.loader import load_model

    if args.noise and not args.image:
        raise GenerationError("--noise corrupts the pictures: give them with --image")
    if args.corrupt is None and not args.noise:
        raise GenerationError("give the corrupted text with --corrupt (or corrupt the "
                              "pictures with --image FILE --noise)")
    model = load_model(resolve_source(args.model, args.models_dir))
    images = load_images(model, args.image, args.raw, model.prepare_image)

    def context(text: str, pictures: tuple):
        if args.raw:
            return model.tokenize_raw(text)
        return model.tokenize_chat([Message("user", text, pictures)], system=args.system)

    clean = context(args.clean, images)
    corrupt = context(args.clean if args.corrupt is None else args.corrupt,
                      tuple(noised(p) for p in images) if args.noise else images)
    group = args.patch_group or fitting_patch_group(clean, len(clean), IMAGE_COLUMNS)
    result = trace(model.gguf, clean, corrupt, patch_group=group)
    piece = model.tokenizer.id_to_piece
    if args.json:
        json.dump(result.to_json() | {"answer_piece": piece(result.answer),
                                      "rival_piece": piece(result.rival)},
                  sys.stdout, ensure_ascii=False)
        print()
        return 0
    restored = result.restored  # [L + 1, U]
    print(f"answer {piece(result.answer)!r} vs {piece(result.rival)!r}: logit difference "
          f"{result.clean_diff:.3f} clean, {result.corrupt_diff:.3f} corrupted")
    print(f"share restored per position (rows) and hidden state (columns: embeddings, then "
          f"blocks 1..{len(restored) - 1}), '{RAMP[1]}' low .. '{RAMP[-1]}' all:")
    for n, unit in enumerate(result.units):
        cells = "".join(RAMP[int(min(max(v, 0.0), 1.0) * (len(RAMP) - 1))]
                        for v in restored[:, n])
        print(f"{unit[0]:>4} {label(result, n, piece)[:22]:<22} |{cells}|")
    layer, n = divmod(int(restored.argmax()), restored.shape[1])
    print(f"most restored: position {result.units[n][0]} ({label(result, n, piece)}), "
          f"hidden state {layer}: {restored[layer, n]:.1%}")
    return 0


def label(result, unit: int, piece) -> str:
    """A column's token (a changed one as clean/corrupted) or its image patches."""
    block = result.patch_block(unit)
    if block is not None:
        return block.label
    a, b = result.clean[result.units[unit][0]], result.corrupt[result.units[unit][0]]
    return repr(piece(a)) if a == b else f"{piece(a)!r}/{piece(b)!r}"
