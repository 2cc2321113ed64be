"""`lantern run`: one answer, or an interactive chat like `ollama run`.

Generation runs on a worker thread; the terminal thread prints events as they arrive,
so Ctrl-C stops the answer within a token and leaves the program (and the chat) alive.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from engine.chat.backend import Capability
from engine.chat.events import DoneEvent, Event, NoticeEvent, TokenEvent, ToolCallEvent
from engine.cli import add_models_dir
from engine.cli.format_option import HELP as FORMAT_HELP
from engine.cli.format_option import split_formats
from engine.cli.hints import explain
from engine.cli.server_options import add_server, connection_of
from engine.cli.steering_args import add_control_vector_args, control_vector_specs
from engine.cli.tools_option import HELP as TOOLS_HELP
from engine.errors import GenerationError, ImageError, LanternError, UnsupportedModel
from engine.remote.records import chosen_options
from engine.store import LocalModel, Store

OPTION_FLAGS = {  # CLI flag -> Ollama option name
    "temperature": float, "top_k": int, "top_p": float, "min_p": float,
    "typical_p": float, "repeat_penalty": float, "repeat_last_n": int,
    "presence_penalty": float, "frequency_penalty": float, "seed": int,
    "num_predict": int, "num_ctx": int,
}  # fmt: skip
OPTION_HELP = {  # what each of Ollama's options does (defaults: the model's params layer)
    "temperature": "randomness of sampling: 0 always picks the most likely token",
    "top_k": "sample among the K most likely tokens only (0: all)",
    "top_p": "sample among the most likely tokens whose probabilities add up to P",
    "min_p": "drop tokens less likely than P times the most likely one",
    "typical_p": "keep the tokens closest to the expected surprise, up to mass P (1: off)",
    "repeat_penalty": "divide the logits of tokens seen in the last repeat-last-n by this",
    "repeat_last_n": "how many recent tokens the penalties look at (-1: the whole context)",
    "presence_penalty": "subtract this from the logit of every token already present",
    "frequency_penalty": "subtract this times its count from the logit of each token seen",
    "seed": "random seed, for answers that repeat at temperature > 0",
    "num_predict": "at most N tokens in an answer (-1: until the model stops)",
    "num_ctx": "context size in tokens: the prompt and the answer together",
}

HELP = """Available commands:
  /set parameter NAME VALUE   set a generation option (e.g. /set parameter temperature 0)
  /set system TEXT            set the system message
  /set think | /set nothink   turn the model's thinking on or off
  /set format json | SCHEMA.json | {...}   answers must be JSON (matching the schema)
  /set noformat               free text again
  /show info                  show model details
  /clear                      forget the conversation
  /bye                        exit
Use \"\"\" to begin and end a multi-line message. Ctrl-C stops an answer."""


