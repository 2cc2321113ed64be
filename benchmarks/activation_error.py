"""Which matmuls' int8 activations make fast mode's logit error: an ablation.

Each variant builds the fast graph with float activations (accuracy level 0) for the
linear layers whose graph name matches a regex (suffix ``:4``: only 4-bit weights) and
int8 for all others, then teacher-forces along exact mode's greedy path of the prompts of
benchmarks/agreement.py, reporting top-1 agreement, RMS logit error against exact mode,
and a rough decode speed. ``none`` is all-int8, what fast mode builds (engine.graph.kernels);
``ffn.down:4`` is what it built until 2026-11-24. Names: blk.N.attn.qkv, blk.N.attn.output,
blk.N.ffn.gate_up, blk.N.ffn.down, lm_head.

    .venv/bin/python -m benchmarks.activation_error 0.5b none 'attn.qkv' 'ffn.down' 'ffn.down:4'
"""

import re
import sys
import time

import numpy as np

import engine.graph.decoder as decoder
from benchmarks.agreement import exact_paths
from engine.runtime.decoder import DecoderSession
from tests.hf_oracle import step_through

TOKENS = 40
linear = decoder.linear


def float_where(variant: str):
    """engine.graph.linear.linear with the accuracy level chosen by name and bits."""
    four_bit_only = variant.endswith(":4")
    pattern = None if variant == "none" else re.compile(variant.removesuffix(":4"))

    def chosen(g, x, weight, name, *, accuracy_level, **kwargs):
        wanted = (pattern is not None and pattern.search(name) is not None
                  and (not four_bit_only or weight.bits == 4))
        level = decoder.EXACT_ACCURACY if wanted else decoder.FAST_ACCURACY
        return linear(g, x, weight, name, accuracy_level=level, **kwargs)
    return chosen


def main(key: str, variants: list[str]) -> None:
    model, prompts, reference = exact_paths(key, TOKENS)
    cache_len = max(map(len, prompts)) + TOKENS
    for variant in variants:
        decoder.linear = float_where(variant)
        session = DecoderSession(model, max_cache_len=cache_len, cache=False)
        decoder.linear = linear
        agree, errors = 0, []
        for prompt, (path, exact_logits) in zip(prompts, reference, strict=True):
            logits = step_through(session, prompt, TOKENS, forced=path)[1]
            agree += int((logits.argmax(-1) == path).sum())
            errors.append(np.sqrt(((logits - exact_logits) ** 2).mean(-1)))
        session.reset()
        session.forward(input_ids=prompts[0])
        started = time.perf_counter()
        for i in range(32):
            session.forward(input_ids=[100 + i])
        speed = 32 / (time.perf_counter() - started)
        total = TOKENS * len(prompts)
        print(f"{key} float activations for {variant!r}: top-1 {agree}/{total} = "
              f"{agree / total:.1%}, RMS logit error vs exact "
              f"{float(np.concatenate(errors).mean()):.4f}, decode ~{speed:.1f} tok/s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
