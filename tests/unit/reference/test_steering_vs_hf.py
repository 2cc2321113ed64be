"""Steering against HF transformers: the reference with control vectors added equals HF
with the same vectors added to each decoder layer's output by a forward hook (tiny
random-weight Qwen2 that transformers loads from the same GGUF), and a vector made from
prompt pairs is llama.cpp's mean method over HF's own hidden states."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.gguf import GGUFModel, open_model
from engine.inspect.steering import make_control_vector, pair_ids
from engine.reference import forward
from engine.tokenizer import load_tokenizer
from tests.fixtures.synthetic_gguf import TextSpec, write_model
from tests.unit.reference.test_reference_hf import HF_RTOL, assert_layers_close

SPEC = TextSpec(layers=4)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[GGUFModel, torch.nn.Module]:
    folder = tmp_path_factory.mktemp("steer_hf")
    path = write_model(folder / "qwen2.gguf", "qwen2", SPEC, std=0.2, seed=7)
    hf = AutoModelForCausalLM.from_pretrained(folder, gguf_file=path.name, dtype=torch.float32)
    return open_model(path), hf.eval()


def hf_steered(hf: torch.nn.Module, ids, table: np.ndarray | None,
               mask: torch.Tensor | None = None):
    """HF's hidden states (embeddings, then each layer's output, the vector included) and
    logits, with row i of ``table`` added to layer i's output by a forward hook (and
    ``mask`` as the attention mask)."""
    states, hooks = [], []

    def add(i: int):
        def hook(_module, _args, out):
            hidden = out[0] if isinstance(out, tuple) else out
            if table is not None:
                hidden = hidden + torch.from_numpy(table[i])
            states.append(hidden[0].double().numpy())
            return (hidden, *out[1:]) if isinstance(out, tuple) else hidden
        return hook

    for i, layer in enumerate(hf.model.layers):
        hooks.append(layer.register_forward_hook(add(i)))
    try:
        with torch.no_grad():
            out = hf(torch.as_tensor(np.asarray(ids))[None], attention_mask=mask,
                     output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    return [out.hidden_states[0][0].double().numpy(), *states], out.logits[0].double().numpy()


def test_steered_reference_equals_hf_with_the_vector_added_by_a_hook(tiny):
    model, hf = tiny
    cfg = model.config.text
    table = np.random.default_rng(0).standard_normal((cfg.n_layers, cfg.hidden_size))
    table[0] = 0
    table = table.astype(np.float32)
    ids = np.random.default_rng(1).integers(0, cfg.vocab_size, 12)
    ours = forward(model, ids, dtype=np.float64, steering=table)
    states, logits = hf_steered(hf, ids, table)
    assert_layers_close(ours.hidden_states, states, rtol=HF_RTOL)
    assert np.abs(ours.logits - logits).max() <= HF_RTOL * np.abs(logits).max()
    _, plain = hf_steered(hf, ids, None)
    assert np.abs(plain - logits).max() > 100 * HF_RTOL * np.abs(logits).max()  # it steers


def test_made_vector_is_the_mean_method_over_hfs_hidden_states(tiny):
    model, hf = tiny
    tokenizer = load_tokenizer(model.path)
    positive = ["Hello world, the day is bright", "the sun is out"]
    negative = ["Hello world, the night is dark and long", "the rain is falling"]
    got = make_control_vector(model, tokenizer, positive, negative)
    n_layers = model.config.text.n_layers
    assert sorted(got) == list(range(1, n_layers))   # direction.1 .. direction.(L - 1)
    rows: list[list[np.ndarray]] = [[] for _ in range(n_layers - 1)]
    for p, n in zip(positive, negative, strict=True):
        pos, neg = pair_ids(tokenizer, p, n)
        assert len(pos) == len(neg)
        pos_states, _ = hf_steered(hf, pos, None)
        neg_states, _ = hf_steered(hf, neg, None)
        for block in range(n_layers - 1):
            diff = pos_states[block + 1] - neg_states[block + 1]
            rows[block].append(diff[np.abs(diff).max(axis=1) > 1e-4])  # the prefix drops
    for block in range(n_layers - 1):
        mean = np.concatenate(rows[block]).mean(axis=0)
        np.testing.assert_allclose(got[block + 1], mean / np.linalg.norm(mean), atol=1e-4)
        assert abs(np.linalg.norm(got[block + 1]) - 1) < 1e-5


def test_inspection_of_a_steered_answer_runs_with_its_vectors(tiny):
    """The lens ends at the steered logits, and the contributions still add up: each
    steering row counts in its block's MLP part."""
    from engine.chat.prompt_tokens import PromptTokens
    from engine.inspect import inspect_context

    model, _ = tiny
    cfg = model.config.text
    table = np.random.default_rng(2).standard_normal((cfg.n_layers, cfg.hidden_size))
    table[0] = 0
    table = table.astype(np.float32)
    ids = np.random.default_rng(3).integers(0, cfg.vocab_size, 9)
    steered = inspect_context(model, PromptTokens.text(ids), str, steering=table)
    plain = inspect_context(model, PromptTokens.text(ids), str)
    logits = forward(model, ids, steering=table).logits[-1]
    assert steered.lens[-1].top[0].id == int(logits.argmax())
    assert abs(steered.lens[-1].top[0].logit - float(logits.max())) < 1e-3
    split = steered.contributions.logit
    assert abs(split.bias) < 1e-3 * abs(split.total)
    assert abs(split.total - plain.contributions.logit.total) > 0.1


def test_occlusion_of_a_steered_answer_equals_hf_with_the_vector_and_the_key_masked(tiny):
    from engine.chat.prompt_tokens import PromptTokens
    from engine.inspect.occlusion import occlusion

    model, hf = tiny
    cfg = model.config.text
    table = np.random.default_rng(4).standard_normal((cfg.n_layers, cfg.hidden_size))
    table[0] = 0
    table = table.astype(np.float32)
    ids = np.random.default_rng(5).integers(0, cfg.vocab_size, 8)
    got = occlusion(model, PromptTokens.text(ids), steering=table)
    plain = occlusion(model, PromptTokens.text(ids))

    def hf_logprob(hidden: int | None) -> float:
        n = len(ids)
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))
        if hidden is not None:
            allowed[:, hidden] = False
            allowed[hidden, hidden] = True
        mask = torch.zeros(1, 1, n, n).masked_fill(~allowed, torch.finfo(torch.float32).min)
        logits = torch.from_numpy(hf_steered(hf, ids, table, mask)[1][-1])
        return float(torch.log_softmax(logits, -1)[got.token])

    clean = hf_logprob(None)
    assert got.logprob == pytest.approx(clean, abs=1e-4)
    expected = np.array([hf_logprob(j) - clean for j in range(len(ids) - 1)])
    np.testing.assert_allclose(got.delta, expected, atol=2e-4, rtol=0)
    assert np.abs(got.delta - plain.delta).max() > 1e-2  # the vectors change the answer
