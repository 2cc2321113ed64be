"""Time per token of a JSON-schema mask over the demo vocabulary (151,936 tokens):
llguidance against xgrammar, on the same token paths (each schema's example answer,
tokenized as the model would write it). Exactness: both masks must allow every token of
the path and the stop tokens exactly at its end.

    .venv/bin/python -m benchmarks.constraint_masks   # xgrammar is not a dependency: pip it first
"""

import json
import statistics
import time

import numpy as np

from engine.tokenizer.load import load_tokenizer
from tests.fixtures.demo_models import QWEN_05B, fetch

CASES = [
    ({"type": "object"}, {"a": [1, 2.5, "x"], "b": {"c": None}}),
    ({"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}},
        "home": {"type": "object", "properties": {"city": {"type": "string"},
                                                  "lat": {"type": "number"}},
                 "required": ["city", "lat"]}},
      "required": ["name", "age", "tags", "home"]},
     {"name": "Zoë Ünal 東京", "age": 31, "tags": ["red", "blue"],
      "home": {"city": "Köln", "lat": 50.94}}),
]


def bits(mask: np.ndarray, vocab: int) -> np.ndarray:
    return np.unpackbits(mask.view(np.uint8), bitorder="little")[:vocab].astype(bool)


def run_llguidance(tok, schema, path) -> tuple[float, list[float]]:
    """Lantern's own Constraint: the mask and its unpacking to bool [V] are timed."""
    from engine.runtime.constraint import Constraint

    start = time.perf_counter()
    constraint = Constraint(tok, schema)
    compiled = time.perf_counter() - start
    times = []
    for token in [*path, min(tok.stop_ids)]:
        start = time.perf_counter()
        allowed = constraint.allowed()
        times.append(time.perf_counter() - start)
        assert allowed[token], f"llguidance refused {tok.id_to_piece(token)!r}"
        assert allowed[min(tok.stop_ids)] == (token in tok.stop_ids)
        constraint.advance(token)
    return compiled, times


def run_xgrammar(tok, schema, path) -> tuple[float, list[float]]:
    """The bitmask alone (its unpacking would add the same ~50 us as llguidance's)."""
    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_object=tok.backend)
    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=tok.vocab_size,
                                              stop_token_ids=sorted(tok.stop_ids))
    start = time.perf_counter()
    grammar = xgr.GrammarCompiler(info).compile_json_schema(json.dumps(schema))
    matcher = xgr.GrammarMatcher(grammar)
    compiled = time.perf_counter() - start
    mask = xgr.allocate_token_bitmask(1, tok.vocab_size)
    times = []
    for token in [*path, min(tok.stop_ids)]:
        start = time.perf_counter()
        matcher.fill_next_token_bitmask(mask)
        times.append(time.perf_counter() - start)
        allowed = bits(mask[0].numpy(), tok.vocab_size)
        assert allowed[token], f"xgrammar refused {tok.id_to_piece(token)!r}"
        assert allowed[min(tok.stop_ids)] == (token in tok.stop_ids)
        matcher.accept_token(token)
    return compiled, times


def main() -> None:
    tok = load_tokenizer(fetch(QWEN_05B))
    for name, run in (("llguidance", run_llguidance), ("xgrammar", run_xgrammar)):
        for schema, example in CASES:
            path = tok.encode(json.dumps(example, ensure_ascii=False))
            first, _ = run(tok, schema, path)  # the first run builds the vocabulary's tables
            compiled, times = run(tok, schema, path)
            print(f"{name:10} schema {len(json.dumps(schema)):4} chars, {len(path):3} tokens: "
                  f"compile {first * 1e3:6.1f} ms first, {compiled * 1e3:5.1f} ms again; mask "
                  f"median {statistics.median(times) * 1e6:5.0f} us, "
                  f"max {max(times) * 1e6:5.0f} us")


if __name__ == "__main__":
    main()
