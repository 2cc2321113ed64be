"""`lantern steer MODEL --positive FILE --negative FILE -o OUT.gguf`: a control vector from
two sets of prompts (engine/inspect/steering.py), in llama.cpp's format, so that both
`lantern run --control-vector OUT.gguf` and llama.cpp's `--control-vector` can load it.
"""

from __future__ import annotations

import argparse
import sys

from engine.cli import add_models_dir

DESCRIPTION = """\
Make a control vector the way llama.cpp's cvector-generator does with --method mean:
line i of --positive pairs with line i of --negative; for each block, the mean
difference of their hidden states (every position where they differ), scaled to unit
length, one direction per layer. Computed on the fp32 reference of MODEL's weights.
Use it with `lantern run MODEL --control-vector OUT.gguf:STRENGTH` (a negative
strength steers towards the negative prompts)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("steer", help="make a control vector from positive and negative prompts",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL", help="a model in the store, or a .gguf file")
    p.add_argument("--positive", required=True, metavar="FILE",
                   help="one prompt per line, the behaviour to steer towards")
    p.add_argument("--negative", required=True, metavar="FILE",
                   help="as many prompts, line by line the opposite")
    p.add_argument("-o", "--output", required=True, metavar="OUT.gguf",
                   help="where to write the control vector")
    add_models_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.cli.run_command import resolve_source
    from engine.gguf.control_vector import write_control_vector
    from engine.inspect.steering import make_control_vector, read_prompts
    from engine.runtime.loader import load_model

    positive, negative = read_prompts(args.positive), read_prompts(args.negative)
    model = load_model(resolve_source(args.model, args.models_dir))

    def progress(done: int, total: int) -> None:
        print(f"\rprompt pairs: {done}/{total}", end="", file=sys.stderr, flush=True)

    directions = make_control_vector(model.gguf, model.tokenizer, positive, negative,
                                     progress=progress)
    print(file=sys.stderr)
    write_control_vector(args.output, directions, model.gguf.config.architecture)
    print(f"wrote {args.output}: {len(directions)} directions of "
          f"{model.gguf.config.text.hidden_size} values ({len(positive)} prompt pairs)")
    return 0