class Requantizations:
    """--requantize's choices, read from the runtime only when the flag is given or help
    printed: parsing `lantern run` imports no runtime (a server may answer)."""

    def __contains__(self, value: object) -> bool:
        return value in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    @staticmethod
    def _all() -> tuple[str, ...]:
        from engine.runtime.loader import REQUANTIZATIONS

        return tuple(REQUANTIZATIONS)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="chat with a model (one prompt, or interactively)")
    p.add_argument("model", metavar="MODEL", help="a model in the store, or a .gguf file")
    p.add_argument("prompt", metavar="PROMPT", nargs="?", help="answer once and exit")
    p.add_argument("--image", action="append", default=[], metavar="PATH",
                   help="an image for a vision model, sent with PROMPT (repeatable); an "
                   "animated GIF, WebP or PNG goes as a video to Qwen3-VL")
    p.add_argument("--file", action="append", default=[], metavar="PATH",
                   help="a document (text, source, .pdf, .docx) put into the prompt, "
                        "repeatable")
    p.add_argument("--truncate", action="store_true",
                   help="with --file: cut the documents to fit the context instead of stopping")
    p.add_argument("--system", metavar="TEXT",
                   help="system message (default: the model's own system layer)")
    p.add_argument("--raw", action="store_true", help="send PROMPT verbatim, no template")
    p.add_argument("--exact", action="store_true", help="fp32 activations, reference-exact")
    for name, kind in OPTION_FLAGS.items():
        p.add_argument("--" + name.replace("_", "-"), type=kind, dest=name, metavar="N",
                       help=OPTION_HELP[name])
    p.add_argument("--stop", action="append", metavar="S", help="stop string (repeatable)")
    p.add_argument("--top-logprobs", type=int, default=0, metavar="K",
                   help="with --format jsonl: the K (<= 20) most likely tokens at each step")
    p.add_argument("--format", action="append", default=[], metavar="FORMAT",
                   help=FORMAT_HELP)
    p.add_argument("--think", nargs="?", const="true", metavar="true|false|high|medium|low",
                   type=parse_think,
                   help="thinking models: think first (default: the template's own choice)")
    p.add_argument("--hidethinking", action="store_true",
                   help="do not print the model's thinking, only its answer")
    p.add_argument("--tools", action="append", default=[], metavar="builtin|MCP.json",
                   help=TOOLS_HELP)
    p.add_argument("--share", action="append", default=[], metavar="PATH",
                   help="a file the read_file tool may read (with --tools builtin)")
    p.add_argument("--yes", action="store_true",
                   help="allow every tool call without asking")
    p.add_argument("--verbose", action="store_true", help="print timings after each answer")
    p.add_argument("--provider", choices=["cpu", "cuda", "coreml"], default="cpu",
                   help="where ONNX Runtime runs the model (default: cpu; falls back to cpu "
                        "when this build lacks the one asked for)")
    p.add_argument("--requantize", choices=Requantizations(), metavar="SPEC",
                   help="faster 4-bit weights re-quantized from the GGUF: NOT its exact "
                        "weights (%(choices)s)")
    p.add_argument("--speculate", default="auto", metavar="auto|off|ngram|MODEL",
                   help="speculative decoding, the same answer faster where text repeats: "
                        "auto (default: prompt lookup, or a draft model from the store when "
                        "one pays), off, ngram (prompt lookup) or a draft model's name")
    add_control_vector_args(p, "the model as it answers")
    add_models_dir(p)
    add_server(p)
    p.add_argument("--no-server", action="store_true",
                   help="load the model in this process even when `lantern serve` runs")
    p.set_defaults(func=run)


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    values: dict[str, object] = {n: getattr(args, n) for n in OPTION_FLAGS}
    if args.stop:
        values["stop"] = list(args.stop)
    return {k: v for k, v in values.items() if v is not None}


def run(args: argparse.Namespace) -> int:
    from engine.launch import open_chat, options_for  # the engine loads only to run
    from engine.remote.session import RemoteModel

    if not 0 <= args.top_logprobs <= 20:
        raise GenerationError(f"--top-logprobs must be between 0 and 20, got {args.top_logprobs}")
    args.format, answer_format = split_formats(args.format)
    overrides = _overrides(args)
    num_top = max(5, args.top_logprobs)
    model = _ready_model(args, overrides)
    local = not isinstance(model, RemoteModel)
    chat = open_chat(model, options_for(model, overrides), system=args.system,
                     num_top=num_top, think=args.think)
    chat.format = answer_format
    if args.tools:
        from engine.cli.tools_option import attach_tools

        attach_tools(chat, args.tools, args.share, args.yes)
    if local:
        _speculate(args, chat)
        _steer(args, chat)
    images = load_images(model, args.image, args.raw, chat.prepare_image)
    prompt = args.prompt
    if prompt is None and not sys.stdin.isatty():
        prompt = sys.stdin.read()
    if args.file:
        if prompt is None or args.raw:
            raise GenerationError("--file needs a PROMPT (and no --raw): the documents go "
                                  "into that message")
        from engine.cli.file_option import with_files

        prompt = with_files(prompt, args.file, chat, args.truncate)
    if prompt is not None:
        events = chat.raw(prompt) if args.raw else chat.send(prompt, images)
        done = _print_events(events, chat.cancel, args)
        return 0 if done is None or done.done_reason != "cancel" else 130
    if images:
        raise GenerationError("--image needs a PROMPT to go with the image(s)")
    _interactive(chat, args, overrides)
    return 0


def _runs_here(args: argparse.Namespace) -> bool:
    """Whether a flag asks for the model to run in this process, as Lantern runs it."""
    return bool(args.no_server or args.raw or args.exact or args.requantize
                or args.provider != "cpu" or args.speculate != "auto"
                or args.control_vector or args.control_vector_scaled
                or args.think is not None or str(args.model).endswith(".gguf"))


