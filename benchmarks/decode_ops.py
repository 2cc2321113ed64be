"""A decode step's matmuls, one group at a time (e.g. the 28 ffn_gate of the 1.5B), as
interleaved A/B runs of two builds of Lantern's op library or two session settings, with
ONNX Runtime's own thread pool (2 threads): which change makes the one-row path faster.

Each group is one ONNX graph holding one lantern.GgufMatMul per matching tensor of a demo
model's GGUF (read in place, as the decoder reads them), all fed the same one-token x; a
run multiplies every layer's matrix once, so the weights stream from memory as in a
decode step. A variant is a library built with `cc -O2 -ffp-contract=off` (as setup.py)
from this tree or a git revision's engine/native, with optional -D definitions, and
optional ONNX Runtime session config entries. A and B run alternately (order flipped each
repetition), each a few runs; the ratio A time / B time per repetition (above 1: B is
faster) is reported as median and quartiles, which a shared machine's noise affects far
less than the absolute times; the ratio of the best times, nearest a quiet machine's, too.

    .venv/bin/python -m benchmarks.decode_ops 1.5b --b-define COLUMN_CHUNK=32
    .venv/bin/python -m benchmarks.decode_ops 1.5b --a-rev HEAD~1 --groups ffn_gate ffn_down
    .venv/bin/python -m benchmarks.decode_ops 1.5b --b-option session.intra_op.allow_spinning=1
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("op.c", "quants.c", "quants_x86.c", "quants.h", "quants_x86.h")
# the decoder's settings (engine/runtime/decoder.py); a variant's --*-option overrides them
DECODER_OPTIONS = {"session.intra_op.allow_spinning": "0", "session.dynamic_block_base": "4"}
GROUPS = {
    "attn_q": r"blk\.\d+\.attn_q\.weight", "attn_k": r"blk\.\d+\.attn_k\.weight",
    "attn_v": r"blk\.\d+\.attn_v\.weight", "attn_output": r"blk\.\d+\.attn_output\.weight",
    "ffn_gate": r"blk\.\d+\.ffn_gate\.weight", "ffn_up": r"blk\.\d+\.ffn_up\.weight",
    "ffn_down": r"blk\.\d+\.ffn_down\.weight", "lm_head": r"output\.weight",
}


@dataclass
class Variant:
    label: str
    rev: str | None                  # None: this tree's engine/native
    defines: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    library: Path | None = None

    def build(self, workdir: Path) -> None:
        src = workdir / f"src-{self.label}"
        src.mkdir()
        for name in SOURCES:
            if self.rev is None:
                text = (ROOT / "engine" / "native" / name).read_bytes()
            else:
                text = subprocess.run(["git", "show", f"{self.rev}:engine/native/{name}"],
                                      cwd=ROOT, check=True, capture_output=True).stdout
            (src / name).write_bytes(text)
        self.library = workdir / f"lib-{self.label}.so"
        subprocess.run(["cc", "-O2", "-ffp-contract=off", "-shared", "-fPIC",
                        *(f"-D{d}" for d in self.defines), "-o", str(self.library),
                        *(str(src / n) for n in SOURCES if n.endswith(".c"))], check=True)

    def describe(self) -> str:
        parts = [self.rev or "this tree"] + [f"-D{d}" for d in self.defines]
        parts += [f"{k}={v}" for k, v in self.options.items()]
        return f"{self.label}: " + ", ".join(parts)


def group_session(model, pattern: str, variant: Variant, threads: int):
    """A session running every tensor matching ``pattern`` on one x, and what it keeps."""
    from engine.graph.builder import GraphBuilder, feed_in_place
    from engine.graph.linear import GgufWeight, gguf_matmul

    g = GraphBuilder("group")
    outputs, nbytes, k = [], 0, None
    names = [n for n in model.tensors if re.fullmatch(pattern, n)]
    if not names and pattern == GROUPS["lm_head"]:
        names = ["token_embd.weight"]  # tied: the output matrix is the token embedding
    for name in names:
        t = model.tensors[name]
        n, k = t.shape[0], int(np.prod(t.shape[1:]))
        weight = GgufWeight(int(t.ggml_type), n, k, t.raw.reshape(n, -1))
        outputs.append((gguf_matmul(g, "x", weight, name.replace(".", "_"), fast=True),
                        np.float32, None))
        nbytes += t.n_bytes
    onnx_model = g.make_model([("x", np.float32, None)], outputs)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    for key, value in {**DECODER_OPTIONS, **variant.options}.items():
        options.add_session_config_entry(key, value)
    options.register_custom_ops_library(str(variant.library))
    values = feed_in_place(options, g.in_place)
    session = ort.InferenceSession(onnx_model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session, values, k, nbytes, len(names)


def timed(session, feed: dict, runs: int) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        session.run(None, feed)
    return (time.perf_counter() - started) / runs


def compare(model, group: str, a: Variant, b: Variant, threads: int, reps: int,
            runs: int) -> str:
    sa, keep_a, k, nbytes, count = group_session(model, GROUPS[group], a, threads)
    sb, keep_b, *_ = group_session(model, GROUPS[group], b, threads)
    feed = {"x": np.random.default_rng(0).standard_normal((1, 1, k)).astype(np.float32)}
    ya, yb = sa.run(None, feed), sb.run(None, feed)
    same = all(p.tobytes() == q.tobytes() for p, q in zip(ya, yb, strict=True))
    times_a, times_b, ratios = [], [], []
    for rep in range(reps):
        pair = [(sa, times_a), (sb, times_b)]
        for session, times in pair if rep % 2 == 0 else pair[::-1]:
            times.append(timed(session, feed, runs))
        ratios.append(times_a[-1] / times_b[-1])
    del keep_a, keep_b
    q1, med, q3 = statistics.quantiles(ratios, n=4)
    ta, tb = min(times_a), min(times_b)
    return (f"| {group} x {count} | {nbytes / 1e6:.0f} MB "
            f"| {ta * 1e3:.2f} ({nbytes / ta / 1e9:.1f} GB/s) "
            f"| {tb * 1e3:.2f} ({nbytes / tb / 1e9:.1f} GB/s) | {ta / tb:.3f} "
            f"| **{med:.3f}** ({q1:.3f}-{q3:.3f}) | {'yes' if same else 'NO'} |")


def variant(label: str, rev: str | None, defines: list[str], options: list[str]) -> Variant:
    return Variant(label, rev, defines, dict(o.split("=", 1) for o in options))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=("0.5b", "1.5b"))
    parser.add_argument("--groups", nargs="+", choices=tuple(GROUPS), default=list(GROUPS))
    for side in ("a", "b"):
        parser.add_argument(f"--{side}-rev", help="git revision of engine/native (default: "
                            "this tree)")
        parser.add_argument(f"--{side}-define", nargs="*", default=[], help="-D for the build")
        parser.add_argument(f"--{side}-option", nargs="*", default=[],
                            help="session config entries, key=value")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3, help="runs per timing")
    args = parser.parse_args()
    from engine.cpu import cpu_info
    from engine.gguf import open_model
    from tests.fixtures.demo_models import DEMO_MODELS, fetch

    a = variant("A", args.a_rev, args.a_define, args.a_option)
    b = variant("B", args.b_rev, args.b_define, args.b_option)
    model = open_model(fetch(DEMO_MODELS[args.model]))
    with tempfile.TemporaryDirectory() as tmp:
        a.build(Path(tmp))
        b.build(Path(tmp))
        print(f"{cpu_info().describe()}, {os.cpu_count()} CPUs; {args.threads} threads; "
              f"{args.model}; {args.reps} repetitions of {args.runs} runs each, A and B "
              f"alternating; load average {os.getloadavg()[0]:.2f}")
        print(a.describe())
        print(b.describe())
        print("| group | weights | A best ms | B best ms | A/B of bests "
              "| A/B per repetition: median (quartiles) | same bits |")
        print("|---|---|---|---|---|---|---|")
        for group in args.groups:
            print(compare(model, group, a, b, args.threads, args.reps, args.runs), flush=True)


if __name__ == "__main__":
    main()
