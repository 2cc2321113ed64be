"""The --control-vector options, shared by `lantern run` (steers the answer), `lantern
inspect` and `lantern debug --llama-layers` (steer the reference and llama.cpp alike, so
that a steered answer is inspected and compared as it ran)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import GenerationError

if TYPE_CHECKING:
    import numpy as np


def add_control_vector_args(p: argparse.ArgumentParser, what: str) -> None:
    """Register --control-vector FILE[:STRENGTH] and --control-vector-scaled FILE STRENGTH;
    ``what``: what they steer, for the help."""
    p.add_argument("--control-vector", action="append", default=[], metavar="FILE[:STRENGTH]",
                   help=f"add a control vector (llama.cpp's GGUF format, e.g. from `lantern "
                        f"steer`) to the residual stream of {what}, times STRENGTH (default 1; "
                        f"repeatable: the vectors add up)")
    p.add_argument("--control-vector-scaled", action="append", default=[], nargs=2,
                   metavar=("FILE", "STRENGTH"), help="the same, as llama.cpp spells it")


def control_vector_specs(args: argparse.Namespace) -> list[tuple[Path, float]]:
    """Both options' (file, strength) pairs, in order."""
    from engine.gguf.control_vector import parse_spec

    specs = [parse_spec(spec) for spec in args.control_vector]
    for path, strength in args.control_vector_scaled:
        try:
            specs.append((Path(path), float(strength)))
        except ValueError:
            raise GenerationError(f"--control-vector-scaled {path} {strength}: the strength "
                                  "must be a number") from None
    return specs


def steering_table(args: argparse.Namespace, model) -> np.ndarray | None:
    """What the options add after each block of ``model`` (a GGUFModel), [n_layers, H];
    None when nothing steers."""
    from engine.gguf.control_vector import Steering

    steering = Steering.load(control_vector_specs(args))
    if not steering:
        return None
    cfg = model.config
    return steering.table(cfg.architecture, cfg.text.n_layers, cfg.text.hidden_size)
