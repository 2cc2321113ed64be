"""``lantern prompt MODEL --messages FILE.json``: print the exact prompt a chat renders to
(the template Ollama would use) and how many tokens it is."""

import argparse
import json
from pathlib import Path

from engine.errors import LanternError


def register(subparsers: argparse._SubParsersAction) -> None:
    from engine.cli import add_models_dir
    from engine.cli.run_command import parse_think

    parser = subparsers.add_parser(
        "prompt",
        help="show the rendered chat prompt and its token count",
        description="Render the chat in FILE.json (a list of Ollama API messages, or an "
        "object with \"messages\" and optional \"tools\") with MODEL's template: the store's "
        "template layer, else the GGUF chat template, else Ollama's default {{ .Prompt }} "
        "(a model without a template is completion-only: the user's text alone).",
    )
    parser.add_argument(
        "model", metavar="MODEL", help="model name (qwen2.5vl:3b) or GGUF file path"
    )
    parser.add_argument("--messages", metavar="FILE.json", required=True, help="the chat to render")
    parser.add_argument("--system", metavar="TEXT", help="system prompt (replaces the model's)")
    parser.add_argument("--think", nargs="?", const="true", type=parse_think,
                        metavar="true|false|high|medium|low",
                        help="Ollama's think option, as `lantern run --think` sends it")
    add_models_dir(parser)
    parser.set_defaults(func=run)


def _read_chat(path: Path) -> tuple[list[dict], list[dict] | None]:
    try:
        chat = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise LanternError(f"cannot read the messages file {path}: {error}") from None
    if isinstance(chat, dict):
        messages, tools = chat.get("messages"), chat.get("tools")
    else:
        messages, tools = chat, None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise LanternError(f"{path} must hold a list of messages ({{\"role\", \"content\"}} "
                           "objects) or an object with a \"messages\" list")
    return messages, tools


def run(args: argparse.Namespace) -> int:
    from engine.cli.tokenize_commands import model_file
    from engine.gguf.reader import read_gguf
    from engine.prompt import ModelPrompt
    from engine.tokenizer import load_tokenizer

    messages, tools = _read_chat(Path(args.messages))
    template = system = None
    layer_messages: list[dict] = []
    path = Path(args.model).expanduser()
    if not path.is_file():
        from engine.store import Store

        model = Store.open(args.models_dir).get(args.model)
        template, system, layer_messages = model.template, model.system, model.messages
    gguf_path = model_file(args.model, args.models_dir)
    metadata = read_gguf(gguf_path).metadata
    tokenizer = load_tokenizer(gguf_path)
    special = {
        name: tokenizer.id_to_piece(int(metadata[key]))
        for name, key in (("bos_token", "tokenizer.ggml.bos_token_id"),
                          ("eos_token", "tokenizer.ggml.eos_token_id"))
        if key in metadata
    }
    prompt = ModelPrompt(
        template_layer=template,
        chat_template=metadata.get("tokenizer.chat_template"),
        system=system,
        layer_messages=layer_messages,
        special_tokens=special,
    ).render(messages, system=args.system, think=args.think, tools=tools)
    ids = tokenizer.encode_prompt(prompt.segments)
    print(prompt.text, end="" if prompt.text.endswith("\n") else "\n")
    print(f"--- {len(ids)} tokens, {prompt.template_name}, "
          f"{len(prompt.image_segments)} image(s)")
    return 0
