"""Derives fast mode's kernel choices on this CPU and checks them against engine.graph.kernels.

One MatMulNBits (or dense MatMul) of the 1.5B demo model's ffn_down shape (n=1536, k=8960)
per weight class, random codes: for int8 and float activations, and for Q4_K with its zero
point explicit and folded, the median time of a one-row call (decode) and a 512-row call
(prefill), configurations alternating round by round; and whether 8 rows come out the
same together as alone, and as in calls of 3 and 5 (row invariance). Per class the
precision that answers a 512-token prompt with 512 tokens sooner wins, and int8 must keep
rows alike among several; a width whose one-row kernel rounds its own way runs a verify
step row by row; zero points are folded unless that is more than 3% slower. From those it
derives the CPU class's row of engine.graph.kernels.TABLE and exits 1 where the table says
otherwise.

    PYTHONPATH=. .venv/bin/python -m benchmarks.kernels [--threads 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as T

from benchmarks.matmul_nbits import FP16_FIELDS, RandomTensor
from engine.cpu import cpu_info
from engine.gguf.repack import PackedWeight, pack
from engine.graph.builder import GraphBuilder, create_session
from engine.graph.kernels import Kernels, cpu_class, fold_zero_points, kernels_for
from engine.graph.linear import linear

N, K = 1536, 8960
CLASSES = {"4-bit (Q4_0)": T.Q4_0, "4-bit + offsets (Q4_K)": T.Q4_K,
           "8-bit bs16 (Q6_K)": T.Q6_K, "8-bit bs32 (Q8_0)": T.Q8_0}
INT8, FLOAT = 4, 0
PROMPT_AND_ANSWER = 512  # tokens: one 512-row call and 512 one-row calls
FOLD_MARGIN = 1.03       # folded zero points unless more than 3% slower


def random_weight(qtype: T, rng: np.random.Generator) -> PackedWeight:
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (N, K // block, size), dtype=np.uint8)
    for at in FP16_FIELDS[qtype]:
        d = (rng.random((N, K // block)) * 0.01).astype(np.float16)
        raw[..., at:at + 2] = d.view(np.uint8).reshape(N, K // block, 2)
    return pack(RandomTensor("w", qtype, (N, K), raw.reshape(N, -1)))


def session_for(weight: PackedWeight, accuracy: int, threads: int) -> ort.InferenceSession:
    g = GraphBuilder("kernels")
    y = linear(g, "x", weight, "ffn_down", accuracy_level=accuracy)
    model = g.make_model([("x", np.float32, [1, "M", K])], [(y, np.float32, None)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return create_session(model, g.external, options)


def seconds(session: ort.InferenceSession, x: np.ndarray, runs: int) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        session.run(None, {"x": x})
    return (time.perf_counter() - started) / runs


def rows_differ(session: ort.InferenceSession, rows: int = 8) -> float:
    """max |Δ| between 8 rows in one call and each row alone (the one-row kernel)."""
    x = np.random.default_rng(1).standard_normal((1, rows, K)).astype(np.float32)
    together = session.run(None, {"x": x})[0]
    alone = np.concatenate([session.run(None, {"x": x[:, i:i + 1]})[0] for i in range(rows)],
                           axis=1)
    return float(np.abs(together - alone).max())


def many_rows_differ(session: ort.InferenceSession, rows: int = 8) -> float:
    """max |Δ| between 8 rows in one call and the same rows in calls of 3 and 5 (the
    many-row kernel with other neighbours): 0 means only the one-row kernel rounds
    its own way, so a verify step can take its rows apart (engine.graph.kernels, 3.)."""
    x = np.random.default_rng(1).standard_normal((1, rows, K)).astype(np.float32)
    together = session.run(None, {"x": x})[0]
    split = np.concatenate([session.run(None, {"x": x[:, :3]})[0],
                            session.run(None, {"x": x[:, 3:]})[0]], axis=1)
    return float(np.abs(together - split).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cpu = cpu_info()
    print(f"CPU: {cpu.describe()}, class {cpu_class(cpu)}; onnxruntime {ort.__version__}; "
          f"{args.threads} threads; n={N} k={K}; median of {args.rounds} alternating rounds")
    rng = np.random.default_rng(0)
    sessions: dict[tuple[str, str], ort.InferenceSession] = {}
    for label, qtype in CLASSES.items():
        weight = random_weight(qtype, rng)
        sessions[label, "int8"] = session_for(weight, INT8, args.threads)
        sessions[label, "float"] = session_for(weight, FLOAT, args.threads)
        if qtype == T.Q4_K:
            sessions[label, "int8, folded"] = session_for(fold_zero_points(weight), INT8,
                                                          args.threads)
    one = np.random.default_rng(2).standard_normal((1, 1, K)).astype(np.float32)
    verify = np.random.default_rng(4).standard_normal((1, 4, K)).astype(np.float32)
    many = np.random.default_rng(3).standard_normal((1, 512, K)).astype(np.float32)
    times: dict[tuple[str, str], tuple[list[float], list[float], list[float]]] = {
        key: ([], [], []) for key in sessions}
    for _ in range(args.rounds):
        for key, session in sessions.items():
            times[key][0].append(seconds(session, one, 20) * 1e3)
            times[key][1].append(seconds(session, many, 1) * 1e3)
            times[key][2].append(seconds(session, verify, 10) * 1e3)
    print(f"{'weight class':26s} {'activations':14s} {'1 row ms':>9s} {'4 rows ms':>10s} "
          f"{'512 rows ms':>12s} {'rows together vs alone':>23s}")
    median = {key: (statistics.median(a), statistics.median(b)) for key, (a, b, _) in
              times.items()}
    for (label, acts), session in sessions.items():
        decode, prefill = median[label, acts]
        four = statistics.median(times[label, acts][2])
        print(f"{label:26s} {acts:14s} {decode:9.3f} {four:10.3f} {prefill:12.1f} "
              f"{rows_differ(session):23.3g}")

    # per class, the precision that serves a 512-token prompt and a 512-token answer sooner;
    # int8 must also give a row the same bits in any call of several rows, and where its
    # one-row kernel rounds its own way, a verify step runs that width row by row
    def reply_ms(label: str, acts: str) -> float:
        decode, prefill = median[label, acts]
        return prefill + PROMPT_AND_ANSWER * decode

    int8_everywhere, apart = True, set()
    for label, qtype in CLASSES.items():
        wins = reply_ms(label, "int8") <= reply_ms(label, "float")
        many_alike = many_rows_differ(sessions[label, "int8"]) == 0
        one_alike = rows_differ(sessions[label, "int8"]) == 0
        print(f"{label}: int8 {reply_ms(label, 'int8'):.0f} ms vs float "
              f"{reply_ms(label, 'float'):.0f} ms for {PROMPT_AND_ANSWER} tokens in and out; "
              f"int8 rows alike: one row vs many {one_alike}, many vs many {many_alike}")
        int8_everywhere &= wins and many_alike
        if not one_alike:
            apart.add(4 if qtype in (T.Q4_0, T.Q4_K) else 8)
    # folded unless measurably slower: it is also the closer to exact mode
    q4k = "4-bit + offsets (Q4_K)"
    derived = Kernels(fold_zero_points=reply_ms(q4k, "int8, folded")
                      <= FOLD_MARGIN * reply_ms(q4k, "int8")
                      and many_rows_differ(sessions[q4k, "int8, folded"]) == 0,
                      rows_apart_bits=tuple(sorted(apart)))
    table = kernels_for(cpu)
    print(f"derived: int8 activations everywhere: {int8_everywhere}; {derived}")
    print(f"engine.graph.kernels for class {cpu_class(cpu)}: {table}")
    if not int8_everywhere or derived != table:
        print("MISMATCH: engine.graph.kernels does not hold this CPU's best choice")
        sys.exit(1)
    print("engine.graph.kernels holds this CPU's best choice")


if __name__ == "__main__":
    main()
