"""Gemma 2 against HF transformers: a random-weight Gemma2ForCausalLM (fp32, eager attention;
6 layers, so sliding and global layers take turns; a sliding window of 8 under a 24-token
prompt; soft caps small enough to bite), saved with a SentencePiece tokenizer trained here
and converted by llama.cpp's own convert_hf_to_gguf.py.

The numpy reference equals HF; the engine in exact mode gives HF's greedy tokens with logits
within the tolerance of the Qwen demo models' test; the reference check passes; the Inside
tab's attention rows are HF's; llama.cpp on the same file picks the same greedy tokens.
Dropping the score cap, the window or the logit cap moves the logits far past the
tolerance, so the checks see each. A Q8_0 file from the same converter runs on the native
op path. Gemma's chat templates (Ollama's gemma-instruct, which Ollama picks for this
Jinja template, and the Jinja one the converter stores) render the same prompt.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import llama_cpp
import numpy as np
import pytest
import sentencepiece as spm
import torch
from transformers import Gemma2Config, Gemma2ForCausalLM

from engine.chat.events import TokenEvent
from engine.chat.options import Options
from engine.chat.prompt_tokens import PromptTokens
from engine.cli import main
from engine.errors import TemplateError
from engine.gguf import GGUFModel, open_model
from engine.inspect.inspection import inspect_context
from engine.inspect.llama_layers import llama_layers
from engine.inspect.second_opinion import second_opinion
from engine.native import custom_ops
from engine.prompt import render_prompt
from engine.reference.text import forward, greedy
from engine.reference.weights import ReferenceWeights
from engine.runtime.check import check_against_reference
from engine.runtime.decoder import DecoderSession
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from engine.tokenizer import load_tokenizer
from tests.fixtures.llama_converter import convert
from tests.fixtures.sentencepiece_models import CONTROLS, corpus_lines, train
from tests.fixtures.synthetic_gguf import TextSpec, write_model
from tests.integration.test_engine_vs_hf import EXACT_ATOL
from tests.unit.reference.test_gemma3_vs_hf import GREEDY, TEMPLATES, Gemma, hf_logits

WINDOW = 8
LAYERS = 6
HIDDEN, HEADS, HEAD_DIM = 64, 4, 32  # head_dim is not hidden / heads: the query scale shows
ATTENTION_CAP, FINAL_CAP = 1.0, 4.0
TEXT = "def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)"


def gemma2_config(**changes: object) -> Gemma2Config:
    values = dict(
        vocab_size=1200, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=2, head_dim=HEAD_DIM,
        sliding_window=WINDOW, query_pre_attn_scalar=HEAD_DIM, max_position_embeddings=512,
        attn_logit_softcapping=ATTENTION_CAP, final_logit_softcapping=FINAL_CAP,
        initializer_range=0.1, pad_token_id=0, eos_token_id=1, bos_token_id=2,
        attn_implementation="eager",
    )
    return Gemma2Config(**(values | changes))


def converted(folder: Path, outtype: str = "f32", **changes: object,
              ) -> tuple[Gemma2ForCausalLM, GGUFModel, spm.SentencePieceProcessor]:
    """A random-weight Gemma 2 (``changes`` to its config) with its tokenizer and the Jinja
    template, through llama.cpp's converter -> (HF model, the GGUF, the SentencePiece model)."""
    tokenizer_model = train(folder / "sp", "bpe", add_dummy_prefix=False)
    hf_dir = folder / "hf"
    torch.manual_seed(0)
    hf = Gemma2ForCausalLM(gemma2_config(**changes)).eval()
    with torch.no_grad():  # Gemma's norms start at 0 (a scale of 1); make them matter
        for name, weight in hf.named_parameters():
            if "norm" in name:
                weight.normal_(0.0, 0.3)
    hf.save_pretrained(hf_dir)
    (hf_dir / "tokenizer.model").write_bytes(tokenizer_model.read_bytes())
    (hf_dir / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": (TEMPLATES / "gemma2.jinja").read_text(encoding="utf-8")}))
    path = convert(hf_dir, folder / f"gemma2-{outtype}.gguf", outtype=outtype)
    return hf, open_model(path), spm.SentencePieceProcessor(model_file=str(tokenizer_model))


@pytest.fixture(scope="module")
def gemma(tmp_path_factory) -> Gemma:
    hf, model, sp = converted(tmp_path_factory.mktemp("gemma2"))
    prompt = [sp.bos_id()] + sp.encode(TEXT)
    return Gemma(hf, model, sp, prompt[:24])


def without(model: GGUFModel, **changes: object) -> ReferenceWeights:
    """The same weights under a changed text config."""
    weights = ReferenceWeights(model)
    weights.config = dataclasses.replace(model.config.text, **changes)
    return weights


def test_the_file_reads_as_llama_cpp_reads_it(gemma):
    text = gemma.model.config.text
    assert text.architecture == "gemma2" and text.tie_embeddings and not text.qk_norm
    assert [text.slides(i) for i in range(LAYERS)] == [True, False] * (LAYERS // 2)
    assert (text.sliding_window, text.rope_theta, text.rope_theta_local) == (WINDOW, 1e4, None)
    assert (text.attn_logit_softcap, text.final_logit_softcap) == (ATTENTION_CAP, FINAL_CAP)
    assert text.embedding_scale == 8.0 and text.attention_scale == pytest.approx(HEAD_DIM ** -0.5)
    assert text.post_norms and text.activation == "gelu_tanh"
    # the converter writes no rotary base (10000) and no pattern (every other layer)
    assumed = set(gemma.model.config.assumed)
    assert {"gemma2.rope.freq_base", "gemma2.attention.sliding_window_pattern"} <= assumed
    assert not assumed & {"gemma2.attention.sliding_window", "gemma2.attn_logit_softcapping",
                          "gemma2.final_logit_softcapping"}
    # the converter stores Gemma's norm weights with the +1 its RMSNorm adds
    stored = gemma.model.tensors["blk.0.post_ffw_norm.weight"].dequantize()
    np.testing.assert_allclose(stored, gemma.hf.model.layers[0].post_feedforward_layernorm
                               .weight.detach().numpy() + 1, atol=1e-6)


def test_prompt_is_longer_than_the_window(gemma):
    assert len(gemma.prompt) == 24 > 2 * WINDOW


def test_reference_equals_hf(gemma):
    ours = forward(gemma.model, gemma.prompt).logits
    expected = hf_logits(gemma, gemma.prompt)
    assert np.abs(expected).max() > 0.5 * FINAL_CAP  # the logit cap bends them
    np.testing.assert_allclose(ours, expected, atol=2e-5, rtol=0)


@pytest.mark.parametrize("change", [{"attn_logit_softcap": None}, {"sliding_layers": ()},
                                    {"final_logit_softcap": None}],
                         ids=["no score cap", "every layer global", "no logit cap"])
def test_each_gemma2_difference_would_be_caught(gemma, change):
    """The facts the checks rest on: each of them, dropped, moves the logits far past the
    tolerance."""
    logits = forward(gemma.model, gemma.prompt, weights=without(gemma.model, **change)).logits
    assert np.abs(logits - hf_logits(gemma, gemma.prompt)).max() > 50 * EXACT_ATOL


def test_exact_engine_logits_are_hfs(gemma):
    session = DecoderSession(gemma.model, exact=True, max_cache_len=64, all_logits=True)
    logits = session.forward(gemma.prompt).logits
    delta = float(np.abs(logits - hf_logits(gemma, gemma.prompt)).max())
    print(f"\ngemma2 exact mode: max |delta logit| vs HF, {len(gemma.prompt)} rows: {delta:.1e}")
    assert delta < EXACT_ATOL


def hf_greedy(gemma: Gemma) -> list[int]:
    with torch.no_grad():
        tokens = gemma.hf.generate(torch.tensor([gemma.prompt]), max_new_tokens=GREEDY,
                                   min_new_tokens=GREEDY, do_sample=False)[0]
    return tokens[len(gemma.prompt):].tolist()


def exact_greedy(model: GGUFModel, prompt: list[int]) -> list[int]:
    """The exact-mode engine's argmax continuation: prefill, then one token at a time through
    the KV cache; the matrices read in place where the op library is built."""
    session = DecoderSession(model, exact=True, max_cache_len=64)
    assert not custom_ops().available or "Lantern's GGUF matmul" in session.matmul
    logits = session.forward(prompt).logits
    tokens = []
    for _ in range(GREEDY):
        tokens.append(int(logits.argmax()))
        logits = session.forward([tokens[-1]]).logits
    return tokens


def test_exact_greedy_tokens_are_hfs(gemma):
    """Prefill, then one token at a time through the KV cache, past the window."""
    assert exact_greedy(gemma.model, gemma.prompt) == hf_greedy(gemma)


def test_fast_and_exact_mode_pass_the_reference_check(gemma):
    prompt = PromptTokens.text(gemma.prompt)
    piece = load_tokenizer(gemma.model.path).id_to_piece
    for exact in (True, False):
        report = check_against_reference(gemma.model, prompt, piece, exact=exact)
        assert report.first_off is None, (exact, report.rows)


def test_inside_tab_attention_rows_and_lens_are_hfs(gemma):
    piece = load_tokenizer(gemma.model.path).id_to_piece
    inspection = inspect_context(gemma.model, PromptTokens.text(gemma.prompt), piece)
    with torch.no_grad():
        out = gemma.hf(torch.tensor([gemma.prompt]), output_attentions=True)
    hf_rows = np.stack([layer[0, :, -1, :].numpy() for layer in out.attentions])
    np.testing.assert_allclose(inspection.attention, hf_rows, atol=1e-5, rtol=0)
    last = len(gemma.prompt) - 1
    assert np.all(inspection.attention[0, :, : last - WINDOW + 1] == 0)  # layer 0 slides
    assert np.all(inspection.attention[1, :, 0] > 0)                      # layer 1 is global
    assert inspection.lens[-1].top[0].id == int(out.logits[0, -1].argmax())


def test_contributions_add_up_through_the_post_norms(gemma):
    """Why this token: the heads pass Gemma's post-attention norm at their row's own scale
    (the score cap only bends the probabilities), so embedding + heads + MLPs add up to
    HF's logit before the logit cap."""
    got = inspect_context(gemma.model, PromptTokens.text(gemma.prompt), str).contributions
    expected = hf_logits(gemma, gemma.prompt)[-1]
    assert got.token == int(expected.argmax())
    for split in (got.logit, got.margin):
        assert abs(split.bias) < 1e-4, split.bias
    capped = FINAL_CAP * np.tanh(got.logit.total / FINAL_CAP)
    assert capped == pytest.approx(float(expected[got.token]), abs=1e-4)
    assert np.abs(got.logit.attention).max() > 1e-2


def test_the_inside_tabs_second_opinion_agrees(gemma):
    """llama.cpp's tab in the Inside panel on this file: the same top token, the same
    log-probabilities of the prompt's next tokens within float noise, every block's output
    within the layer-by-layer tolerance."""
    piece = load_tokenizer(gemma.model.path).id_to_piece
    inspection = inspect_context(gemma.model, PromptTokens.text(gemma.prompt), piece)
    opinion = second_opinion(gemma.model.path, inspection, piece)
    assert opinion.same_top1, (opinion.ours, opinion.theirs)
    assert opinion.delta.max() < 1e-2
    layers = llama_layers(gemma.model.path, gemma.model, gemma.prompt)  # block by block
    assert layers.ok and len(layers.rows) == LAYERS, layers.verdict()


def llama_cpp_greedy(path: str, prompt: list[int], n_tokens: int) -> list[int]:
    """llama.cpp's argmax continuation, one token at a time through its own cache (f32)."""
    f32 = int(llama_cpp.GGML_TYPE_F32)
    llm = llama_cpp.Llama(model_path=path, n_ctx=64, n_threads=1, logits_all=True,
                          type_k=f32, type_v=f32, verbose=False)
    try:
        llm.eval(prompt)
        tokens: list[int] = []
        for _ in range(n_tokens):
            tokens.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
            llm.eval(tokens[-1:])
        return tokens
    finally:
        llm.close()


def test_llama_cpp_picks_the_same_greedy_tokens(gemma):
    assert llama_cpp_greedy(str(gemma.model.path), gemma.prompt, GREEDY) == hf_greedy(gemma)


def test_converted_vocabulary_tokenizes_as_sentencepiece(gemma):
    tokenizer = load_tokenizer(gemma.model.path)
    assert not tokenizer.info.add_space_prefix and tokenizer.add_bos
    for line in corpus_lines()[::5]:
        assert tokenizer.encode(line) == gemma.sp.encode(line), line
    end = tokenizer.token_to_id("<end_of_turn>")
    assert end is not None and end in tokenizer.stop_ids


def test_chat_templates_render_the_same_prompt(gemma):
    """Ollama's gemma-instruct (what Ollama installs for this Jinja template) and the GGUF's
    Jinja template give one prompt, whose turns become Gemma's control tokens. The Jinja
    template refuses a system message by its own words; Ollama's puts it in the first
    user turn."""
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": "你好 <end_of_turn>"}]
    tokenizer = load_tokenizer(gemma.model.path)
    template = (TEMPLATES / "gemma-instruct.gotmpl").read_text(encoding="utf-8")
    go = render_prompt(messages, template_layer=template)
    jinja = render_prompt(messages, chat_template=gemma.model.config.chat_template,
                          special_tokens={"bos_token": "<s>"})
    assert jinja.text == "<s>" + go.text
    assert go.text.startswith("<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n")
    assert go.text.endswith("<start_of_turn>model\n")
    ids = tokenizer.encode_prompt(go.segments)
    start, end = (tokenizer.token_to_id(c) for c in CONTROLS)
    assert ids.count(start) == 4 and ids.count(end) == 3
    with_system = render_prompt(messages, template_layer=template, system="Be brief.")
    assert with_system.text.startswith("<start_of_turn>user\nBe brief.\nHi<end_of_turn>\n")
    with pytest.raises(TemplateError, match="System role not supported"):
        render_prompt(messages, chat_template=gemma.model.config.chat_template,
                      system="Be brief.", special_tokens={"bos_token": "<s>"})


def test_a_chat_turn_and_lantern_run_answer_with_hfs_greedy_tokens(gemma, capsys):
    """End to end: the chat session renders the GGUF's template, starts with Gemma's BOS and
    answers with HF's greedy tokens on those ids, stopping where they reach a stop token;
    `lantern run` on the file prints that answer."""
    model = load_model(gemma.model.path, exact=True, num_ctx=128)
    chat = LocalSession(model, Options(temperature=0, num_predict=GREEDY))
    answer = [e.id for e in chat.send("Hi there") if isinstance(e, TokenEvent)]
    ids = chat.last_prompt.ids.tolist()
    assert ids[0] == model.tokenizer.bos_id
    assert ids[-3:] == model.tokenizer.encode("<start_of_turn>model\n")[-3:]
    with torch.no_grad():
        hf_path = gemma.hf.generate(torch.tensor([ids]), max_new_tokens=GREEDY,
                                    min_new_tokens=GREEDY, do_sample=False)[0][len(ids):]
    hf_path = hf_path.tolist()
    stops = [i for i, token in enumerate(hf_path) if token in model.tokenizer.stop_ids]
    expected = hf_path[:stops[0] if stops else GREEDY]
    assert answer == expected and expected
    text = model.tokenizer.decode(expected)
    model.tokenizer.close()
    assert main(["run", str(gemma.model.path), "Hi there", "--exact", "--temperature", "0",
                 "--num-predict", str(GREEDY)]) == 0
    assert capsys.readouterr().out.strip() == text.strip()


@pytest.mark.skipif(not custom_ops().available, reason=f"no custom-op library: {custom_ops().why}")
def test_q8_0_file_runs_on_the_native_op_path(tmp_path):
    """The converter's Q8_0: every matrix read in place by Lantern's op; exact mode follows
    the reference's greedy tokens, fast mode passes the reference check."""
    _, model, sp = converted(tmp_path, outtype="q8_0")
    assert model.tensors["blk.0.attn_q.weight"].ggml_type.name == "Q8_0"
    prompt = ([sp.bos_id()] + sp.encode(TEXT))[:24]
    assert exact_greedy(model, prompt) == greedy(model, prompt, GREEDY)
    report = check_against_reference(model, PromptTokens.text(prompt), str, exact=False)
    assert report.first_off is None, report.rows


@pytest.mark.skipif(not custom_ops().available, reason=f"no custom-op library: {custom_ops().why}")
def test_llama_cpps_q4_k_m_runs_on_the_native_op_path(tmp_path):
    """llama.cpp's own Q4_K_M of a Gemma 2 whose rows fit K-quant blocks (256 wide): read in
    place by Lantern's op, the reference check passes in both modes, exact mode follows the
    reference's greedy tokens."""
    _, f32, sp = converted(tmp_path, hidden_size=256, intermediate_size=512, head_dim=64,
                           query_pre_attn_scalar=64, num_hidden_layers=4)
    out = tmp_path / "gemma2-q4_k_m.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    assert llama_cpp.llama_model_quantize(str(f32.path).encode(), str(out).encode(),
                                          params) == 0
    model = open_model(out)
    types = {t.ggml_type.name for name, t in model.tensors.items() if name.startswith("blk.")}
    assert "Q4_K" in types and model.config.quantization == "Q4_K_M"
    prompt = ([sp.bos_id()] + sp.encode(TEXT))[:24]
    assert exact_greedy(model, prompt) == greedy(model, prompt, GREEDY)
    for exact in (True, False):
        report = check_against_reference(model, PromptTokens.text(prompt), str, exact=exact)
        assert report.first_off is None, (exact, report.rows)


def test_ollamas_defaults_and_the_27b_query_scale(tmp_path):
    """A file without the window, pattern or cap keys gets llama.cpp's Gemma 2 values (every
    other layer over 4096 keys, caps 50 and 30), each recorded as assumed; a pattern key is
    honoured; the 46-layer 27B scales the query by hidden / heads, not head_dim."""
    spec = TextSpec(layers=4, hidden=64, heads=4, kv_heads=2, head_dim=32, tie_embeddings=True)
    keys = ("attention.sliding_window", "attn_logit_softcapping", "final_logit_softcapping")
    path = write_model(tmp_path / "bare.gguf", "gemma2", spec,
                       overrides={f"gemma2.{key}": None for key in keys})
    config = open_model(path).config
    text = config.text
    assert (text.sliding_window, text.attn_logit_softcap, text.final_logit_softcap) == (
        4096, 50.0, 30.0)
    assert [text.slides(i) for i in range(4)] == [True, False, True, False]
    assert {f"gemma2.{key}" for key in keys} <= set(config.assumed)
    path = write_model(tmp_path / "pattern.gguf", "gemma2", spec,
                       overrides={"gemma2.attention.sliding_window_pattern": 4})
    assert [open_model(path).config.text.slides(i) for i in range(4)] == [True] * 3 + [False]
    assert open_model(path).config.text.attention_scale == pytest.approx(32 ** -0.5)
    large = write_model(tmp_path / "27b.gguf", "gemma2", dataclasses.replace(spec, layers=46))
    assert open_model(large).config.text.attention_scale == pytest.approx((64 / 4) ** -0.5)
