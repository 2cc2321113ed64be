"""Does a verify step compute each row as a one-token step does? (speculative decoding)

Three probes. One MatMulNBits node with random weights: the largest difference between
each row of an M-row call and the same row alone, per bit width and accuracy level
(4: int8 activations, 0: float). Then the demo models in fast mode (with and without the
row-invariant graph, engine.graph.kernels, 3.) and exact mode: a
cached prompt, k new tokens fed as one verify forward against k one-token forwards; the
largest logit difference per k and whether the argmax of every row agrees. Then what the
row-invariant graph costs: one-token steps and 4-row verify steps on a 300-token cache,
both graphs in the same process, rounds alternating; medians.

    PYTHONPATH=. .venv/bin/python -m benchmarks.batch_invariance [--model 0.5b 1.5b]
        [--rounds 7]
"""

from __future__ import annotations

import argparse

import numpy as np

NEW_TOKENS = [785, 1156, 5621, 315, 279, 729, 11, 220]   # any ids; ", the function" etc.


def matmul_nbits_rows(k: int, n: int, bits: int, accuracy: int, rows: int = 8) -> float:
    import onnxruntime as ort
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    block = 32
    packed = rng.integers(0, 256, size=(n, k // block, block * bits // 8), dtype=np.uint8)
    scales = (rng.random(n * (k // block), dtype=np.float32) * 0.01).astype(np.float32)
    node = helper.make_node("MatMulNBits", ["A", "B", "S"], ["Y"], domain="com.microsoft",
                            K=k, N=n, bits=bits, block_size=block, accuracy_level=accuracy)
    graph = helper.make_graph(
        [node], "probe", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [1, "M", k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, "M", n])],
        initializer=[helper.make_tensor("B", TensorProto.UINT8, packed.shape, packed.tobytes(),
                                        raw=True),
                     helper.make_tensor("S", TensorProto.FLOAT, scales.shape, scales.tobytes(),
                                        raw=True)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(model.SerializeToString(), options)
    a = rng.standard_normal((1, rows, k)).astype(np.float32)
    together = session.run(None, {"A": a})[0]
    alone = np.concatenate([session.run(None, {"A": a[:, i:i + 1]})[0] for i in range(rows)],
                           axis=1)
    return float(np.abs(together - alone).max())


def decoder_for(path, exact: bool = False, row_invariant: bool = True, num_ctx: int = 512):
    from engine.gguf import open_model
    from engine.runtime.decoder import DecoderSession

    return DecoderSession(open_model(path), exact=exact, max_cache_len=num_ctx,
                          row_invariant=row_invariant)


def verify_vs_steps(decoder) -> list[tuple[int, float, bool]]:
    rng = np.random.default_rng(0)
    decoder.forward(input_ids=rng.integers(100, 20000, 40))
    past = decoder.cache_len
    out = []
    for k in (2, 4, 8):
        decoder.truncate(past)
        batch = decoder.forward(input_ids=NEW_TOKENS[:k], rows=k).logits
        decoder.truncate(past)
        single = np.stack([decoder.forward(input_ids=[t]).logits for t in NEW_TOKENS[:k]])
        out.append((k, float(np.abs(batch - single).max()),
                    bool((batch.argmax(1) == single.argmax(1)).all())))
    return out


def step_costs(path, rounds: int) -> dict[bool, tuple[float, float]]:
    """row_invariant -> median ms of a one-token step and of a 4-row verify step."""
    import statistics
    import time

    decoders = {inv: decoder_for(path, row_invariant=inv, num_ctx=1024) for inv in (True, False)}
    prompt = np.random.default_rng(1).integers(100, 20000, 300)
    times: dict[bool, tuple[list, list]] = {inv: ([], []) for inv in decoders}
    for _ in range(rounds):
        for inv, decoder in decoders.items():
            decoder.reset()
            decoder.forward(input_ids=prompt)
            started = time.perf_counter()
            for t in NEW_TOKENS * 4:
                decoder.forward(input_ids=[t])
            times[inv][0].append((time.perf_counter() - started) / (len(NEW_TOKENS) * 4))
            started = time.perf_counter()
            for _ in range(8):
                decoder.truncate(len(prompt))
                decoder.forward(input_ids=NEW_TOKENS[:4], rows=4)
            times[inv][1].append((time.perf_counter() - started) / 8)
    return {inv: (statistics.median(one) * 1e3, statistics.median(four) * 1e3)
            for inv, (one, four) in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="+", default=["0.5b", "1.5b"])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print("MatMulNBits, 8 rows together vs alone: max |difference|")
    for k, n in ((896, 4864), (4864, 896)):
        for bits in (4, 8):
            for accuracy in (4, 0):
                print(f"  K={k} N={n} {bits}-bit accuracy {accuracy}: "
                      f"{matmul_nbits_rows(k, n, bits, accuracy):.3g}")
    from tests.fixtures.demo_models import DEMO_MODELS, fetch

    for key in args.model:
        path = fetch(DEMO_MODELS[key])
        for label, exact, invariant in (("fast", False, True), ("fast, not row-invariant",
                                        False, False), ("exact", True, True)):
            for k, diff, same in verify_vs_steps(decoder_for(path, exact, invariant)):
                print(f"{key} {label}: verify of {k} rows vs {k} one-token steps: "
                      f"max |logit difference| {diff:.3g}, "
                      f"argmax {'same' if same else 'DIFFERS'}")
        costs = step_costs(path, args.rounds)
        for invariant, (one, four) in costs.items():
            print(f"{key} fast{'' if invariant else ', not row-invariant'}: one-token step "
                  f"{one:.1f} ms, 4-row verify {four:.1f} ms (median of {args.rounds})")
        print(f"{key}: the row-invariant graph costs {costs[True][0] / costs[False][0]:.3f}x "
              f"a one-token step, {costs[True][1] / costs[False][1]:.3f}x a 4-row verify")


if __name__ == "__main__":
    main()
