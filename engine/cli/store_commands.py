"""``lantern list | show | import | verify``: the store, printed as ``ollama`` prints it.

Human output mimics ``ollama list`` / ``ollama show``; ``--json`` mirrors the bodies of
Ollama's ``/api/tags`` and ``/api/show``.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from engine.catalog.describe import show_info, tags_entry
from engine.catalog.importer import import_gguf
from engine.catalog.runnable import open_checked, without_path
from engine.cli import add_models_dir
from engine.cli.server_options import add_server, list_remote
from engine.cli.tables import table
from engine.errors import LanternError
from engine.gguf.architectures import ARCHITECTURES
from engine.gguf.labels import human_number
from engine.store import LocalModel, Store
from engine.store.humanize import human_bytes, human_time
from engine.store.params import parse_params

SHOW_PARTS = ("license", "modelfile", "parameters", "system", "template")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("list", help="list the models in the store (or on a server)")
    p.add_argument("--json", action="store_true", help="print /api/tags-style JSON")
    add_models_dir(p)
    add_server(p)
    p.set_defaults(func=cmd_list)

    p = subparsers.add_parser("show", help="describe a model")
    p.add_argument("model")
    p.add_argument("--json", action="store_true", help="print /api/show-style JSON")
    only = p.add_mutually_exclusive_group()
    for part in SHOW_PARTS:
        only.add_argument(f"--{part}", action="store_true", help=f"print only the {part}")
    add_models_dir(p)
    p.set_defaults(func=cmd_show)

    p = subparsers.add_parser("import", help="add a GGUF file to the store as a model")
    p.add_argument("gguf", metavar="FILE.gguf")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--projector", metavar="MMPROJ.gguf", help="separate vision projector GGUF")
    p.add_argument("--template", metavar="FILE", help="Go template file for the template layer")
    p.add_argument("--system", metavar="TEXT", help="system prompt")
    p.add_argument("--param", metavar="KEY=VALUE", action="append", default=[],
                   help="model parameter (repeat; `stop` may repeat)")
    add_models_dir(p)
    p.set_defaults(func=cmd_import)

    p = subparsers.add_parser("verify", help="check every blob of a model against its digest")
    p.add_argument("model")
    add_models_dir(p)
    p.set_defaults(func=cmd_verify)


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot print {type(value).__name__} as JSON")


def _print_json(value: object) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False, default=_json_default))


def cmd_list(args: argparse.Namespace) -> int:
    if args.server:
        return list_remote(args)
    store = Store.open(args.models_dir)
    models, problems = store.scan()
    for problem in problems:
        if not problem.unsupported:
            print(f"warning: skipped {problem.path}: {problem.message}", file=sys.stderr)
    if args.json:
        _print_json({"models": [tags_entry(m) for m in models]})
        return 0
    rows = [(m.name.display, m.short_id, m.size, m.modified) for m in models]
    rows += [(p.name, p.listing.short_id, p.listing.size,
              p.listing.modified) for p in problems if p.listing is not None]
    rows.sort(key=lambda row: (-int(row[3].timestamp()), row[0]))
    print(table([["NAME", "ID", "SIZE", "MODIFIED"]]
                + [[name, short_id, human_bytes(size), human_time(modified)]
                   for name, short_id, size, modified in rows]))
    cannot = [(p.name, _without_name(p.message))
              for p in problems if p.unsupported]
    cannot += [(m.name.display, reason) for m in models
               if (reason := cannot_run(m)) is not None]
    if cannot:
        print(f"\nLantern cannot run {len(cannot)} of these:")
        print(table([["", name, reason] for name, reason in sorted(cannot)]))
        print("Run those with `ollama run`; `lantern run` takes the others.")
    return 0


def cannot_run(model: LocalModel) -> str | None:
    """Why a load of ``model`` would fail (the model's name, not its blob, says where).
    The store's config blob names the GGUF's architecture: a model of a family Lantern runs
    and without a projector is not opened (reading a header and a vocabulary is slow for a
    listing; `lantern run` still checks the rest)."""
    if model.config.get("model_family") in ARCHITECTURES and model.projector_path is None:
        return None
    try:
        open_checked(model)
    except LanternError as error:
        return without_path(str(error), model)
    return None


def _without_name(message: str) -> str:
    head, sep, tail = message.partition(": ")
    return tail if sep else message


def _section(title: str, rows: list[list[str]]) -> str:
    return f"  {title}\n" + table([["", *row] for row in rows]) + "\n"


def _head(text: str, n: int = 2) -> list[list[str]]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return [[line] for line in lines[:n]] + ([["..."]] if len(lines) > n else [])


def render_show(info: dict) -> str:
    """The human summary ``ollama show`` prints."""
    model_info = info["model_info"]
    details = info["details"]
    arch = str(model_info.get("general.architecture", details["family"]))
    rows = [["architecture", arch], ["parameters", str(details["parameter_size"])]]
    for key, label in (("context_length", "context length"),
                       ("embedding_length", "embedding length")):
        if f"{arch}.{key}" in model_info:
            rows.append([label, str(model_info[f"{arch}.{key}"])])
    rows.append(["quantization", str(details["quantization_level"])])
    sections = [_section("Model", rows)]
    if info.get("capabilities"):
        sections.append(_section("Capabilities", [[c] for c in info["capabilities"]]))
    projector = info.get("projector_info")
    if projector:
        p_arch = str(projector.get("general.architecture", ""))
        p_rows = [["architecture", p_arch]]
        p_rows.append(["parameters", human_number(int(projector["general.parameter_count"]))])
        for key, label in (("embedding_length", "embedding length"),
                           ("projection_dim", "dimensions")):
            if f"{p_arch}.vision.{key}" in projector:
                p_rows.append([label, str(projector[f"{p_arch}.vision.{key}"])])
        sections.append(_section("Projector", p_rows))
    if info.get("parameters"):
        sections.append(_section("Parameters",
                                 [line.split() for line in info["parameters"].splitlines()]))
    for key, title in (("system", "System"), ("license", "License")):
        if info.get(key):
            sections.append(_section(title, _head(info[key])))
    return "\n".join(sections)


def cmd_show(args: argparse.Namespace) -> int:
    store = Store.open(args.models_dir)
    info = show_info(store.get(args.model))
    part = next((p for p in SHOW_PARTS if getattr(args, p)), None)
    if part is not None:
        text = str(info.get(part, ""))
        sys.stdout.write(text if part in ("system", "template") else text + "\n")
    elif args.json:
        _print_json(info)
    else:
        print(render_show(info), end="")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    template = None
    if args.template:
        path = Path(args.template).expanduser()
        try:
            template = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise LanternError(f"cannot read template file {path}: {error}") from None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        params = parse_params(args.param)
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    store = Store.open(args.models_dir)
    model = import_gguf(store, args.gguf, args.name, projector=args.projector,
                              template=template, system=args.system, params=params)
    print(f"imported {model.name.display} ({model.short_id}, {human_bytes(model.size)}) "
          f"into {store.root}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    store = Store.open(args.models_dir)
    model = store.get(args.model)
    checked = store.verify(model)
    print(f"{model.name.display}: {len(checked)} blobs match their sha256 digests")
    return 0
