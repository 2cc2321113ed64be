"""Qwen3-MoE against HF transformers: a random-weight Qwen3MoeForCausalLM (3 layers, 8
experts of which each token takes 2, renormalised), saved with a SentencePiece BPE tokenizer
trained here and converted by llama.cpp's own convert_hf_to_gguf.py (f32), then quantized by
llama.cpp to Q4_K_M so that the experts' K-quant bytes go through lantern.GgufMoE.

The numpy reference equals HF; the engine in exact mode gives HF's logits within the demo
models' tolerance and HF's greedy tokens; the inspection shows HF's router choices; on the
quantized file the engine keeps to the reference (exact and fast) and llama.cpp agrees on
the greedy tokens. Widths of 256 let llama.cpp give every expert a K-quant.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import torch
from transformers import AutoModelForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

from engine.catalog.importer import import_gguf
from engine.chat.events import TokenEvent
from engine.chat.options import Options
from engine.chat.prompt_tokens import PromptTokens
from engine.cli import main
from engine.errors import UnsupportedModel
from engine.gguf import GGUFModel, open_model
from engine.graph.decoder import DecoderOptions, build_decoder
from engine.inspect.inspection import inspect_context
from engine.native import custom_ops
from engine.reference.text import forward
from engine.reference.weights import ReferenceWeights
from engine.runtime.check import check_against_reference
from engine.runtime.decoder import DecoderSession
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from engine.store import Store
from tests.fixtures.greedy_runs import (
    GREEDY,
    engine_greedy,
    hf_greedy,
    hf_logits,
    llama_cpp_greedy,
)
from tests.fixtures.llama_converter import convert
from tests.fixtures.sentencepiece_models import train
from tests.integration.test_engine_vs_hf import EXACT_ATOL
from tests.unit.runtime.test_speculation import verify_and_steps

llama_cpp = pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.skipif(not custom_ops().available,
                                reason="experts run only on Lantern's op library")

EXPERTS, USED = 8, 2
STD = 0.1
RAW = "def fib(n): return n if n < 2"


@dataclasses.dataclass(frozen=True)
class Qwen3Moe:
    hf: Qwen3MoeForCausalLM
    model: GGUFModel       # f32, as converted
    quantized: GGUFModel   # Q4_K_M by llama.cpp
    prompt: list[int]


@cache
def qwen3moe() -> Qwen3Moe:
    session = Path(os.environ["LANTERN_CACHE_DIR"]).parent  # removed at exit (conftest)
    folder = Path(tempfile.mkdtemp(prefix="qwen3moe-", dir=session))
    tokenizer_model = train(folder / "sp", "bpe", add_dummy_prefix=True)
    sp = spm.SentencePieceProcessor(model_file=str(tokenizer_model))
    config = Qwen3MoeConfig(
        vocab_size=sp.get_piece_size(), hidden_size=256, intermediate_size=512,
        moe_intermediate_size=256, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, num_experts=EXPERTS, num_experts_per_tok=USED,
        norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], rms_norm_eps=1e-6,
        max_position_embeddings=512, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
    )
    torch.manual_seed(0)
    # eager: each expert's rows through plain linear layers (not grouped_mm), in fp32
    hf = AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                          experts_implementation="eager").eval()
    with torch.no_grad():  # spread STD, norm weights around 1: norms and routers matter
        for name, param in hf.named_parameters():
            noise = torch.randn_like(param) * STD
            param.copy_(noise + 1 if "norm" in name else noise)
    hf.save_pretrained(folder / "hf")
    (folder / "hf" / "tokenizer.model").write_bytes(tokenizer_model.read_bytes())
    path = convert(folder / "hf", folder / "qwen3moe.gguf", sentencepiece_vocab=True)
    quantized = folder / "qwen3moe-q4_k_m.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.nthread = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M, 2
    assert llama_cpp.llama_model_quantize(str(path).encode(), str(quantized).encode(),
                                          params) == 0
    prompt = sp.encode("def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)")[:20]
    return Qwen3Moe(hf, open_model(path), open_model(quantized), prompt)


@pytest.fixture(scope="module")
def qwen() -> Qwen3Moe:
    return qwen3moe()





def test_the_file_reads_as_a_mixture_of_experts(qwen):
    text = qwen.model.config.text
    assert text.architecture == "qwen3moe" and text.qk_norm and text.mixture_of_experts
    assert (text.experts, text.experts_used, text.expert_intermediate_size) == (EXPERTS, USED, 256)
    assert text.expert_weights_norm  # qwen3moe renormalises, as HF's norm_topk_prob asks
    types = {qwen.quantized.tensors[f"blk.0.ffn_{p}_exps.weight"].ggml_type.name
             for p in ("gate", "up", "down")}
    assert types <= {"Q4_K", "Q6_K"} and "Q4_K" in types


def test_reference_equals_hf(qwen):
    """In float64: at these widths either side's fp32 rounding alone moves the logits by
    ~6e-5 (HF's fp32 against its float64), which would hide a small wrong step. HF keeps its
    norms and the router's softmax in fp32 even then: they agree to ~6e-6."""
    with torch.no_grad():
        expected = qwen.hf.double()(torch.tensor([qwen.prompt])).logits[0].numpy()
    qwen.hf.float()
    assert np.abs(expected).max() > 1.0  # logits big enough to show a wrong step
    np.testing.assert_allclose(forward(qwen.model, qwen.prompt, dtype=np.float64).logits,
                               expected, atol=2e-5, rtol=0)


def test_a_router_without_renormalising_would_be_caught(qwen):
    """The flag matters: the same weights without renormalising move the logits far."""
    weights = ReferenceWeights(qwen.model)
    weights.config = dataclasses.replace(qwen.model.config.text, expert_weights_norm=False)
    logits = forward(qwen.model, qwen.prompt, weights=weights).logits
    assert np.abs(logits - hf_logits(qwen.hf, qwen.prompt)).max() > 50 * EXACT_ATOL


def test_no_router_choice_is_a_near_tie(qwen):
    """The second and third experts of every token are far enough apart that rounding
    cannot swap them (else the comparisons below would test luck)."""
    with torch.no_grad():
        out = qwen.hf(torch.tensor([qwen.prompt]), output_router_logits=True)
    for router_logits in out.router_logits:
        top = torch.topk(torch.softmax(router_logits.float(), dim=-1), USED + 1).values
        assert float((top[:, USED - 1] - top[:, USED]).min()) > 1e-4


def test_exact_engine_logits_and_greedy_tokens_are_hfs(qwen):
    session = DecoderSession(qwen.model, exact=True, max_cache_len=64, all_logits=True)
    logits = session.forward(qwen.prompt).logits
    delta = float(np.abs(logits - hf_logits(qwen.hf, qwen.prompt)).max())
    print(f"\nqwen3moe exact mode: max |delta logit| vs HF, {len(qwen.prompt)} rows: {delta:.1e}")
    assert delta < EXACT_ATOL
    assert engine_greedy(qwen.model, qwen.prompt, exact=True) == hf_greedy(qwen.hf, qwen.prompt)


def test_the_inspection_shows_hfs_router_choices(qwen):
    """Per layer, the experts the last token took and their weights, as HF's router gives
    them."""
    inspection = inspect_context(qwen.model, PromptTokens.text(qwen.prompt), str)
    with torch.no_grad():
        out = qwen.hf(torch.tensor([qwen.prompt]), output_router_logits=True)
    for layer, router_logits in enumerate(out.router_logits):
        probs = torch.softmax(router_logits[-1].float(), dim=-1)
        weights, ids = torch.topk(probs, USED)
        weights = weights / weights.sum()
        assert inspection.experts[layer].ids.tolist() == ids.tolist()
        np.testing.assert_allclose(inspection.experts[layer].weights, weights.numpy(),
                                   atol=1e-5)


def test_lantern_inspect_prints_the_router_choice(qwen, capsys):
    """`lantern inspect`: per layer, the experts the last token took and their weights, in
    the table and in --json."""
    assert main(["inspect", str(qwen.model.path), RAW, "--raw", "--json"]) == 0
    experts = json.loads(capsys.readouterr().out)["experts"]
    assert len(experts) == 3 and all(len(layer["ids"]) == USED for layer in experts)
    assert all(abs(sum(layer["weights"]) - 1) < 1e-5 for layer in experts)  # renormalised
    assert main(["inspect", str(qwen.model.path), RAW, "--raw"]) == 0
    table = capsys.readouterr().out
    first = experts[0]
    took = "  ".join(f"#{e} {w:.2f}" for e, w in zip(first["ids"], first["weights"], strict=True))
    assert "experts (weight)" in table and took in table


def test_a_raw_answer_is_the_exact_greedy_path(qwen):
    """`lantern run --raw` (and the window) through LocalSession: HF's greedy tokens."""
    model = load_model(qwen.model.path, exact=True, num_ctx=128)
    ids = model.tokenize_raw(RAW).ids.tolist()
    chat = LocalSession(model, Options(temperature=0, num_predict=GREEDY))
    answer = [e.id for e in chat.raw(RAW) if isinstance(e, TokenEvent)]
    expected = hf_greedy(qwen.hf, ids)
    stops = [i for i, token in enumerate(expected) if token in model.tokenizer.stop_ids]
    assert answer == expected[:stops[0] if stops else GREEDY]
    model.tokenizer.close()


def test_the_store_lists_it_and_lantern_run_answers_hfs_tokens(qwen, tmp_path, capsys):
    """In an Ollama store: `lantern list` names it, and `lantern run --raw --exact` streams
    HF's greedy tokens (jsonl ids)."""
    root = tmp_path / "models"
    root.mkdir()
    import_gguf(Store.open(root), qwen.model.path, "moe")
    assert main(["list", "--models-dir", str(root)]) == 0
    assert "moe:latest" in capsys.readouterr().out
    assert main(["run", "moe", RAW, "--raw", "--exact", "--temperature", "0", "--num-predict",
                 str(GREEDY), "--format", "jsonl", "--models-dir", str(root)]) == 0
    *tokens, final = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert final["done"] is True
    model = load_model(qwen.model.path, exact=True, num_ctx=128)
    expected = hf_greedy(qwen.hf, model.tokenize_raw(RAW).ids.tolist())
    model.tokenizer.close()
    assert [t["id"] for t in tokens] == expected[:len(tokens)] and tokens


def test_quantized_experts_keep_to_the_reference(qwen):
    """Q4_K / Q6_K experts through GgufMoE: exact mode passes the layer-by-layer check and a
    decode step equals the reference's last row; fast mode (8-bit activations, on a random
    model whose logits move ~5% with them) keeps nearly every row within 10% and its top
    token. Not every row: where a router's k-th and (k+1)-th experts nearly tie, 8-bit
    activations may pick the other one (as llama.cpp's int8 path may), and that row moves
    by more (this prompt's token 4, whose layer-2 router gap is the smallest)."""
    prompt = PromptTokens.text(qwen.prompt)
    report = check_against_reference(qwen.quantized, prompt, str, exact=True)
    assert report.first_off is None, [(r.label, r.max_abs_diff) for r in report.rows]
    expected = forward(qwen.quantized, qwen.prompt).logits
    session = DecoderSession(qwen.quantized, exact=True, max_cache_len=64)
    session.forward(qwen.prompt[:-1])
    step = session.forward(qwen.prompt[-1:]).logits
    np.testing.assert_allclose(step, expected[-1], atol=1e-4, rtol=0)
    fast = DecoderSession(qwen.quantized, max_cache_len=64, all_logits=True)
    logits = fast.forward(qwen.prompt).logits
    row_error, scale = np.abs(logits - expected).max(axis=-1), np.abs(expected).max()
    assert np.median(row_error) < 0.05 * scale, row_error
    assert (row_error < 0.1 * scale).mean() >= 0.9, row_error
    assert (logits.argmax(axis=-1) == expected.argmax(axis=-1)).mean() >= 0.9


def test_the_experts_are_read_in_place(qwen):
    """Every expert tensor is one view of the memory-mapped file that the GgufMoE nodes
    read (gate, up and down per layer), never a copy: the graph's own weights are the
    norms' vectors and the routers."""
    model = qwen.quantized
    built = build_decoder(model, DecoderOptions(max_cache_len=16, native=True))
    moe_nodes = [n for n in built.model.graph.node if n.op_type == "GgufMoE"]
    assert len(moe_nodes) == 3 * model.config.text.n_layers
    for i in range(model.config.text.n_layers):
        for part in ("gate", "up", "down"):
            raw = model.tensors[f"blk.{i}.ffn_{part}_exps.weight"].raw
            [view] = [v for v in built.in_place.values() if v.nbytes == raw.nbytes
                      and v.ctypes.data == raw.ctypes.data]
            assert np.shares_memory(view, raw)
    assert sum(a.nbytes for a in built.external.values()) < 0.02 * model.path.stat().st_size


def test_a_verify_step_equals_one_token_steps_in_fast_mode(qwen):
    """Speculation's contract holds with experts: GgufMoE computes each token's rows as a
    one-token step does whichever tokens share the step, so a verify step's logits are
    one-token steps' to the bit."""
    decoder = DecoderSession(qwen.quantized, max_cache_len=64, cache=False)
    assert decoder.row_invariant
    for k in (2, 5, 9):
        decoder.reset()
        batch, single = verify_and_steps(decoder, qwen.prompt[4:4 + k])
        np.testing.assert_array_equal(batch, single)


def test_without_the_op_library_the_model_says_why(qwen, monkeypatch):
    """The experts have no MatMulNBits form (a dense copy would cost the file's size
    again): with the library off, loading names the tensor and the reason."""
    monkeypatch.setenv("LANTERN_NATIVE", "off")
    with pytest.raises(UnsupportedModel, match="blk.0.ffn_gate_exps.weight runs only on "
                       "Lantern's GGUF matmul library on the CPU, and it is not in use: "
                       "turned off by LANTERN_NATIVE"):
        DecoderSession(qwen.quantized, max_cache_len=64)



@pytest.mark.parametrize("which", ["f32", "q4_k_m"])
def test_llama_cpp_agrees_on_the_greedy_tokens(qwen, which):
    """On float weights with exact mode; on K-quants with fast mode, whose 8-bit activations
    are llama.cpp's too (exact mode leaves that path within a few tokens here)."""
    model = qwen.model if which == "f32" else qwen.quantized
    ours = engine_greedy(model, qwen.prompt, exact=which == "f32")
    assert llama_cpp_greedy(model.path, qwen.prompt) == ours
