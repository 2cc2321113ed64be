"""Gemma 3 text against HF transformers: a random-weight Gemma3ForCausalLM (7 layers, so both
layer kinds appear; a sliding window of 8 under a 24-token prompt), saved with a
SentencePiece tokenizer trained here and converted by llama.cpp's own convert_hf_to_gguf.py.

The numpy reference equals HF; the engine in exact mode gives HF's greedy tokens with logits
within the tolerance of the Qwen demo models' test. The converted vocabulary tokenizes as
sentencepiece does, and Gemma's chat templates (Ollama's Go template, the Jinja one the
converter stores) render the same prompt. A raw prompt starts with the BOS Gemma needs, as
HF's tokenizer of the same GGUF starts it, and answers with HF's greedy tokens.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gguf
import numpy as np
import pytest
import sentencepiece as spm
import torch
from gguf import GGUFValueType
from transformers import AutoTokenizer, Gemma3ForCausalLM, Gemma3TextConfig

from engine.chat.events import TokenEvent
from engine.chat.options import Options
from engine.chat.prompt_tokens import PromptTokens
from engine.gguf import GGUFModel, open_model
from engine.inspect.inspection import inspect_context
from engine.prompt import render_prompt
from engine.reference.text import forward
from engine.reference.weights import ReferenceWeights
from engine.runtime.check import check_against_reference
from engine.runtime.decoder import DecoderSession
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from engine.tokenizer import load_tokenizer
from tests.fixtures.llama_converter import convert
from tests.fixtures.sentencepiece_models import CONTROLS, corpus_lines, train
from tests.fixtures.synthetic_gguf import T, TextSpec, write_model
from tests.integration.test_engine_vs_hf import EXACT_ATOL

TEMPLATES = Path(__file__).parents[2] / "data" / "templates"
WINDOW = 8
GREEDY = 16
RAW_PROMPTS = ("def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)", "The weather today",
               "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n")


@dataclasses.dataclass
class Gemma:
    hf: Gemma3ForCausalLM
    model: GGUFModel
    sp: spm.SentencePieceProcessor
    prompt: list[int]


@pytest.fixture(scope="module")
def gemma(tmp_path_factory) -> Gemma:
    folder = tmp_path_factory.mktemp("gemma3")
    tokenizer_model = train(folder / "sp", "bpe", add_dummy_prefix=False)
    hf_dir = folder / "hf"
    config = Gemma3TextConfig(
        vocab_size=1200, hidden_size=64, intermediate_size=128, num_hidden_layers=7,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=WINDOW,
        query_pre_attn_scalar=16, max_position_embeddings=512, rope_theta=1_000_000.0,
        rope_local_base_freq=10_000.0, initializer_range=0.1,
        pad_token_id=0, eos_token_id=1, bos_token_id=2,
    )
    torch.manual_seed(0)
    hf = Gemma3ForCausalLM(config).eval()
    with torch.no_grad():  # Gemma's norms start at 0 (a scale of 1); make them matter
        for name, weight in hf.named_parameters():
            if "norm" in name:
                weight.normal_(0.0, 0.3)
    hf.save_pretrained(hf_dir)
    (hf_dir / "tokenizer.model").write_bytes(tokenizer_model.read_bytes())
    (hf_dir / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": (TEMPLATES / "gemma3.jinja").read_text(encoding="utf-8")}))
    path = convert(hf_dir, folder / "gemma3.gguf")
    sp = spm.SentencePieceProcessor(model_file=str(tokenizer_model))
    prompt = [sp.bos_id()] + sp.encode("def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)")
    return Gemma(hf, open_model(path), sp, prompt[:24])


def hf_logits(gemma: Gemma, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return gemma.hf(torch.tensor([ids])).logits[0].numpy()


def test_the_file_reads_as_llama_cpp_reads_it(gemma):
    text = gemma.model.config.text
    assert text.architecture == "gemma3" and text.tie_embeddings
    assert [text.slides(i) for i in range(7)] == [True] * 5 + [False, True]
    assert (text.sliding_window, text.rope_theta, text.rope_theta_local) == (WINDOW, 1e6, 1e4)
    assert text.embedding_scale == 8.0 and text.attention_scale == 0.25
    # the converter stores Gemma's norm weights with the +1 its RMSNorm adds
    stored = gemma.model.tensors["blk.0.attn_norm.weight"].dequantize()
    np.testing.assert_allclose(stored, gemma.hf.model.layers[0].input_layernorm.weight
                               .detach().numpy() + 1, atol=1e-6)


def test_prompt_is_longer_than_the_window(gemma):
    assert len(gemma.prompt) == 24 > 2 * WINDOW


def test_reference_equals_hf(gemma):
    ours = forward(gemma.model, gemma.prompt).logits
    expected = hf_logits(gemma, gemma.prompt)
    assert np.abs(expected).max() > 1.0  # logits big enough to show a wrong step
    np.testing.assert_allclose(ours, expected, atol=2e-5, rtol=0)


def test_every_layer_global_would_be_caught(gemma):
    """The fact the sliding layers rest on: the same weights with every layer global
    move the logits far past the tolerance."""
    all_global = dataclasses.replace(gemma.model.config.text, sliding_layers=())
    weights = ReferenceWeights(gemma.model)
    weights.config = all_global
    logits = forward(gemma.model, gemma.prompt, weights=weights).logits
    assert np.abs(logits - hf_logits(gemma, gemma.prompt)).max() > 50 * EXACT_ATOL


def test_exact_engine_logits_are_hfs(gemma):
    session = DecoderSession(gemma.model, exact=True, max_cache_len=64, all_logits=True)
    logits = session.forward(gemma.prompt).logits
    delta = float(np.abs(logits - hf_logits(gemma, gemma.prompt)).max())
    print(f"\ngemma3 exact mode: max |delta logit| vs HF, {len(gemma.prompt)} rows: {delta:.1e}")
    assert delta < EXACT_ATOL


def test_exact_greedy_tokens_are_hfs(gemma):
    """Prefill, then one token at a time through the KV cache, past the window."""
    with torch.no_grad():
        hf_tokens = gemma.hf.generate(torch.tensor([gemma.prompt]), max_new_tokens=GREEDY,
                                      min_new_tokens=GREEDY, do_sample=False)[0]
    expected = hf_tokens[len(gemma.prompt):].tolist()
    session = DecoderSession(gemma.model, exact=True, max_cache_len=64)
    logits = session.forward(gemma.prompt).logits
    tokens = []
    for _ in range(GREEDY):
        tokens.append(int(logits.argmax()))
        logits = session.forward([tokens[-1]]).logits
    assert tokens == expected


def test_fast_mode_agrees_with_the_reference_check(gemma):
    prompt = PromptTokens.text(gemma.prompt)
    piece = load_tokenizer(gemma.model.path).id_to_piece
    for exact in (True, False):
        report = check_against_reference(gemma.model, prompt, piece, exact=exact)
        assert report.first_off is None, (exact, report.rows)


def test_inside_tab_lens_and_attention(gemma):
    piece = load_tokenizer(gemma.model.path).id_to_piece
    inspection = inspect_context(gemma.model, PromptTokens.text(gemma.prompt), piece)
    last = len(gemma.prompt) - 1
    np.testing.assert_allclose(inspection.attention.sum(axis=-1), 1.0, rtol=1e-5)
    sliding = inspection.attention[0, :, : last - WINDOW + 1]  # layer 0 slides
    assert np.all(sliding == 0) and np.all(inspection.attention[5, :, 0] > 0)  # 5: global
    assert inspection.lens[-1].top[0].id == int(hf_logits(gemma, gemma.prompt)[-1].argmax())


def test_converted_vocabulary_tokenizes_as_sentencepiece(gemma):
    tokenizer = load_tokenizer(gemma.model.path)
    assert not tokenizer.info.add_space_prefix and tokenizer.add_bos
    for line in corpus_lines()[::5]:
        assert tokenizer.encode(line) == gemma.sp.encode(line), line
    end = tokenizer.token_to_id("<end_of_turn>")
    assert end is not None and end in tokenizer.stop_ids


def test_raw_prompts_are_hfs_ids_and_answer_with_hfs_greedy_tokens(gemma):
    """`lantern run --raw` and every inspection of a raw prompt: the BOS the GGUF asks for
    comes first, as HF's tokenizer (loaded from the same GGUF) puts it, so the answer is HF's
    greedy continuation; without it a Gemma answers fluent garbage."""
    hf_tokenizer = AutoTokenizer.from_pretrained(gemma.model.path.parent,
                                                 gguf_file=gemma.model.path.name)
    model = load_model(gemma.model.path, exact=True, num_ctx=128)
    bos = model.tokenizer.bos_id
    for text in RAW_PROMPTS:
        ids = model.tokenize_raw(text).ids.tolist()
        assert ids == hf_tokenizer(text)["input_ids"], text
        assert ids[0] == bos and ids[1] != bos
        with torch.no_grad():
            hf_path = gemma.hf.generate(torch.tensor([ids]), max_new_tokens=GREEDY,
                                        min_new_tokens=GREEDY, do_sample=False)[0][len(ids):]
        stops = [i for i, token in enumerate(hf_path.tolist()) if token in model.tokenizer.stop_ids]
        expected = hf_path.tolist()[:stops[0] if stops else GREEDY]
        chat = LocalSession(model, Options(temperature=0, num_predict=GREEDY))
        answer = [e.id for e in chat.raw(text) if isinstance(e, TokenEvent)]
        assert chat.last_prompt.ids.tolist() == ids
        assert answer == expected, text
    # typed by hand, the BOS is not doubled (HF and llama.cpp would add a second one)
    typed = model.tokenize_raw(model.tokenizer.id_to_piece(bos) + RAW_PROMPTS[1]).ids.tolist()
    assert typed == model.tokenize_raw(RAW_PROMPTS[1]).ids.tolist()
    model.tokenizer.close()


def test_chat_templates_render_the_same_prompt(gemma):
    """Ollama's Go template and the GGUF's Jinja template give one prompt, whose turns
    become Gemma's control tokens."""
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": "你好 <end_of_turn>"}]
    tokenizer = load_tokenizer(gemma.model.path)
    # without the file's final newline, which Go prints after the generation prompt
    template = (TEMPLATES / "gemma3-instruct.gotmpl").read_text(encoding="utf-8").rstrip("\n")
    go = render_prompt(messages, template_layer=template, system="Be brief.")
    jinja = render_prompt(messages, chat_template=gemma.model.config.chat_template,
                          system="Be brief.", special_tokens={"bos_token": "<s>"})
    assert jinja.text == "<s>" + go.text
    assert go.text.startswith("<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n")
    assert go.text.endswith("<start_of_turn>model\n")
    ids = tokenizer.encode_prompt(go.segments)
    start, end = (tokenizer.token_to_id(c) for c in CONTROLS)
    assert ids[0] == tokenizer.bos_id and ids.count(start) == 4 and ids.count(end) == 3


