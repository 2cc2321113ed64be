"""`--server URL` / `--api-key KEY` for commands that can use a remote engine, and
`lantern list --server URL`.

The key comes from --api-key or $LANTERN_API_KEY and is never printed; plain http to
another machine gets a warning on stderr before anything is sent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from engine.cli.tables import table
from engine.remote.connection import API_KEY_ENV, KINDS, Connection


def add_server(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument("--server", metavar="URL", required=required,
                        help="a remote engine: an Ollama server or an OpenAI-compatible one "
                             "(vLLM, SGLang, llama-server, LM Studio)")
    parser.add_argument("--server-kind", choices=("auto", *KINDS), default="auto",
                        help="the server's API (default: detected from its answers)")
    parser.add_argument("--api-key", metavar="KEY",
                        help=f"the server's API key (default: ${API_KEY_ENV})")


def connection_of(args: argparse.Namespace) -> Connection:
    """The connection the arguments name; warns on stderr about plain http off this host."""
    key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV, "")
    connection = Connection(args.server, args.server_kind, key)
    if connection.plain_http_warning:
        print(f"warning: {connection.plain_http_warning}", file=sys.stderr)
    return connection


def list_remote(args: argparse.Namespace) -> int:
    """The models a server offers, as `lantern list` prints the store's."""
    from engine.remote.session import list_remote_models

    connection, models = list_remote_models(connection_of(args))
    if args.json:
        print(json.dumps({"server": connection.host, "kind": connection.kind, "models": [
            {"name": m.name, "details": m.details, "vision": m.vision,
             "blob_digest": m.blob_digest} for m in models]}, indent=2))
        return 0
    rows = [["NAME", "SERVER", "DETAILS"]]
    rows += [[m.name, f"{connection.host} ({connection.kind})",
              m.details + (" · vision" if m.vision and connection.kind == "ollama" else "")]
             for m in models]
    print(table(rows))
    return 0
