"""Check the engine against the plain numpy reference on one context, layer by layer.

Both run the same tokens at the same positions; we compare the last token's residual
stream after the embeddings and after every block, and the top-5 next tokens. The first
layer beyond tolerance is named: that is where a wrong rotary, head mapping or scale
shows itself. Tolerances depend on the engine's mode: exact (fp32 activations) must
match closely; fast mode (int8 activations in MatMulNBits) is allowed ~percent drift.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from engine.chat.prompt_tokens import PromptTokens
from engine.gguf import GGUFModel
from engine.modelmath.stats import hidden_stats
from engine.reference import compare_layers, forward, layer_label
from engine.runtime.cancel import Cancelled
from engine.runtime.decoder import DecoderSession

# (rtol, atol) relative to each layer's largest |value|
EXACT_TOLERANCE = (2e-3, 1e-4)
FAST_TOLERANCE = (3e-2, 1e-2)


@dataclass(frozen=True)
class LayerCheck:
    label: str
    stats: tuple[float, float, float, float]      # engine: mean, std, min, max
    reference_stats: tuple[float, float, float, float]
    max_abs_diff: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.tolerance


@dataclass(frozen=True)
class TopCandidate:
    id: int
    piece: str
    logit: float


@dataclass(frozen=True)
class CheckReport:
    rows: tuple[LayerCheck, ...]
    engine_top: tuple[TopCandidate, ...]
    reference_top: tuple[TopCandidate, ...]
    max_logit_diff: float
    exact: bool
    n_tokens: int
    requantized: str | None = None  # the decoder's re-quantization spec: it cannot match

    @property
    def first_off(self) -> int | None:
        return next((i for i, row in enumerate(self.rows) if not row.ok), None)

    @property
    def ok(self) -> bool:
        same_top1 = self.engine_top[0].id == self.reference_top[0].id
        return self.first_off is None and same_top1

    @property
    def verdict(self) -> str:
        mode = "exact" if self.exact else "fast"
        if self.ok:
            return (f"Engine matches the numpy reference ({mode} mode, {self.n_tokens} tokens): "
                    f"every layer within tolerance, same next token, "
                    f"max |Δlogit| {self.max_logit_diff:.3g}.")
        if self.first_off is not None:
            row = self.rows[self.first_off]
            found = (f"Engine and reference disagree ({mode} mode): {row.label} is the first "
                     f"layer off, max |Δ| {row.max_abs_diff:.4g} > tolerance {row.tolerance:.4g}.")
        else:
            found = (f"Engine and reference pick different next tokens ({mode} mode): "
                     f"{self.engine_top[0].piece!r} vs {self.reference_top[0].piece!r}.")
        if self.requantized:
            found += (f" Expected: the weights are re-quantized to {self.requantized}, NOT the "
                      "GGUF's own, which the reference runs; turn re-quantization off to "
                      "check the engine itself.")
        return found


def check_against_reference(
    model: GGUFModel,
    prompt: PromptTokens,
    piece,
    *,
    exact: bool,
    decoder: DecoderSession | None = None,
    cancel: threading.Event | None = None,
    steering: np.ndarray | None = None,
) -> CheckReport:
    """Run `prompt` through a debug decoder and the numpy reference and compare them.

    `piece` turns a token id into display text. A decoder with layer statistics may be
    passed in (its cache is reset); otherwise a temporary one is built, with the passed
    decoder's weights (re-quantized ones included). ``cancel`` stops it within a layer
    (raises engine.runtime.cancel.Cancelled). ``steering`` [n_layers, H]: both run with
    these control vectors added (engine.gguf.control_vector).
    """
    if decoder is None or not decoder.layer_stats:  # same weights, with the debug outputs
        requantize = None if decoder is None else decoder.requantization
        decoder = DecoderSession(model, exact=exact, max_cache_len=len(prompt) + 1,
                                 layer_stats=True, requantize=requantize)
    decoder.reset()  # with its keys: the next turn prefills its prompt anew
    decoder.steer(steering)
    embeds = None
    if prompt.image_rows is not None and len(prompt.image_rows):
        embeds = decoder.embed(prompt.ids)
        embeds[prompt.image_rows] = prompt.image_embeds
        step = decoder.forward(inputs_embeds=embeds, positions=prompt.positions,
                               cancel=cancel, image_groups=prompt.image_groups(),
                               deepstack=prompt.deepstack())
    else:
        step = decoder.forward(input_ids=prompt.ids, positions=prompt.positions, cancel=cancel)
    decoder.reset()

    def check_cancel(_: int) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled("the reference check was cancelled")

    reference = forward(model, input_ids=None if embeds is not None else prompt.ids,
                        inputs_embeds=embeds, positions=prompt.positions,
                        on_layer=check_cancel, image_groups=prompt.image_groups(),
                        deepstack=prompt.deepstack(), steering=steering)
    expected = [h[-1:] for h in reference.hidden_states]       # [1, H] per layer
    actual = [row[None, :] for row in step.hidden]             # [1, H] per layer
    rtol, atol = EXACT_TOLERANCE if exact else FAST_TOLERANCE
    comparison = compare_layers(expected, actual, rtol=rtol, atol=atol)
    rows = tuple(
        LayerCheck(
            label=layer_label(i),
            stats=tuple(float(v) for v in hidden_stats(actual[i][0])),
            reference_stats=tuple(float(v) for v in hidden_stats(expected[i][0])),
            max_abs_diff=comparison.max_abs[i],
            tolerance=comparison.tolerance[i],
        )
        for i in range(len(expected))
    )
    ref_logits = reference.logits[-1]
    return CheckReport(
        rows=rows,
        engine_top=_top(step.logits, piece),
        reference_top=_top(ref_logits, piece),
        max_logit_diff=float(np.abs(step.logits - ref_logits).max()),
        exact=exact,
        n_tokens=len(prompt),
        requantized=None if decoder.requantization is None else decoder.requantization.spec,
    )


def _top(logits: np.ndarray, piece, k: int = 5) -> tuple[TopCandidate, ...]:
    best = np.argsort(-logits, kind="stable")[:k]
    return tuple(TopCandidate(int(i), piece(int(i)), float(logits[i])) for i in best)