def _ready_model(args: argparse.Namespace, overrides: dict[str, object]):
    """MODEL ready where the flags say (engine.launch.ready_model decides): on --server's
    server; else on a `lantern serve` serving this store, when one answers at
    $LANTERN_HOST (default 127.0.0.1:11435) and no flag asks for the model to run here;
    else loaded in this process as the flags say."""
    from engine.launch import EngineChoices, Where, ready_model
    from engine.remote.session import RemoteModel

    choices = EngineChoices(exact=args.exact, provider=args.provider, requantize=args.requantize)
    if args.server:
        connection = connection_of(args)
        if args.control_vector or args.control_vector_scaled:
            raise GenerationError("--control-vector steers a model Lantern runs; a server's "
                                  "model cannot be steered from here")
        if args.exact or args.requantize or args.provider != "cpu" or args.speculate != "auto":
            print("note: --exact, --requantize, --provider and --speculate choose how "
                  "Lantern runs a model; with --server the server runs it", file=sys.stderr)
        return ready_model(args.model, Where(server=connection), choices, overrides)
    source = resolve_source(args.model, args.models_dir)
    shared = None if _runs_here(args) else Store.open(args.models_dir).root
    try:
        model = ready_model(source, Where(shared=shared), choices, overrides)
    except UnsupportedModel as error:       # the user knows the model by name, not by blob
        if isinstance(source, LocalModel):
            from engine.catalog.runnable import by_name

            raise by_name(error, source) from None
        raise
    if isinstance(model, RemoteModel):
        if args.verbose:
            print(f"note: answered by the Lantern server at {model.connection.host}, which "
                  "keeps the model loaded (--no-server: load it in this process)",
                  file=sys.stderr)
        return model
    from engine.cpu import cpu_info
    from engine.graph.kernels import describe as describe_kernels

    if args.requantize or args.verbose:
        print(f"note: weights: {model.weights}", file=sys.stderr)
    if args.verbose:
        if model.kernels is None:  # exact mode, Lantern's GGUF matmul or another provider
            print(f"note: CPU {cpu_info().describe()}; matmul: {model.matmul}", file=sys.stderr)
        else:  # MatMulNBits in fast CPU mode: the kernel choices made for this CPU
            print(f"note: matmul: {model.matmul}", file=sys.stderr)
            print(f"note: {describe_kernels(model.kernels)}", file=sys.stderr)
    return model


def _speculate(args: argparse.Namespace, chat) -> None:
    """--speculate: draft models come from the same store as the target."""
    from engine.launch import speculate

    store = None if str(args.model).endswith(".gguf") else Store.open(args.models_dir)
    note = speculate(chat, args.speculate, store, requantize=args.requantize)
    if args.verbose:
        name = getattr(chat.drafter, "name", "off")
        print(f"note: speculative decoding: {name}", file=sys.stderr)
    if note and (args.verbose or args.speculate != "auto"):
        print(f"note: {note}", file=sys.stderr)


def _steer(args: argparse.Namespace, chat) -> None:
    """--control-vector FILE[:STRENGTH] and --control-vector-scaled FILE STRENGTH."""
    from engine.gguf.control_vector import Steering
    from engine.launch import steer

    specs = control_vector_specs(args)
    if specs:
        steer(chat, Steering.load(specs))
        if args.verbose:
            print(f"note: steered by {chat.steering.label}", file=sys.stderr)


def load_images(model, paths: list[str], raw: bool,
                 prepare: Callable[[str, int], object]) -> tuple:
    """--image files as ``prepare(path, max_pixels)`` makes them (a local session
    preprocesses, a server's reads the file); a clear error for a model without vision."""
    if not paths:
        return ()
    if not model.has_vision:
        raise ImageError(
            f"{model.name} has no vision: it cannot read images. Drop --image, or pick a "
            "vision model such as qwen2.5vl"
        )
    if raw:
        raise GenerationError("--raw sends text verbatim and cannot carry --image")
    from engine.vision.preprocess import MAX_PIXELS

    prepared = tuple(prepare(path, MAX_PIXELS) for path in paths)
    for path, item in zip(paths, prepared, strict=True):
        note = attachment_note(model.name, path, item)
        if note:
            print(f"note: {note}", file=sys.stderr)
    return prepared


def attachment_note(model_name: str, path: str, item: object) -> str | None:
    """What became of an animated file: a video (its sampled frames), or for a local
    model that reads no video its first frame only."""
    from engine.vision.preprocess import ImageInput
    from engine.vision.video import VideoInput, is_animated

    name = Path(path).name
    if isinstance(item, VideoInput):
        return (f"{name} goes as a video: {item.frames} frames sampled, "
                f"{len(item.patches)} pictures of two frames, {item.n_tokens} tokens")
    if isinstance(item, ImageInput) and is_animated(path):
        return (f"{model_name} cannot read video: it sees only the first frame of {name}. "
                "Pick a Qwen3-VL model to send an animation as a video")
    return None


