"""Does a verify step compute each row as a one-token step does? (speculative decoding)

Two probes. One MatMulNBits node with random weights: the largest difference between
each row of an M-row call and the same row alone, per bit width and accuracy level
(4: int8 activations, 0: float). Then the demo models in fast and exact mode: a cached
prompt, k new tokens fed as one verify forward against k one-token forwards; the largest
logit difference per k and whether the argmax of every row agrees.

    PYTHONPATH=. .venv/bin/python -m benchmarks.batch_invariance [--model 0.5b 1.5b]
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


def verify_vs_steps(path, exact: bool) -> list[tuple[int, float, bool]]:
    from engine.runtime.loader import load_model

    model = load_model(path, num_ctx=512, exact=exact)
    decoder = model.decoder
    prompt = model.tokenize_chat([{"role": "user", "content": "Rename the function area to "
                                   "rect_area everywhere. def area(w, h): return w * h"}])
    decoder.forward(input_ids=prompt.ids)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="+", default=["0.5b", "1.5b"])
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
        for exact in (False, True):
            for k, diff, same in verify_vs_steps(path, exact):
                print(f"{key} {'exact' if exact else 'fast'}: verify of {k} rows vs {k} "
                      f"one-token steps: max |logit difference| {diff:.3g}, "
                      f"argmax {'same' if same else 'DIFFERS'}")


if __name__ == "__main__":
    main()
