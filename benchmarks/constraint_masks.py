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


def run_llguidance(tok, schema, path) -> list[float]:
    import llguidance
    from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

    lltok = llguidance.LLTokenizer(tok.backend.to_str(), n_vocab=tok.vocab_size,
                                   eos_token=sorted(tok.stop_ids))
    matcher = llguidance.LLMatcher(lltok, llguidance.LLMatcher.grammar_from_json_schema(schema))
    mask = allocate_token_bitmask(1, tok.vocab_size)
    times = []
    for token in [*path, min(tok.stop_ids)]:
        start = time.perf_counter()
        fill_next_token_bitmask(matcher, mask)
        times.append(time.perf_counter() - start)
        allowed = bits(mask[0], tok.vocab_size)
        assert allowed[token], f"llguidance refused {tok.id_to_piece(token)!r}"
        assert allowed[min(tok.stop_ids)] == (token in tok.stop_ids)
        matcher.consume_token(token)
    return times


def run_xgrammar(tok, schema, path) -> list[float]:
    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_object=tok.backend)
    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=tok.vocab_size,
                                              stop_token_ids=sorted(tok.stop_ids))
    compiled = xgr.GrammarCompiler(info).compile_json_schema(json.dumps(schema))
    matcher = xgr.GrammarMatcher(compiled)
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
    return times


def main() -> None:
    tok = load_tokenizer(fetch(QWEN_05B))
    for name, run in (("llguidance", run_llguidance), ("xgrammar", run_xgrammar)):
        for schema, example in CASES:
            path = tok.encode(json.dumps(example, ensure_ascii=False))
            run(tok, schema, path)  # warm: the first mask builds lazy tables
            times = run(tok, schema, path)
            print(f"{name:10} schema {len(json.dumps(schema)):4} chars, {len(path):3} tokens: "
                  f"median {statistics.median(times) * 1e6:7.0f} us, "
                  f"max {max(times) * 1e6:7.0f} us per mask")


if __name__ == "__main__":
    main()
