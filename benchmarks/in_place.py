"""Does ONNX Runtime copy a weight it is handed from a memory-mapped file? One GgufMatMul
over a Q8_0 matrix in a file, the bytes given two ways, each in a fresh process:
``add_initializer`` (what Lantern does, engine.graph.builder.feed_in_place) and
``add_external_initializers`` (how the packed MatMulNBits weights are handed over).
Prints the session's creation time and the anonymous / file-backed RSS it adds.

    PYTHONPATH=. .venv/bin/python -m benchmarks.in_place [--mib 272]
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from pathlib import Path

import numpy as np

K = 8192
ROW_BYTES = K // 32 * 34  # Q8_0


def _rss() -> dict[str, int]:
    return {line.split(":")[0]: int(line.split()[1]) // 1024
            for line in Path("/proc/self/status").read_text().splitlines()
            if line.startswith(("RssAnon", "RssFile"))}


def _measure(path: str, n: int, how: str, queue) -> None:
    import mmap

    import onnxruntime as ort

    from engine import native
    from engine.graph.builder import GraphBuilder, feed_in_place
    from engine.graph.linear import GgufWeight, gguf_matmul
    from engine.native import custom_ops

    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    raw = np.frombuffer(buf, np.uint8).reshape(n, ROW_BYTES)
    g = GraphBuilder("in_place")
    options = ort.SessionOptions()
    options.register_custom_ops_library(str(custom_ops().path))
    if how == "add_initializer":
        y = gguf_matmul(g, "x", GgufWeight(8, n, K, raw), "w", fast=False)
        values = feed_in_place(options, g.in_place)
    else:  # an external initializer, as the packed weights are given (create_session)
        w = g.add_initializer("w.gguf", raw.reshape(-1))
        [y] = g.add_node(native.OP, ["x", w], domain=native.DOMAIN, type=8, k=K, n=n,
                         mode=0, experts=0)
        values = [ort.OrtValue.ortvalue_from_numpy(a) for a in g.external.values()]
        options.add_external_initializers(list(g.external), values)
    model = g.make_model([("x", np.float32, [1, K])], [(y, np.float32, None)])
    before = _rss()
    started = time.perf_counter()
    session = ort.InferenceSession(model.SerializeToString(), options)
    seconds = time.perf_counter() - started
    created = _rss()
    session.run(None, {"x": np.ones((1, K), np.float32)})
    ran = _rss()
    queue.put((seconds, {k: created[k] - before[k] for k in before},
               {k: ran[k] - before[k] for k in before}))
    del values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=272, help="size of the matrix")
    args = parser.parse_args()
    n = args.mib * 2**20 // ROW_BYTES
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.bin"
        np.random.default_rng(0).integers(0, 256, n * ROW_BYTES, np.uint8).tofile(path)
        print(f"Q8_0 [{n}, {K}], {n * ROW_BYTES / 2**20:.0f} MiB in a file")
        context = multiprocessing.get_context("spawn")
        for how in ("add_initializer", "add_external_initializers"):
            queue = context.Queue()
            child = context.Process(target=_measure, args=(str(path), n, how, queue))
            child.start()
            seconds, created, ran = queue.get()
            child.join()
            print(f"{how:27} session {seconds:6.3f} s; RSS added by the session "
                  f"{created}, after one run {ran} (MiB)")


if __name__ == "__main__":
    main()
