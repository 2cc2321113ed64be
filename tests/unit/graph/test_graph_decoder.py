"""The decoder graph itself: weights kept out of the protobuf, fused projections, the fp16
(CUDA) variant running on CPU kernels, provider fallback."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnxruntime as ort
import pytest

from engine.gguf import open_model
from engine.gguf.requantize import Requantization
from engine.graph import decoder as graph
from engine.graph.builder import create_session
from engine.graph.kernels import Kernels
from engine.reference import forward
from engine.runtime.decoder import DecoderSession, available_provider
from tests.fixtures.synthetic_gguf import T, TextSpec, write_model

SPEC = TextSpec(hidden=256, heads=4, kv_heads=2, ffn=256, layers=2)
PROMPT = [5, 71, 300, 12, 99]


def op_counts(built: graph.DecoderGraph) -> Counter:
    return Counter(node.op_type for node in built.model.graph.node)


def test_weights_stay_out_of_the_protobuf(tmp_path):
    model = open_model(write_model(tmp_path / "m.gguf", "qwen2", SPEC, default_type=T.Q8_0))
    built = graph.build_decoder(model, graph.DecoderOptions(max_cache_len=16))
    weight_bytes = sum(a.nbytes for a in built.external.values())
    assert weight_bytes > 500_000
    assert built.model.ByteSize() < weight_bytes / 20


def test_projections_fuse_only_when_layouts_match(tmp_path):
    same = open_model(write_model(tmp_path / "same.gguf", "qwen2", SPEC, default_type=T.Q5_0,
                                  types={"attn_v": T.Q8_0}))  # both 8-bit bs32: fuse
    counts = op_counts(graph.build_decoder(same, graph.DecoderOptions(max_cache_len=16)))
    assert counts["MatMulNBits"] == 2 * 4 + 1  # per block qkv, output, gate_up, down; lm_head
    mixed = open_model(write_model(tmp_path / "mixed.gguf", "qwen2", SPEC, default_type=T.Q5_0,
                                   types={"attn_v": T.Q4_0, "ffn_up": T.Q4_0}))
    counts_mixed = op_counts(graph.build_decoder(mixed, graph.DecoderOptions(max_cache_len=16)))
    assert counts_mixed["MatMulNBits"] == 2 * 7 + 1  # q, k, v, output, gate, up, down; lm_head


def accuracy_levels(built: graph.DecoderGraph) -> dict[str, int]:
    """MatMulNBits name -> accuracy level."""
    return {node.name.removesuffix("/MatMulNBits"): attr.i
            for node in built.model.graph.node if node.op_type == "MatMulNBits"
            for attr in node.attribute if attr.name == "accuracy_level"}


def test_fast_mode_feeds_int8_activations_to_every_matmul(tmp_path):
    """engine.graph.kernels, 1.: int8 activations into every MatMulNBits, 4-bit ffn_down
    included, so no matmul needs a row-by-row pass (no Scan); exact mode is float."""
    for down_type in (T.Q4_K, T.Q6_K):
        model = open_model(write_model(tmp_path / f"{down_type.name}.gguf", "qwen2", SPEC,
                                       default_type=T.Q5_0, types={"ffn_down": down_type}))
        built = graph.build_decoder(model, graph.DecoderOptions(max_cache_len=16))
        levels = accuracy_levels(built)
        assert len(levels) == 9 and set(levels.values()) == {graph.FAST_ACCURACY}
        assert "Scan" not in op_counts(built)
    requantized = graph.DecoderOptions(max_cache_len=16, requantize=Requantization.parse("q4"))
    assert set(accuracy_levels(graph.build_decoder(model, requantized)).values()) == {
        graph.FAST_ACCURACY}
    q4 = open_model(write_model(tmp_path / "q4.gguf", "qwen2", SPEC, default_type=T.Q4_0))
    exact = graph.build_decoder(q4, graph.DecoderOptions(exact=True, max_cache_len=16))
    assert set(accuracy_levels(exact).values()) == {graph.EXACT_ACCURACY}


@pytest.mark.parametrize("qtype", [T.Q4_K, T.Q4_1], ids=lambda t: t.name)
def test_zero_points_fold_into_the_offsets_in_fast_mode_only(tmp_path, qtype):
    """engine.graph.kernels, 2.: zero point 0 leaves the graph (8 * scale moves into the
    offsets) in fast mode; exact mode keeps it. Not the same bits with int8 activations:
    the 8 * scale share is now multiplied by the float activations' block sums, not the
    int8 ones, so the folded graph is the closer to exact mode."""
    model = open_model(write_model(tmp_path / "m.gguf", "qwen2", SPEC, default_type=qtype))

    def zero_point_inputs(options: graph.DecoderOptions) -> int:
        built = graph.build_decoder(model, options)
        return sum(1 for name in built.external if name.endswith(".zero_points"))

    explicit = Kernels(fold_zero_points=False)
    assert zero_point_inputs(graph.DecoderOptions(max_cache_len=16)) == 0
    kept = graph.DecoderOptions(max_cache_len=16, kernels=explicit)
    assert zero_point_inputs(kept) == zero_point_inputs(
        graph.DecoderOptions(exact=True, max_cache_len=16)) == 2 * 4 + 1

    def logits(**options) -> np.ndarray:
        decoder = DecoderSession(model, max_cache_len=16, cache=False, **options)
        return decoder.forward(input_ids=PROMPT).logits

    exact = logits(exact=True)
    errors = [np.sqrt(np.mean((logits(kernels=k) - exact) ** 2)) for k in (Kernels(), explicit)]
    assert errors[0] <= errors[1] < 0.05 * np.abs(exact).max()


@pytest.mark.parametrize("arch", ["qwen2", "gemma2"])
def test_float16_variant_runs_on_cpu_kernels(tmp_path, arch):
    """The CUDA variant's graph (fp16 activations, cache and GQA) checked on CPU; Gemma 2's
    soft-capped scores and its window (4 keys, under 5 tokens) in fp16 too, its logits left
    uncapped so the bound means what it does for Qwen2."""
    overrides = {"gemma2.final_logit_softcapping": 0.0} if arch == "gemma2" else None
    model = open_model(write_model(tmp_path / "m.gguf", arch, SPEC, default_type=T.Q4_0,
                                   overrides=overrides))
    cfg = model.config.text
    built = graph.build_decoder(model, graph.DecoderOptions(float16=True, max_cache_len=16))
    session = create_session(built.model, built.external)
    s, half = len(PROMPT), cfg.head_dim // 2
    angles = np.arange(s)[:, None] * cfg.rope_theta ** (-np.arange(half) / half)
    feeds = {
        graph.INPUTS_EMBEDS: DecoderSession(model, max_cache_len=16).embed(PROMPT)[None]
        .astype(np.float16),
        graph.SEQLENS_K: np.array([s - 1], np.int32),
        graph.TOTAL_LEN: np.array(s, np.int32),
        graph.NUM_LOGITS: np.array([1], np.int64),
        graph.STEERING: np.zeros((cfg.n_layers, cfg.hidden_size), np.float16),
        graph.COS: np.cos(angles).astype(np.float16),
        graph.SIN: np.sin(angles).astype(np.float16),
    }
    for c in built.caches:
        feeds[c.past_key] = feeds[c.past_value] = np.zeros(built.cache_shape, np.float16)
    [logits] = session.run([graph.LOGITS], feeds)
    expected = forward(model, PROMPT).logits[-1]
    assert logits.dtype == np.float32 and logits.shape == (1, 1, cfg.vocab_size)
    assert np.abs(logits[0, 0] - expected).max() < 0.02 * np.abs(expected).max()
    assert logits[0, 0].argmax() == expected.argmax()


def test_missing_provider_falls_back_to_cpu(tmp_path):
    model = open_model(write_model(tmp_path / "m.gguf", "qwen2"))
    have = set(ort.get_available_providers())
    for name, ep in (("cuda", "CUDAExecutionProvider"), ("coreml", "CoreMLExecutionProvider")):
        if ep not in have:
            assert DecoderSession(model, provider=name, max_cache_len=8).provider == "cpu"
    assert available_provider("auto") in ("cpu", "cuda", "coreml")
    with pytest.raises(ValueError, match="unknown provider"):
        available_provider("tpu")
