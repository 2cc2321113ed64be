"""`lantern trace MODEL --clean TEXT --corrupt TEXT`: causal tracing (fp32 reference).

For every hidden state (embeddings, each block) and every position, the share of the clean
answer's logit difference that comes back when that one state of the corrupted run is
restored to its clean value (engine/inspect/tracing.py). Prints a position x layer map;
`--json` prints one object with "restored": [n_layers + 1][S].
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
    p.add_argument("--corrupt", required=True, metavar="TEXT",
                   help="the clean text with a word changed (same token count)")
    p.add_argument("--raw", action="store_true", help="the texts verbatim (no chat template)")
    p.add_argument("--system", metavar="TEXT")
    p.add_argument("--json", action="store_true", help="one JSON object")
    add_models_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.chat.messages import Message
    from engine.cli.run_command import resolve_source
    from engine.inspect.tracing import trace
    from engine.runtime.loader import load_model

    model = load_model(resolve_source(args.model, args.models_dir))

    def ids(text: str):
        if args.raw:
            return model.tokenize_raw(text).ids
        return model.tokenize_chat([Message("user", text)], system=args.system).ids

    result = trace(model.gguf, ids(args.clean), ids(args.corrupt))
    piece = model.tokenizer.id_to_piece
    if args.json:
        json.dump(result.to_json() | {"answer_piece": piece(result.answer),
                                      "rival_piece": piece(result.rival)},
                  sys.stdout, ensure_ascii=False)
        print()
        return 0
    restored = result.restored  # [L + 1, S]
    print(f"answer {piece(result.answer)!r} vs {piece(result.rival)!r}: logit difference "
          f"{result.clean_diff:.3f} clean, {result.corrupt_diff:.3f} corrupted")
    print(f"share restored per position (rows) and hidden state (columns: embeddings, then "
          f"blocks 1..{len(restored) - 1}), '{RAMP[1]}' low .. '{RAMP[-1]}' all:")
    for i, (a, b) in enumerate(zip(result.clean, result.corrupt, strict=True)):
        token = repr(piece(a)) if a == b else f"{piece(a)!r}/{piece(b)!r}"
        cells = "".join(RAMP[int(min(max(v, 0.0), 1.0) * (len(RAMP) - 1))]
                        for v in restored[:, i])
        print(f"{i:>4} {token[:22]:<22} |{cells}|")
    layer, i = divmod(int(restored.argmax()), restored.shape[1])
    print(f"most restored: position {i}, hidden state {layer}: {restored[layer, i]:.1%}")
    return 0
