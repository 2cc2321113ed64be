"""The layer-by-layer tolerance against llama.cpp, measured: every block's output in
llama-cpp-python and in the fp32 reference over the chat prompts of benchmarks/agreement.py
on the demo models. Prints per prompt the largest relative max |Δ| over the blocks (and
which block) and the lowest cosine, then the overall largest;
engine.inspect.llama_layers.TOLERANCE is set from it with a margin.

    .venv/bin/python -m benchmarks.llama_layers_tolerance 0.5b 1.5b   # needs llama-cpp-python
    .venv/bin/python -m benchmarks.llama_layers_tolerance 1.5b --prompts 3   # the first 3
"""

import argparse

import numpy as np

from benchmarks.agreement import WIDER, chat
from engine.gguf import open_model
from engine.inspect.llama_layers import TOLERANCE, llama_layers
from tests.fixtures.demo_models import DEMO_MODELS, fetch
from tests.hf_oracle import PROMPTS


def main(keys: list[str], prompts: int | None = None) -> None:
    texts = ([p.text for p in PROMPTS] + list(WIDER))[:prompts]
    for key in keys:
        gguf = fetch(DEMO_MODELS[key])
        model = open_model(gguf)
        worst, lowest, logits = 0.0, 1.0, 0.0
        print(f"\n{key}: llama.cpp vs the fp32 reference, every block")
        for n, ids in enumerate(chat(gguf, texts)):
            result = llama_layers(gguf, model, ids)
            relative = np.array([r.delta.relative for r in result.rows])
            cosine = min(r.delta.cosine for r in result.rows)
            block = int(relative.argmax())
            print(f"  prompt {n:>2}: {len(ids):>3} tokens  max relative {relative.max():.4f} "
                  f"({result.rows[block].delta.label})  min cosine {cosine:.6f}  logits "
                  f"relative {result.result.logits.relative:.4f}")
            worst, lowest = max(worst, relative.max()), min(lowest, cosine)
            logits = max(logits, result.result.logits.relative)
        print(f"{key}: largest relative {worst:.4f}, lowest cosine {lowest:.6f}, largest "
              f"logits relative {logits:.4f}; TOLERANCE {TOLERANCE}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=["0.5b"], choices=sorted(DEMO_MODELS))
    parser.add_argument("--prompts", type=int, help="only the first N prompts")
    args = parser.parse_args()
    main(args.models, args.prompts)
