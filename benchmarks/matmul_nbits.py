"""Decode-shaped (M=1) MatMulNBits timings for each GGUF mapping, on a 896 x 4864 weight.

The weight has the 0.5B model's ffn_down shape (n=896 out, k=4864 in; k is a multiple of
256 so every K-quant fits). Each line is one graph (MatMulNBits or MatMul from engine.graph.linear)
timed over repeated ``session.run`` calls with 2 intra-op threads; the last lines compare
external (in-memory) against inline initializers to show pre-packing survives.

    .venv/bin/python -m benchmarks.matmul_nbits [--threads 2] [--runs 300]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as T
from onnx import numpy_helper

from engine.gguf.repack import PackedWeight, pack
from engine.graph.builder import GraphBuilder, create_session
from engine.graph.linear import dense_matmul, matmul_nbits

N, K = 896, 4864
FP16_FIELDS = {T.Q4_0: (0,), T.Q8_0: (0,), T.Q5_0: (0,), T.Q4_K: (0, 2), T.Q5_K: (0, 2),
               T.Q6_K: (208,)}


@dataclass(frozen=True)
class RandomTensor:
    name: str
    ggml_type: T
    shape: tuple[int, int]
    raw: np.ndarray


def random_tensor(qtype: T, rng: np.random.Generator) -> RandomTensor:
    """Random codes with small finite fp16 scales: what the timing needs, nothing more."""
    if qtype == T.F32:
        raw = rng.standard_normal((N, K), dtype=np.float32).view(np.uint8)
        return RandomTensor("w", qtype, (N, K), raw)
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (N, K // block, size), dtype=np.uint8)
    for at in FP16_FIELDS[qtype]:
        d = (rng.random((N, K // block)) * 0.01).astype(np.float16)
        raw[..., at:at + 2] = d.view(np.uint8).reshape(N, K // block, 2)
    return RandomTensor("w", qtype, (N, K), raw.reshape(N, -1))


def session_for(weight: PackedWeight, accuracy_level: int, threads: int,
                inline: bool = False) -> ort.InferenceSession:
    g = GraphBuilder("bench")
    if weight.dense is not None:
        y = dense_matmul(g, "x", weight.dense, "ffn_down")
    else:
        y = matmul_nbits(g, "x", weight, "ffn_down", accuracy_level=accuracy_level)
    model = g.make_model([("x", np.float32, [1, 1, K])], [(y, np.float32, None)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    if inline:
        for tensor in model.graph.initializer:
            if tensor.name in g.external:
                tensor.CopyFrom(numpy_helper.from_array(g.external[tensor.name], tensor.name))
        return ort.InferenceSession(model.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"])
    return create_session(model, g.external, options)


def time_run(session: ort.InferenceSession, runs: int) -> float:
    """Median microseconds per run."""
    x = np.random.default_rng(0).standard_normal((1, 1, K), dtype=np.float32)
    for _ in range(20):
        session.run(None, {"x": x})
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, {"x": x})
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = [
        ("F32 dense MatMul", T.F32),
        ("Q4_0 -> 4-bit bs32", T.Q4_0),
        ("Q8_0 -> 8-bit bs32", T.Q8_0),
        ("Q5_0 -> 8-bit bs32", T.Q5_0),
        ("Q6_K -> 8-bit bs16", T.Q6_K),
        ("Q4_K -> 4-bit bs32 zp0 + offsets", T.Q4_K),
        ("Q5_K -> 8-bit bs32 + offsets", T.Q5_K),
    ]
    print(f"M=1, n={N}, k={K}, {args.threads} threads, median of {args.runs} runs "
          f"(onnxruntime {ort.__version__})")
    print(f"{'mapping':36s} {'acc 0 (us)':>11s} {'acc 4 (us)':>11s}")
    for label, qtype in cases:
        weight = pack(random_tensor(qtype, rng))
        t0, t4 = (time_run(session_for(weight, level, args.threads), args.runs)
                  for level in (0, 4))
        print(f"{label:36s} {t0:11.1f} {t4:11.1f}")
    weight = pack(random_tensor(T.Q4_0, rng))
    for inline in (False, True):
        start = time.perf_counter()
        session = session_for(weight, 4, args.threads, inline=inline)
        load = time.perf_counter() - start
        where = "inline in protobuf" if inline else "external, from memory"
        print(f"Q4_0 acc 4, weights {where:22s}: {time_run(session, args.runs):7.1f} us/run, "
              f"session {load * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
