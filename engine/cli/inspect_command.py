"""`lantern inspect MODEL PROMPT`: the logit lens and attention of one position.

Computed by the numpy fp32 reference over the prompt (exact whatever the engine mode).
Prints, per layer, the lens' top tokens, where the position looked most and (a mixture of
experts) which experts the token took, with their weights; `--json`
prints one object: {"lens": [n_layers + 1 rows of {"top": [...]}], "attention":
[n_layers][n_heads][position + 1], ...}; `--llama` adds llama.cpp's second opinion,
`--contributions` the next token's logit split by head and MLP, `--attribution` the change
of its log-probability with each earlier token hidden (one reference run per token).
`--control-vector FILE[:STRENGTH]` steers all of them, llama.cpp too, as `lantern run`
steers an answer.
"""

from __future__ import annotations

import argparse
import json
import sys

from engine.cli import add_models_dir
from engine.cli.steering_args import add_control_vector_args, steering_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="logit lens and attention of one position (fp32 reference)")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("prompt", metavar="PROMPT")
    p.add_argument("--raw", action="store_true", help="PROMPT verbatim (control tokens parsed)")
    p.add_argument("--exact", action="store_true",
                   help="load the engine in exact mode (the views come from the fp32 "
                        "reference either way)")
    p.add_argument("--image", action="append", default=[], metavar="FILE")
    p.add_argument("--position", type=int, metavar="N",
                   help="token position to inspect, 0-based (default: the last)")
    p.add_argument("--top", type=int, default=5, metavar="K", help="lens tokens per layer")
    p.add_argument("--llama", action="store_true",
                   help="add llama.cpp's second opinion (needs lantern[llama])")
    p.add_argument("--contributions", action="store_true",
                   help="split the next token's logit into the embedding, every head and MLP")
    p.add_argument("--attribution", action="store_true",
                   help="hide each earlier token in turn: the change of the next token's "
                        "log-probability (one reference run per token)")
    p.add_argument("--patch-group", type=int, default=1, metavar="N",
                   help="--attribution: hide an image's merged patches in N x N blocks "
                        "(fewer runs; the block's patches share one value)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    add_control_vector_args(p, "the reference (and llama.cpp with --llama)")
    p.add_argument("--system", metavar="TEXT")
    add_models_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.chat.messages import Message
    from engine.cli.run_command import load_images, resolve_source
    from engine.inspect import inspect_context
    from engine.inspect.llama_pair import llama_text
    from engine.inspect.llama_pictures import llama_pictures
    from engine.inspect.occlusion import occlusion
    from engine.inspect.second_opinion import SecondOpinionUnavailable, missing, second_opinion
    from engine.runtime.loader import load_model
    from engine.vision.video import pictures

    if args.llama and (hint := missing()) is not None:
        raise SecondOpinionUnavailable(hint)   # before minutes of work, not after
    model = load_model(resolve_source(args.model, args.models_dir), exact=args.exact)
    images = load_images(model, args.image, args.raw, model.prepare_image)
    if args.raw:
        prompt = model.tokenize_raw(args.prompt)
    else:
        prompt = model.tokenize_chat([Message("user", args.prompt, images)], system=args.system)
    piece = model.tokenizer.id_to_piece
    position = args.position
    if position is not None and position < 0:
        position += len(prompt)
    steering = steering_table(args, model.gguf)
    inspection = inspect_context(model.gguf, prompt, piece, position, top=max(args.top, 5),
                                 steering=steering)
    opinion = None
    if args.llama:
        seen = [picture for image in images for picture in pictures(image)]
        opinion = second_opinion(llama_text(model.gguf), inspection, piece,
                                 pictures=llama_pictures(model.gguf, prompt, seen))
    attribution = None
    if args.attribution:
        attribution = occlusion(model.gguf, prompt, position, patch_group=args.patch_group,
                                steering=steering)
    if args.json:
        out = inspection.to_json() | {"engine_mode": "exact" if args.exact else "fast"}
        if opinion is not None:
            out["second_opinion"] = opinion.to_json()
        if args.contributions:
            out["contributions"] = inspection.contributions.to_json()
        if attribution is not None:
            out["attribution"] = attribution.to_json()
        json.dump(out, sys.stdout, ensure_ascii=False)
        print()
        return 0
    _print(inspection, opinion)
    if args.contributions:
        _print_contributions(inspection.contributions, piece)
    if attribution is not None:
        _print_attribution(attribution, inspection.tokens, piece)
    return 0


def _print_contributions(parts, piece) -> None:
    import numpy as np

    split = parts.logit
    print()
    print(f"logit of {piece(parts.token)!r} {split.total:.3f} "
          f"(margin {parts.margin.total:.3f} over {piece(parts.runner_up)!r}) = embedding "
          f"{split.embedding:.3f} + heads {split.attention.sum():.3f} + MLPs "
          f"{split.mlp.sum():.3f} + bias {split.bias:.2g}")
    named = [(float(v), f"layer {layer + 1} head {head + 1}")
             for (layer, head), v in np.ndenumerate(split.attention)]
    named += [(float(v), f"layer {layer + 1} MLP") for layer, v in enumerate(split.mlp)]
    named.sort(key=lambda item: -abs(item[0]))
    print("largest parts: " + ", ".join(f"{name} {v:+.3f}" for v, name in named[:8]))


def _print_attribution(attribution, tokens, piece) -> None:
    import numpy as np

    print()
    print(f"log-probability of {piece(attribution.token)!r}: {attribution.logprob:.3f}; "
          f"with one earlier token hidden, largest changes:")
    for j in np.argsort(-np.abs(attribution.delta))[:8]:
        print(f"  #{j} {tokens[j]!r}: {attribution.delta[j]:+.3f}")


def _print(inspection, opinion) -> None:
    mean = inspection.attention_mean  # [L, T]
    print(f"position {inspection.position}: {inspection.tokens[-1]!r} "
          f"(id {inspection.ids[-1]}), computed by the {inspection.source}")
    experts = "experts (weight)" if inspection.experts else ""
    print(f"{'layer':<7}{'lens top-3 (probability)':<58}{'looked most at':<32}{experts}")
    for row in inspection.lens:
        top = "  ".join(f"{t.token!r} {t.prob:.2f}" for t in row.top[:3])
        looked = took = ""
        if row.layer > 0:
            weights = mean[row.layer - 1]
            best = int(weights.argmax())
            looked = f"#{best} {inspection.tokens[best]!r} {weights[best]:.2f}"
        if 0 < row.layer <= len(inspection.experts):
            choice = inspection.experts[row.layer - 1]
            took = "  ".join(f"#{int(e)} {float(w):.2f}"
                             for e, w in zip(choice.ids, choice.weights, strict=True))
        print(f"{row.layer:<7}{top:<58}{looked:<32}{took}".rstrip())
    for n, grid in enumerate(inspection.images):
        share = float(mean[:, grid.start:grid.stop].sum(axis=1).mean())
        print(f"image {n + 1}: {grid.height} x {grid.width} patches at tokens "
              f"{grid.start}..{grid.stop - 1}, {share:.1%} of the attention (mean over layers)")
    if opinion is not None:
        print()
        if opinion.steered:
            print("both steered by the control vectors")
        print(f"{'#':<3}{'lantern':<28}{'logit':>9}    {'llama.cpp':<28}{'logit':>9}")
        for rank, (a, b) in enumerate(zip(opinion.ours, opinion.theirs, strict=True), 1):
            print(f"{rank:<3}{a.token!r:<28}{a.logit:>9.3f}    {b.token!r:<28}{b.logit:>9.3f}")
        if (largest := opinion.largest()) is not None:
            worst, row, mean = largest
            skipped = (f" (not the {len(opinion.picture_rows)} whose next token is a "
                       "picture's)" if opinion.picture_rows else "")
            print(f"teacher-forced |Δ logprob| over {len(opinion.text_rows)} positions"
                  f"{skipped}: max {worst:.3g} at #{row + 1}, mean {mean:.3g}")