def test_quantized_gemma3_fast_and_exact_match_the_reference(tmp_path):
    """K-quant and Q8_0 weights through MatMulNBits (fast mode's int8 activations too), 7
    layers, a window of 4 under 12 tokens: the layer-by-layer check passes in both modes,
    and a decode step past the window keeps to the reference."""
    path = write_model(tmp_path / "q.gguf", "gemma3", TextSpec(layers=7, tie_embeddings=True),
                       default_type=T.Q8_0, types={"ffn_down": T.Q4_K, "ffn_up": T.Q4_K})
    model = open_model(path)
    ids = list(range(3, 15))
    prompt = PromptTokens.text(ids)
    piece = load_tokenizer(path).id_to_piece
    for exact in (True, False):
        report = check_against_reference(model, prompt, piece, exact=exact)
        assert report.first_off is None, (exact, [(r.label, r.max_abs_diff) for r in report.rows])
    session = DecoderSession(model, exact=True, max_cache_len=32)
    session.forward(ids[:-1])
    step = session.forward(ids[-1:]).logits
    np.testing.assert_allclose(step, forward(model, ids).logits[-1], atol=1e-4, rtol=0)


def test_ollamas_keys_for_the_rotary_bases_and_the_sliding_layers(tmp_path):
    """Ollama's converter names the bases rope.global/local.freq_base and may list the
    sliding layers one flag each; llama.cpp's names and its period of six are the others."""
    flags = [True, False, True, True, False, True, True]
    path = write_model(tmp_path / "ollama.gguf", "gemma3", TextSpec(layers=7, tie_embeddings=True),
                       overrides={"gemma3.rope.freq_base": None,
                                  "gemma3.rope.global.freq_base": 500_000.0,
                                  "gemma3.rope.local.freq_base": 20_000.0,
                                  "gemma3.attention.sliding_window_pattern": flags})
    text = open_model(path).config.text
    assert (text.rope_theta, text.rope_theta_local) == (500_000.0, 20_000.0)
    assert [text.slides(i) for i in range(7)] == flags
    path = write_model(tmp_path / "period.gguf", "gemma3", TextSpec(layers=7),
                       overrides={"gemma3.attention.sliding_window_pattern": 3})
    assert [open_model(path).config.text.slides(i) for i in range(7)] == [
        True, True, False, True, True, False, True]


