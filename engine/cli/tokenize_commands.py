"""``lantern tokenize MODEL [TEXT]``: show how a model's tokenizer cuts text (ids and pieces)."""

import argparse
import json
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    from engine.cli import add_models_dir

    parser = subparsers.add_parser(
        "tokenize",
        help="show the token ids and pieces of a text",
        description="Tokenize TEXT (or standard input) with MODEL's tokenizer. MODEL is a name "
        "in the Ollama store or a path to a .gguf file.",
    )
    parser.add_argument(
        "model", metavar="MODEL", help="model name (qwen2.5vl:3b) or GGUF file path"
    )
    parser.add_argument("text", metavar="TEXT", nargs="?", help="text to tokenize (default: stdin)")
    parser.add_argument("--json", action="store_true", help="print JSON: ids and pieces")
    parser.add_argument(
        "--special",
        action="store_true",
        help="parse control tokens such as <|im_start|> (default: treat them as plain text)",
    )
    add_models_dir(parser)
    parser.set_defaults(func=run)


def model_file(model: str, models_dir: str | None) -> Path:
    """An existing file path is used as is; anything else is a name in the store."""
    path = Path(model).expanduser()
    if path.is_file():
        return path
    from engine.store import Store

    return Store.open(models_dir).get(model).model_path


def run(args: argparse.Namespace) -> int:
    from engine.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(model_file(args.model, args.models_dir))
    text = args.text if args.text is not None else sys.stdin.read()
    ids = tokenizer.encode(text, parse_special=args.special)
    pieces = [tokenizer.id_to_piece(i) for i in ids]
    if args.json:
        print(json.dumps({"ids": ids, "pieces": pieces}, ensure_ascii=False))
        return 0
    width = len(str(max(ids, default=0)))
    for token_id, piece in zip(ids, pieces, strict=True):
        print(f"{token_id:>{width}}  {json.dumps(piece, ensure_ascii=False)}")
    print(f"{len(ids)} token{'' if len(ids) == 1 else 's'}")
    return 0