def resolve_source(name: str, models_dir: str | None) -> LocalModel | Path:
    """A store model by name, or a bare .gguf file given by path."""
    path = Path(name)
    if name.endswith(".gguf") and path.is_file():
        return path
    return Store.open(models_dir).get(name)


_END = object()


def _start_worker(events: Iterator[Event]) -> queue.Queue:
    """Run the event iterator on a worker thread; its events (or its exception), then
    _END, arrive in the returned queue."""
    box: queue.Queue = queue.Queue()

    def work() -> None:
        try:
            for event in events:
                box.put(event)
        except BaseException as error:  # handed to the terminal thread
            box.put(error)
        finally:
            box.put(_END)

    threading.Thread(target=work, daemon=True, name="lantern-generate").start()
    return box


def parse_think(value: str) -> bool | str:
    """Ollama's --think values: true/false, or a level for models that take one."""
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("high", "medium", "low"):
        return lowered
    raise argparse.ArgumentTypeError(
        f"--think takes true, false, high, medium or low, not {value!r}")


class ThinkingPrinter:
    """Thinking in the terminal as `ollama run` shows it: "Thinking..." and the text
    (dim on a terminal), "...done thinking." before the answer; `hide` prints none of it."""

    def __init__(self, hide: bool) -> None:
        self.hide, self.state = hide, "before"
        tty = sys.stdout.isatty()
        self.dim, self.plain = ("\x1b[2m", "\x1b[0m") if tty else ("", "")

    def thinking(self, text: str) -> str:
        if self.hide or not text:
            return ""
        opened = self.state == "before"
        self.state = "thinking"
        return (f"{self.dim}Thinking...\n" if opened else self.dim) + text + self.plain

    def answer(self, text: str) -> str:
        if self.state == "thinking" and text:
            self.state = "answered"
            return f"{self.dim}\n...done thinking.{self.plain}\n\n" + text
        return text


def _print_events(events: Iterator[Event], cancel: Callable[[], None],
                  args: argparse.Namespace) -> DoneEvent | None:
    """Print events as they come. Ctrl-C cancels the answer; we keep reading until the
    worker has really finished, so the next prompt never races a running answer."""
    done: DoneEvent | None = None
    printer = ThinkingPrinter(args.hidethinking)
    box = _start_worker(events)
    while True:
        try:
            item = box.get()
            if item is _END:
                return done
            if isinstance(item, BaseException):
                raise item
            done = _print_event(item, args, printer) or done
        except KeyboardInterrupt:
            cancel()


def _print_event(item: Event, args: argparse.Namespace,
                 printer: ThinkingPrinter) -> DoneEvent | None:
    out = sys.stdout
    if isinstance(item, ToolCallEvent):
        from engine.cli.tools_option import print_tool_call

        print_tool_call(item)
    elif isinstance(item, NoticeEvent):
        print(f"note: {item.message}", file=sys.stderr)
    elif isinstance(item, TokenEvent):
        if args.format == "jsonl":
            out.write(json.dumps(_token_json(item, args.top_logprobs), ensure_ascii=False) + "\n")
        else:
            out.write(printer.thinking(item.thinking_text) + printer.answer(item.text))
        out.flush()
    elif isinstance(item, DoneEvent):
        if args.format == "jsonl":
            out.write(json.dumps({"done": True, **item.counters()}) + "\n")
        else:
            out.write(printer.answer(item.tail) + "\n")
        out.flush()
        if args.verbose:
            _print_timings(item)
        return item
    return None


def _token_json(event: TokenEvent, k: int) -> dict:
    """One token as JSON; from a server, "id" and "logit" are null (it sends neither)."""
    return {
        "id": event.id if event.id >= 0 else None,
        "token": event.piece,
        **({"thinking": True} if event.thinking else {}),
        "logprob": event.logprob,
        "top_logprobs": [
            {"id": t.id if t.id >= 0 else None, "token": t.piece, "logprob": t.logprob,
             "logit": t.logit}
            for t in event.top[:k]
        ],
    }


