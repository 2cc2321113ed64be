"""The cross-check's tolerance, measured: Lantern (exact fp32, and fast int8) against
llama-cpp-python's OpenAI-compatible server on the same GGUF, 20 prompts (those of
benchmarks/agreement.py), greedy answers of 48 tokens, teacher-forced. Prints per prompt
the largest and mean |Δ log-probability| of the server's tokens, then the overall
largest; engine.remote.crosscheck.TOLERANCE is set from it with a margin.

    .venv/bin/python -m benchmarks.crosscheck_tolerance 0.5b     # needs llama-cpp-python[server]
"""

import sys

import numpy as np

from benchmarks.agreement import WIDER
from engine.chat.messages import Message
from engine.remote.connection import Connection
from engine.remote.crosscheck import cross_check
from engine.remote.session import open_remote_model
from engine.runtime.loader import load_model
from tests.fixtures.demo_models import DEMO_MODELS, fetch
from tests.fixtures.llama_server import llama_server
from tests.hf_oracle import PROMPTS

TOKENS = 48


def main(key: str) -> None:
    gguf = fetch(DEMO_MODELS[key])
    texts = [p.text for p in PROMPTS] + list(WIDER)
    with llama_server(gguf, "demo") as url:
        remote = open_remote_model(Connection(url), "demo")
        for exact in (True, False):
            local = load_model(gguf, exact=exact, num_ctx=4096)
            gaps = []
            print(f"\n{key} Lantern {'exact' if exact else 'fast'} vs llama-cpp-python server")
            for n, text in enumerate(texts):
                report = cross_check(local, remote, [Message("user", text)],
                                     num_predict=TOKENS, same_weights_asserted=True)
                gaps += [r.gap for r in report.rows]
                print(f"  prompt {n:>2}: {len(report.rows):>3} tokens  max {report.max_gap:.4f}  "
                      f"mean {report.mean_gap:.4f}  prompts differ: {report.prompts_differ}")
            print(f"  all {len(gaps)} tokens: max {max(gaps):.4f}  p99 "
                  f"{np.percentile(gaps, 99):.4f}  mean {np.mean(gaps):.4f}")
            del local


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "0.5b")
