"""gpt-oss end to end against HF transformers' GptOss (fp32, eager): the tiny random model of
tests/fixtures/gpt_oss.py (routers, expert biases and gates spread so that the top-k
softmax, the biases and the SwiGLU's clamp all matter), converted by llama.cpp's converter.

The numpy reference and the engine's exact mode give HF's logits on a prompt past the
sliding window and past YaRN's original context, and HF's greedy tokens; llama.cpp's
MXFP4_MOE file runs its MXFP4 experts through lantern.GgufMoE (exact mode equal to the
reference on gguf's de-quantized weights) and llama.cpp agrees on its greedy tokens; the
inspection shows HF's router choices; Ollama's own layout of the same file runs alike. A
chat turn with the official template through LocalSession, on weights written to answer in
harmony, splits thinking from the answer.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf.constants import GGMLQuantizationType as GGMLType

from engine.chat.events import TokenEvent
from engine.chat.options import Options
from engine.chat.prompt_tokens import PromptTokens
from engine.gguf import GGUFModel, open_model
from engine.graph.decoder import DecoderOptions, build_decoder
from engine.inspect.inspection import inspect_context
from engine.native import custom_ops
from engine.reference.text import forward, greedy
from engine.reference.weights import ReferenceWeights
from engine.runtime.check import check_against_reference
from engine.runtime.decoder import DecoderSession
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from tests.fixtures.gpt_oss import convert_gpt_oss, ollama_layout, quantize_mxfp4_moe, scripted
from tests.fixtures.greedy_runs import (
    GREEDY,
    engine_greedy,
    hf_greedy,
    hf_logits,
    llama_cpp_greedy,
)
from tests.integration.test_engine_vs_hf import EXACT_ATOL
from tests.unit.runtime.test_speculation import verify_and_steps

pytest.importorskip("llama_cpp")  # quantizes the MXFP4_MOE file
pytestmark = pytest.mark.skipif(not custom_ops().available,
                                reason="experts run only on Lantern's op library")

LENGTH = 24  # past the window (4) and YaRN's original context (16)


@dataclasses.dataclass(frozen=True)
class GptOss:
    hf: torch.nn.Module
    model: GGUFModel      # f32, as converted
    mxfp4: GGUFModel      # llama.cpp's MXFP4_MOE
    prompt: list[int]


@cache
def gpt_oss() -> GptOss:
    session = Path(os.environ["LANTERN_CACHE_DIR"]).parent  # removed at exit (conftest)
    folder = Path(tempfile.mkdtemp(prefix="gpt-oss-", dir=session))
    hf, path = convert_gpt_oss(folder)
    mxfp4 = quantize_mxfp4_moe(path, folder / "gpt-oss-mxfp4.gguf")
    prompt = np.random.default_rng(1).integers(10, hf.config.vocab_size, LENGTH).tolist()
    return GptOss(hf, open_model(path), open_model(mxfp4), prompt)


@pytest.fixture(scope="module")
def oss() -> GptOss:
    return gpt_oss()





def test_reference_equals_hf(oss):
    expected = hf_logits(oss.hf, oss.prompt)
    assert np.abs(expected).max() > 1.0  # logits big enough to show a wrong step
    np.testing.assert_allclose(forward(oss.model, oss.prompt).logits, expected,
                               atol=5e-5, rtol=0)


@pytest.mark.parametrize("change", [
    dict(expert_gating="softmax"),  # softmax over all experts, then the top k
    dict(expert_glu=None),          # SiLU(gate) * up
    dict(expert_glu_limit=1e9),     # the clamp left out
    dict(expert_biases=False),      # the router's and experts' biases left out
])
def test_each_of_gpt_oss_moe_choices_matters(oss, change):
    """The same weights with one of the MoE's choices undone move the logits far."""
    cfg = oss.model.config.text
    if "expert_glu_limit" in change:
        change = dict(expert_glu=dataclasses.replace(cfg.expert_glu,
                                                     limit=change["expert_glu_limit"]))
    weights = ReferenceWeights(oss.model)
    weights.config = dataclasses.replace(cfg, **change)
    logits = forward(oss.model, oss.prompt, weights=weights).logits
    assert np.abs(logits - hf_logits(oss.hf, oss.prompt)).max() > 50 * EXACT_ATOL