def _print_timings(done: DoneEvent) -> None:
    def rate(count: int, ns: int) -> str:
        return f"{count / (ns / 1e9):.2f} tokens/s" if ns else "n/a"

    lines = [
        f"total duration:       {done.total_duration / 1e9:.6f}s",
        f"load duration:        {done.load_duration / 1e9:.6f}s",
        f"prompt eval count:    {done.prompt_eval_count} token(s)",
        f"prompt eval duration: {done.prompt_eval_duration / 1e9:.6f}s",
        f"prompt eval rate:     {rate(done.prompt_eval_count, done.prompt_eval_duration)}",
        f"eval count:           {done.eval_count} token(s)",
        f"eval duration:        {done.eval_duration / 1e9:.6f}s",
        f"eval rate:            {rate(done.eval_count, done.eval_duration)}",
    ]
    if done.draft_count:
        lines.append(f"drafted / accepted:   {done.draft_count} / {done.draft_accepted} "
                     f"token(s), acceptance {done.acceptance:.0%}")
    print("\n".join(lines), file=sys.stderr)


def _read_message() -> str | None:
    """One message from the terminal; \"\"\" starts and ends a multi-line one."""
    try:
        line = input(">>> ")
    except EOFError:
        return None
    if not line.lstrip().startswith('"""'):
        return line
    parts = [line.lstrip()[3:]]
    while '"""' not in parts[-1]:
        try:
            parts.append(input("... "))
        except EOFError:
            break
    parts[-1] = parts[-1].split('"""', 1)[0]
    return "\n".join(parts).strip("\n")


def _interactive(chat, args: argparse.Namespace, overrides: dict) -> None:
    while True:
        try:
            message = _read_message()
        except KeyboardInterrupt:
            print("\nUse Ctrl-D or /bye to exit.")
            continue
        if message is None or message.strip() in ("/bye", "/exit"):
            return
        text = message.strip()
        if not text:
            continue
        if text.startswith("/"):
            _command(chat, text, overrides)
            continue
        try:
            _print_events(chat.send(message), chat.cancel, args)
        except LanternError as error:
            print(f"Error: {explain(error)}", file=sys.stderr)


def _command(chat, text: str, overrides: dict) -> None:
    from engine.launch import options_for  # loaded already: the chat runs

    words = text.split()
    if words[0] in ("/?", "/help"):
        print(HELP)
    elif words[0] == "/clear":
        chat.clear()
        print("Cleared session context")
    elif words[:2] == ["/set", "parameter"] and len(words) >= 4:
        name, raw = words[2], " ".join(words[3:])
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if name == "stop":
            value = [*(overrides.get("stop") or []), raw]
        try:
            chat.options = options_for(chat.model, {**overrides, name: value})
        except LanternError as error:
            print(f"Error: {explain(error)}")
            return
        overrides[name] = value
        print(f"Set parameter '{name}' to '{raw}'")
    elif words[:2] in (["/set", "think"], ["/set", "nothink"]):
        chat.think = words[1] == "think"
        print(f"Set '{words[1]}' mode.")
    elif words[:2] == ["/set", "format"] and len(words) >= 3:
        try:
            shape = split_formats([text.split(None, 2)[2]])[1]
        except LanternError as error:
            print(f"Error: {error}")
            return
        if shape is None:
            print("Error: /set format takes json, a schema file or schema text")
            return
        chat.format = shape
        print("Set format.")
    elif words[:2] == ["/set", "noformat"]:
        chat.format = None
        print("Disabled format.")
    elif words[:2] == ["/set", "system"] and len(words) >= 3:
        chat.system = text.split(None, 2)[2]
        print("Set system message.")
    elif words[:2] == ["/show", "info"] and Capability.LAYERS not in chat.capabilities:
        connection = chat.model.connection
        print(f"  Model\n    name                {chat.model.name}")
        print(f"    server              {connection.host} ({connection.kind})")
        print(f"    details             {chat.model.info.details or 'not reported'}")
        print("  Options (sent to the server)\n    " + "\n    ".join(
            f"{k:<20}{v}" for k, v in chosen_options(chat.options).items()))
    elif words[:2] == ["/show", "info"]:
        config = chat.model.gguf.config
        print(f"  Model\n    architecture        {config.architecture}")
        print(f"    parameters          {config.parameter_size}")
        print(f"    context length      {config.text.context_length}")
        print(f"    embedding length    {config.text.hidden_size}")
        print(f"    quantization        {config.quantization}")
        print(f"    provider            {chat.model.provider}")
        print(f"    weights             {chat.model.weights}")
        print("  Options\n    " + "\n    ".join(
            f"{k:<20}{v}" for k, v in vars(chat.options).items()))
    else:
        print(f"Unknown command '{words[0]}'. Type /? for help")


