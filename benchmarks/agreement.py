"""Fast mode (int8 activations) vs llama.cpp: teacher-forced top-1 agreement with the
exact greedy path, which equals HF transformers' (tests/test_engine_vs_hf.py checks that).

    .venv/bin/python -m benchmarks.agreement 0.5b 1.5b     # needs llama-cpp-python
"""

import sys

import numpy as np
from llama_cpp import Llama

from engine.gguf import open_model
from engine.runtime.decoder import DecoderSession
from tests.fixtures.demo_models import DEMO_MODELS, fetch
from tests.hf_oracle import CONTINUATION, chat_ids, step_through

for key in sys.argv[1:]:
    path = fetch(DEMO_MODELS[key])
    ids = chat_ids(path)
    model = open_model(path)
    exact = DecoderSession(model, exact=True, max_cache_len=1024)
    paths = {name: step_through(exact, p, CONTINUATION)[0] for name, p in ids.items()}
    del exact
    fast = DecoderSession(model, max_cache_len=1024)
    llm = Llama(model_path=str(path), n_threads=2, n_ctx=1024, logits_all=True, verbose=False)
    total = ours = theirs = 0
    for name, prompt in ids.items():
        tokens = paths[name]
        fast_tokens, _ = step_through(fast, prompt, CONTINUATION, forced=tokens)
        llm.reset()
        llm.eval(prompt + tokens[:-1])
        scores = np.asarray(llm.scores[len(prompt) - 1: len(prompt) - 1 + CONTINUATION])
        llama_tokens = scores.argmax(-1).tolist()
        a = sum(x == y for x, y in zip(fast_tokens, tokens, strict=True))
        b = sum(x == y for x, y in zip(llama_tokens, tokens, strict=True))
        print(f"{key} {name}: lantern fast {a}/{len(tokens)}, llama.cpp {b}/{len(tokens)}",
              flush=True)
        total, ours, theirs = total + len(tokens), ours + a, theirs + b
    print(f"{key} total: lantern fast {ours}/{total} = {ours / total:.1%}, "
          f"llama.cpp {theirs}/{total} = {theirs / total:.1%}", flush=True)