def test_the_reference_greedy_tokens_are_hfs(oss):
    assert greedy(oss.model, oss.prompt, GREEDY) == hf_greedy(oss.hf, oss.prompt)


def test_exact_engine_logits_and_greedy_tokens_are_hfs(oss):
    session = DecoderSession(oss.model, exact=True, max_cache_len=64, all_logits=True)
    logits = session.forward(oss.prompt).logits
    delta = float(np.abs(logits - hf_logits(oss.hf, oss.prompt)).max())
    print(f"\ngpt-oss exact mode: max |delta logit| vs HF, {LENGTH} rows: {delta:.1e}")
    assert delta < EXACT_ATOL
    assert engine_greedy(oss.model, oss.prompt, exact=True) == hf_greedy(oss.hf, oss.prompt)


def test_the_mxfp4_experts_run_on_the_op(oss):
    """llama.cpp's MXFP4_MOE: the experts are MXFP4 (type 39) read in place by GgufMoE;
    exact mode equals the reference, whose weights are gguf.quants.dequantize's."""
    model = oss.mxfp4
    for part in ("gate", "up", "down"):
        assert model.tensors[f"blk.0.ffn_{part}_exps.weight"].ggml_type == GGMLType.MXFP4
    built = build_decoder(model, DecoderOptions(max_cache_len=16, native=True))
    types = {a.i for n in built.model.graph.node if n.op_type == "GgufMoE"
             for a in n.attribute if a.name == "type"}
    assert types == {int(GGMLType.MXFP4)}
    expected = forward(model, oss.prompt).logits
    session = DecoderSession(model, exact=True, max_cache_len=64, all_logits=True)
    np.testing.assert_allclose(session.forward(oss.prompt).logits, expected, atol=1e-4, rtol=0)
    assert np.abs(expected - hf_logits(oss.hf, oss.prompt)).max() > 1e-3  # it is quantized
    report = check_against_reference(model, PromptTokens.text(oss.prompt), str, exact=True)
    assert report.first_off is None, [(r.label, r.max_abs_diff) for r in report.rows]


def test_a_verify_step_equals_one_token_steps_in_fast_mode(oss):
    """Speculation's contract holds with gpt-oss's experts (MXFP4, fast mode)."""
    decoder = DecoderSession(oss.mxfp4, max_cache_len=64, cache=False)
    assert decoder.row_invariant
    for k in (2, 5, 9):
        decoder.reset()
        batch, single = verify_and_steps(decoder, oss.prompt[4:4 + k])
        np.testing.assert_array_equal(batch, single)


@pytest.mark.parametrize("which", ["f32", "mxfp4"])
def test_llama_cpp_agrees_on_the_greedy_tokens(oss, which):
    """On float weights with exact mode; on the MXFP4_MOE file with fast mode, whose 8-bit
    activations are llama.cpp's too."""
    model = oss.model if which == "f32" else oss.mxfp4
    ours = engine_greedy(model, oss.prompt, exact=which == "f32")
    assert llama_cpp_greedy(model.path, oss.prompt) == ours


