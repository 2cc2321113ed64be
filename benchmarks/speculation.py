"""Speculative decoding on the workloads users run: free chat, a code edit (the answer
rewrites code given in the prompt) and quoting a document, greedy, on the demo models.

Engines, in the same process and run, rounds alternating (a busy machine slows them
alike): Lantern with --speculate off and auto (what `lantern run` does: LocalSession with
the drafter make_drafter picks), llama.cpp plain and llama.cpp with its own prompt lookup
(llama_cpp.llama_speculative.LlamaPromptLookupDecoding, num_pred_tokens=10). Decode tok/s
is measured from the first streamed token to the last (prefill excluded) for every
engine alike. Prints medians per workload (and auto's rate in each round), acceptance
rates, whether Lantern's answer with speculation equals the answer without, and the load
average.

    .venv/bin/python -m benchmarks.speculation [--model 0.5b 1.5b] [--rounds 3]
        [--threads 2] [--tokens 160] [--no-llama-cpp] [--exact]

--exact runs Lantern in exact mode (fp32 activations) instead of the default fast mode.
Either way a verify step computes each row as a one-token step does
(engine.runtime.speculation), so "same answer" must say yes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict

CODE = '''import json


def load_items(path):
    with open(path) as f:
        data = json.load(f)
    items = []
    for entry in data["items"]:
        if entry.get("active"):
            items.append(entry)
    return items


def total_price(items):
    total = 0
    for item in items:
        total += item["price"] * item["quantity"]
    return total


def summary(path):
    items = load_items(path)
    return {"count": len(items), "total": total_price(items)}
'''

DOCUMENT = """Lighthouses were once kept by families who lived at the foot of the tower. Every
evening the keeper climbed the stairs, trimmed the wick and wound the clockwork that turned
the lens, and every morning he wrote the weather, the ships seen and the oil burned into
the logbook.

The arrival of electricity changed the work completely. An automatic lamp needed no
trimming, a timer switched it on at dusk, and a single technician could look after a dozen
lights from the mainland, visiting each one only a few times a year.

Today most towers are museums or holiday homes, but the logbooks survive. Historians read
them for records of storms and shipwrecks, and climate scientists use the daily weather
notes to reconstruct how the coast's winds changed over two centuries."""

WORKLOADS = {
    "free chat": "Explain in a few paragraphs why the sky is blue and why sunsets are red.",
    "code edit": "Rename the function total_price to order_total everywhere in this code "
                 "and add type hints. Reply with the complete code only.\n\n" + CODE,
    "quote": "Quote the second paragraph of this document word for word, then summarise "
             "the whole document in two sentences.\n\n" + DOCUMENT,
}


def lantern_engine(path, speculate: str, exact: bool):
    from engine.chat.events import DoneEvent, TokenEvent
    from engine.chat.options import Options
    from engine.runtime.loader import load_model
    from engine.runtime.session import LocalSession
    from engine.runtime.speculation import make_drafter

    model = load_model(path, num_ctx=2048, exact=exact)  # ORT: a thread per physical core

    def run(prompt: str, tokens: int):
        drafter = make_drafter(speculate, model.gguf.path,
                               row_invariant=model.decoder.row_invariant)
        chat = LocalSession(model, Options(temperature=0, num_predict=tokens), drafter=drafter)
        stamps, ids, done = [], [], None
        for event in chat.send(prompt):
            if isinstance(event, TokenEvent):
                stamps.append(time.perf_counter())
                ids.append(event.id)
            elif isinstance(event, DoneEvent):
                done = event
        model.cache.keys.clear()  # every run prefills the whole prompt, like llama.cpp's
        return stamps, ids, (done.draft_count, done.draft_accepted)

    return run


def llama_engine(path, threads: int, lookup: bool):
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    draft = LlamaPromptLookupDecoding(num_pred_tokens=10) if lookup else None
    llm = Llama(str(path), n_ctx=2048, n_threads=threads, n_threads_batch=threads,
                draft_model=draft, verbose=False)

    def run(prompt: str, tokens: int):
        llm.reset()
        stamps, ids = [], []
        for chunk in llm.create_chat_completion(
                [{"role": "user", "content": prompt}], max_tokens=tokens, temperature=0.0,
                top_k=1, repeat_penalty=1.0, stream=True):
            if chunk["choices"][0]["delta"].get("content"):
                stamps.append(time.perf_counter())
                ids.append(chunk["choices"][0]["delta"]["content"])
        return stamps, ids, None

    return run


def decode_rate(stamps: list[float]) -> float:
    """Tokens after the first, per second from the first to the last."""
    return (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="+", default=["0.5b", "1.5b"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp's threads")
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--no-llama-cpp", action="store_true")
    parser.add_argument("--exact", action="store_true", help="Lantern in exact mode")
    args = parser.parse_args()
    from tests.fixtures.demo_models import DEMO_MODELS, fetch

    for key in args.model:
        path = fetch(DEMO_MODELS[key])
        engines = {"lantern off": lantern_engine(path, "off", args.exact),
                   "lantern auto": lantern_engine(path, "auto", args.exact)}
        if not args.no_llama_cpp:
            engines["llama.cpp"] = llama_engine(path, args.threads, lookup=False)
            engines["llama.cpp lookup"] = llama_engine(path, args.threads, lookup=True)
        rates: dict[tuple[str, str], list[float]] = defaultdict(list)
        drafts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        same: dict[str, bool] = {}
        loads = []
        for _ in range(args.rounds):
            for workload, prompt in WORKLOADS.items():
                answers = {}
                for name, run in engines.items():
                    stamps, ids, counts = run(prompt, args.tokens)
                    rates[workload, name].append(decode_rate(stamps))
                    answers[name] = ids
                    if counts:
                        drafts[workload][0] += counts[0]
                        drafts[workload][1] += counts[1]
                same[workload] = same.get(workload, True) and (
                    answers["lantern off"] == answers["lantern auto"])
            loads.append(os.getloadavg()[0])
        print(f"\n{key} ({'exact' if args.exact else 'fast'} mode): decode "
              f"tok/s, median of {args.rounds} rounds, {args.tokens} tokens, "
              f"{args.threads} threads; load average {min(loads):.1f}-{max(loads):.1f}")
        names = list(engines)
        versus = {"lantern off": "off", "llama.cpp": "llama.cpp", "llama.cpp lookup": "lookup"}
        versus = {n: label for n, label in versus.items() if n in engines}
        print("| workload | " + " | ".join(names) + " | "
              + " | ".join(f"auto/{label}" for label in versus.values())
              + " | auto per round | acceptance | same answer |")
        print("|---" * (len(names) + len(versus) + 4) + "|")
        for workload in WORKLOADS:
            med = {n: statistics.median(rates[workload, n]) for n in names}
            ratios = [med["lantern auto"] / med[n] for n in versus]
            rounds = ", ".join(f"{r:.1f}" for r in rates[workload, "lantern auto"])
            drafted, kept = drafts[workload]
            accept = f"{kept}/{drafted} = {kept / drafted:.0%}" if drafted else "-"
            print(f"| {workload} | " + " | ".join(f"{med[n]:.1f}" for n in names)
                  + " | " + " | ".join(f"{r:.2f}x" for r in ratios)
                  + f" | {rounds} | {accept} | {'yes' if same[workload] else 'no'} |")


if __name__ == "__main__":
    main()
