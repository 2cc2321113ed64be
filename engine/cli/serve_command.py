"""`lantern serve`: keep models loaded between `lantern run` calls, as `ollama serve` does.

It loads a model on the first request for it and keeps it for the keep-alive period after
the last one (one model at a time); `lantern run` sends its chats there when it serves the
same store. It is not started for you: run it in a terminal or as a user service."""

from __future__ import annotations

import argparse
import errno
import os
import sys

from engine.cli import add_models_dir
from engine.errors import LanternError
from engine.remote.connection import is_loopback


def register(sub: argparse._SubParsersAction) -> None:
    from engine.remote.lantern_server import DEFAULT_PORT, HOST_ENV

    p = sub.add_parser("serve", help="keep models loaded between `lantern run` calls "
                                     "(Ollama's API, on this computer)")
    p.add_argument("--host", metavar="ADDRESS",
                   help=f"address to listen on (default: ${HOST_ENV} or 127.0.0.1; another "
                        "than loopback lets anyone who reaches it use the models)")
    p.add_argument("--port", type=int, metavar="N",
                   help=f"port to listen on (default: ${HOST_ENV}'s or {DEFAULT_PORT})")
    p.add_argument("--keep-alive", metavar="DURATION",
                   help="how long a model stays loaded after its last request: seconds or "
                        "e.g. 5m, 1h; -1 forever, 0 unload at once (default: "
                        "$LANTERN_KEEP_ALIVE or 5m; a request's keep_alive wins)")
    add_models_dir(p)
    p.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    from engine.launch import EngineChoices
    from engine.remote.lantern_server import server_address
    from engine.serve.keep_alive import DEFAULT_KEEP_ALIVE_S, KEEP_ALIVE_ENV, parse_keep_alive
    from engine.serve.server import LanternServer, serve
    from engine.store import Store

    store = Store.open(args.models_dir)
    keep = args.keep_alive or os.environ.get(KEEP_ALIVE_ENV)
    keep_alive = DEFAULT_KEEP_ALIVE_S if keep is None else parse_keep_alive(keep)
    host, port = server_address(args.host, args.port)
    try:
        server = LanternServer((host, port), store, EngineChoices(), keep_alive)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise LanternError(f"{host}:{port} is in use: is a Lantern server running "
                               "already? Choose another with --port") from None
        raise LanternError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    if not is_loopback(host):
        print(f"warning: listening on {host}: anyone who reaches this address can use the "
              "models, without a password", file=sys.stderr)
    kept = "forever" if keep_alive is None else f"{keep_alive:g} s"
    print(f"Lantern serves {store.root} at {server.url} (models stay loaded {kept} after "
          "their last request; Ctrl-C stops)", file=sys.stderr, flush=True)
    serve(server)
    return 0