def test_a_harmony_chat_turn_splits_thinking_and_answer(tmp_path):
    """A chat turn through LocalSession on a gpt-oss file whose weights write a harmony
    reply (tests/fixtures/gpt_oss.py, ``scripted``), prompted by the official template the
    file carries: the analysis channel streams as thinking, the final one as the answer, the
    turn stops at <|return|>, and HF's greedy reply is the same text."""
    hf, path = convert_gpt_oss(tmp_path, weights=scripted("Think", "Hello"),
                               max_position_embeddings=512)
    model = load_model(path, exact=True, num_ctx=512)
    assert "<|channel|>" in model.gguf.config.chat_template
    chat = LocalSession(model, Options(temperature=0, num_predict=40))
    events = list(chat.send("Hi there"))
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert "".join(e.thinking_text for e in tokens) == "Think"
    assert "".join(e.text for e in tokens) == "Hello"
    assert chat.messages[-1].thinking == "Think" and chat.messages[-1].content == "Hello"
    assert events[-1].done_reason == "stop"
    prompt = [int(i) for i in chat.last_prompt.ids]
    ids = [e.id for e in tokens]  # the stop token is not streamed
    assert model.tokenizer.decode(ids) == ("<|channel|>analysis<|message|>Think<|end|>"
                                           "<|start|>assistant<|channel|>final<|message|>Hello")
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt]), max_new_tokens=len(ids) + 1, do_sample=False)
    assert out[0, len(prompt):].tolist() == [*ids, model.tokenizer.token_to_id("<|return|>")]
    model.tokenizer.close()


@pytest.mark.parametrize("which", ["f32", "mxfp4"])
def test_ollamas_own_layout_runs_as_llama_cpps(oss, which, tmp_path):
    """The same file rewritten in Ollama's "gptoss" layout (its names, no scaling type, gate
    and up rows alternating in one tensor) reads as the same model: the reference's logits
    are the llama.cpp layout's to the bit, and so are exact mode's (through one GgufMoE
    over the fused tensor); on float weights the greedy tokens are HF's."""
    from gguf import GGUFReader

    model = oss.model if which == "f32" else oss.mxfp4
    path = ollama_layout(model.path, tmp_path / "gptoss.gguf")
    names = {t.name for t in GGUFReader(path).tensors}
    assert {"blk.0.attn_out.weight", "blk.0.attn_sinks", "blk.0.ffn_norm.weight",
            "blk.0.ffn_gate_up_exps.weight", "blk.0.ffn_gate_up_exps.bias"} <= names
    assert "blk.0.ffn_gate_exps.weight" not in names
    ollama = open_model(path)
    assert ollama.config.architecture == "gptoss"
    text = ollama.config.text
    assert text.fused_gate_up_experts and text.rope_yarn == model.config.text.rope_yarn
    assert dataclasses.replace(text, architecture="gpt-oss",
                               fused_gate_up_experts=False) == model.config.text
    np.testing.assert_array_equal(forward(ollama, oss.prompt).logits,
                                  forward(model, oss.prompt).logits)
    logits = {}
    for m in (model, ollama):
        session = DecoderSession(m, exact=True, max_cache_len=64, all_logits=True)
        logits[m.config.architecture] = session.forward(oss.prompt).logits
    np.testing.assert_array_equal(logits["gptoss"], logits["gpt-oss"])
    if which == "f32":
        assert engine_greedy(ollama, oss.prompt, exact=True) == hf_greedy(oss.hf, oss.prompt)


def test_the_inspection_shows_hfs_router_choices(oss):
    """Per layer, the experts the last token took and their weights: HF's top k of the
    router's logits (bias included) and the softmax over those k."""
    inspection = inspect_context(oss.model, PromptTokens.text(oss.prompt), str)
    with torch.no_grad():
        out = oss.hf(torch.tensor([oss.prompt]), output_router_logits=True)
    assert len(out.router_logits) == len(inspection.experts) == oss.model.config.text.n_layers
    for layer, router_logits in enumerate(out.router_logits):
        top, ids = torch.topk(router_logits[-1].float(), oss.hf.config.num_experts_per_tok)
        assert inspection.experts[layer].ids.tolist() == ids.tolist()
        np.testing.assert_allclose(inspection.experts[layer].weights,
                                   torch.softmax(top, dim=-1).numpy(), atol=1e-5)
