"""Phi-3 (``phi3``: q|k|v in one attn_qkv matrix, gate|up in ffn_up, as stored) against HF
transformers: a random-weight Phi3ForCausalLM with a sliding window of 8 under a longer
prompt and a SentencePiece tokenizer trained here, converted by llama.cpp's
convert_hf_to_gguf.py, in f32 and in Q8_0.

f32: reference = HF, exact-mode greedy tokens = HF's, logits within the demo models'
tolerance. Q8_0: the fused matrices split and packed for MatMulNBits pass the layer check
against the reference in fast and exact mode; splitting undoes stacking in every packing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import torch
from transformers import Phi3Config, Phi3ForCausalLM

from engine.chat.prompt_tokens import PromptTokens
from engine.gguf import GGUFModel, open_model
from engine.gguf.repack import pack, unpack
from engine.graph.fuse import split_rows, stack_rows
from engine.reference.text import forward
from engine.runtime.check import check_against_reference
from engine.runtime.decoder import DecoderSession
from engine.tokenizer import load_tokenizer
from tests.fixtures.llama_converter import convert
from tests.fixtures.sentencepiece_models import train
from tests.fixtures.synthetic_gguf import T, write_model
from tests.integration.test_engine_vs_hf import EXACT_ATOL

WINDOW = 8
GREEDY = 12


@dataclasses.dataclass
class Phi3:
    hf: Phi3ForCausalLM
    model: GGUFModel
    q8: Path
    prompt: list[int]


@pytest.fixture(scope="module")
def phi3(tmp_path_factory) -> Phi3:
    folder = tmp_path_factory.mktemp("phi3")
    tokenizer_model = train(folder / "sp", "bpe", add_dummy_prefix=True)
    config = Phi3Config(
        vocab_size=1200, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        original_max_position_embeddings=512, rope_theta=10_000.0, sliding_window=WINDOW,
        initializer_range=0.1, tie_word_embeddings=False,
        pad_token_id=0, eos_token_id=1, bos_token_id=2,
    )
    torch.manual_seed(0)
    hf = Phi3ForCausalLM(config).eval()
    hf.save_pretrained(folder / "hf")
    (folder / "hf" / "tokenizer.model").write_bytes(tokenizer_model.read_bytes())
    path = convert(folder / "hf", folder / "phi3.gguf")
    q8 = convert(folder / "hf", folder / "phi3-q8_0.gguf", outtype="q8_0")
    sp = spm.SentencePieceProcessor(model_file=str(tokenizer_model))
    prompt = [sp.bos_id()] + sp.encode("def is_prime(n: int) -> bool: return all(n % i for i")
    return Phi3(hf, open_model(path), q8, prompt)


def hf_logits(phi3: Phi3, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return phi3.hf(torch.tensor([ids])).logits[0].numpy()


def test_read_as_fused_with_every_layer_sliding(phi3):
    text = phi3.model.config.text
    assert text.architecture == "phi3" and text.fused_projections
    assert "blk.0.attn_qkv.weight" in phi3.model.tensors
    assert text.sliding_window == WINDOW and all(text.slides(i) for i in range(3))
    assert not text.local_rope and len(phi3.prompt) > 2 * WINDOW


def test_reference_equals_hf(phi3):
    expected = hf_logits(phi3, phi3.prompt)
    assert np.abs(expected).max() > 1.0
    np.testing.assert_allclose(forward(phi3.model, phi3.prompt).logits, expected,
                               atol=2e-5, rtol=0)


def test_exact_engine_logits_and_greedy_tokens_are_hfs(phi3):
    session = DecoderSession(phi3.model, exact=True, max_cache_len=64, all_logits=True)
    delta = float(np.abs(session.forward(phi3.prompt).logits
                         - hf_logits(phi3, phi3.prompt)).max())
    print(f"\nphi3 exact mode: max |delta logit| vs HF: {delta:.1e}")
    assert delta < EXACT_ATOL
    with torch.no_grad():
        hf_tokens = phi3.hf.generate(torch.tensor([phi3.prompt]), max_new_tokens=GREEDY,
                                     min_new_tokens=GREEDY, do_sample=False)[0]
    session = DecoderSession(phi3.model, exact=True, max_cache_len=64)
    last = session.forward(phi3.prompt).logits
    tokens = []
    for _ in range(GREEDY):
        tokens.append(int(last.argmax()))
        last = session.forward([tokens[-1]]).logits
    assert tokens == hf_tokens[len(phi3.prompt):].tolist()


def test_q8_0_fused_matrices_pass_the_layer_check(phi3):
    model = open_model(phi3.q8)
    assert model.tensors["blk.0.attn_qkv.weight"].ggml_type.name == "Q8_0"
    piece = load_tokenizer(phi3.q8).id_to_piece
    for exact in (True, False):
        report = check_against_reference(model, PromptTokens.text(phi3.prompt), piece,
                                         exact=exact)
        assert report.first_off is None, (exact, [(r.label, r.max_abs_diff) for r in report.rows])


@pytest.mark.parametrize("qtype", [T.Q4_K, T.Q5_0, T.Q8_0, T.F16])
def test_split_rows_undoes_stack_rows(tmp_path, qtype):
    path = write_model(tmp_path / "m.gguf", "qwen3", types={"ffn_up": qtype})
    whole = pack(open_model(path).tensors["blk.0.ffn_up.weight"])  # [128, 64]
    parts = split_rows(whole, [96, 32])
    assert [p.n for p in parts] == [96, 32]
    again = stack_rows(parts)
    for field in ("data", "scales", "zero_points", "offsets", "dense"):
        a, b = getattr(whole, field), getattr(again, field)
        assert (a is None and b is None) or np.array_equal(a, b), field
    np.testing.assert_array_equal(unpack(parts[1]), unpack(whole)[96:])