def test_gemma3_with_its_vision_tower_inline_runs_as_text(tmp_path):
    """Ollama's gemma3 files hold the image tower too (v.*, mm.*): the text model runs, the
    tower is left alone (images are not supported yet), no vision is claimed."""
    plain = write_model(tmp_path / "text.gguf", "gemma3", TextSpec(layers=2, tie_embeddings=True))
    writer = gguf.GGUFWriter(str(tmp_path / "inline.gguf"), arch="gemma3")
    reader = gguf.GGUFReader(str(plain))
    for field in reader.fields.values():
        if not field.name.startswith("GGUF.") and field.name != "general.architecture":
            writer.add_key_value(field.name, field.contents(), field.types[0],
                                 field.types[-1] if field.types[0] == GGUFValueType.ARRAY
                                 else None)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, np.array(tensor.data))
    writer.add_tensor("v.blk.0.attn_q.weight", np.zeros((8, 8), np.float32))
    writer.add_tensor("mm.mm_input_projection.weight", np.zeros((8, 64), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    model = open_model(tmp_path / "inline.gguf")
    assert model.config.vision is None
    np.testing.assert_allclose(forward(model, [3, 4, 5]).logits,
                               forward(open_model(plain), [3, 4, 5]).logits)


def test_contributions_add_up_through_the_post_norms(gemma):
    """Why this token: the heads pass Gemma's post-attention norm at their row's own scale,
    so embedding + heads + MLPs still add up to HF's logit."""
    got = inspect_context(gemma.model, PromptTokens.text(gemma.prompt), str).contributions
    expected = hf_logits(gemma, gemma.prompt)[-1]
    assert got.token == int(expected.argmax())
    for split in (got.logit, got.margin):
        assert abs(split.bias) < 1e-4, split.bias
    assert got.logit.total == pytest.approx(float(expected[got.token]), abs=1e-4)
    assert np.abs(got.logit.attention).max() > 1e-2
