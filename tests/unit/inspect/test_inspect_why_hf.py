"""Direct contributions and occlusion attribution against HF transformers with hooks, on
a tiny random-weight Qwen2 that transformers loads from the same GGUF, and on the real
0.5B demo model.

Contributions: HF's per-head outputs (o_proj's input, each head through its own columns of
o_proj) and MLP outputs, captured by hooks, projected through the final norm frozen at the
position's scale and lm_head, equal ours, and the parts add up to the logit. Occlusion: HF
re-run with a 4-D attention mask that hides one key from every other query equals ours.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.chat.prompt_tokens import PromptTokens
from engine.cli import main
from engine.gguf import GGUFModel, open_model
from engine.inspect import inspect_context
from engine.inspect.occlusion import occlusion
from tests.fixtures.hf_gguf import hf_model
from tests.fixtures.synthetic_gguf import TextSpec, write_model

SPEC = TextSpec(layers=3, heads=4, kv_heads=2)
STD = 0.2  # attention far from uniform, so hiding a token matters


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[GGUFModel, torch.nn.Module]:
    folder = tmp_path_factory.mktemp("why")
    path = write_model(folder / "qwen2.gguf", "qwen2", SPEC, std=STD, seed=3)
    hf = AutoModelForCausalLM.from_pretrained(folder, gguf_file=path.name, dtype=torch.float32,
                                              attn_implementation="eager")
    return open_model(path), hf.eval()


def ids_of(model: GGUFModel, n: int = 10) -> np.ndarray:
    return np.random.default_rng(4).integers(0, model.config.text.vocab_size, n)


def hf_parts(hf: torch.nn.Module, ids: np.ndarray, row: int):
    """HF's per-head [L, heads, H] and MLP [L, H] outputs at ``row``, its final residual
    [H] and logits [V], captured by hooks."""
    heads, mlps, hooks = [], [], []
    n_heads = hf.config.num_attention_heads
    for layer in hf.model.layers:
        o_proj = layer.self_attn.o_proj

        def before_o_proj(_module, args, o_proj=o_proj):
            x = args[0][0, row].reshape(n_heads, -1)                     # [heads, D]
            w = o_proj.weight.reshape(o_proj.weight.shape[0], n_heads, -1)  # [H, heads, D]
            heads.append(torch.einsum("nd,hnd->nh", x, w))

        hooks.append(o_proj.register_forward_pre_hook(before_o_proj))
        hooks.append(layer.mlp.register_forward_hook(
            lambda _module, _args, out: mlps.append(out[0, row])))
    try:
        with torch.no_grad():
            out = hf(torch.from_numpy(ids)[None], output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    final_hidden = []
    hook = hf.model.layers[-1].register_forward_hook(
        lambda _m, _a, o: final_hidden.append(o[0] if isinstance(o, tuple) else o))
    try:
        with torch.no_grad():
            hf(torch.from_numpy(ids)[None])
    finally:
        hook.remove()
    return (torch.stack(heads).double().numpy(), torch.stack(mlps).double().numpy(),
            out.hidden_states[0][0, row].double().numpy(),
            final_hidden[0][0, row].double().numpy(), out.logits[0, row].double().numpy())


@pytest.mark.parametrize("row", [9, 5])
def test_contributions_equal_hf_heads_and_mlps_and_add_up(tiny, row):
    model, hf = tiny
    ids = ids_of(model)
    got = inspect_context(model, PromptTokens.text(ids), str, row).contributions
    heads, mlps, embedding, final, logits = hf_parts(hf, ids, row)
    token = int(ids[row + 1]) if row + 1 < len(ids) else int(logits.argmax())
    assert got.token == token and got.position == row
    scale = np.sqrt(np.mean(final ** 2) + hf.config.rms_norm_eps)
    gain = hf.model.norm.weight.detach().double().numpy() / scale
    lm_head = hf.lm_head.weight.detach().double().numpy()
    runner_up = int(np.argsort(-np.where(np.arange(len(logits)) == token, -np.inf, logits))[0])
    assert got.runner_up == runner_up
    for split, direction, total in (
            (got.logit, lm_head[token], logits[token]),
            (got.margin, lm_head[token] - lm_head[runner_up], logits[token] - logits[runner_up])):
        d = direction * gain
        assert split.attention.shape == (SPEC.layers, SPEC.heads)
        np.testing.assert_allclose(split.attention, heads @ d, atol=1e-4, rtol=0)
        np.testing.assert_allclose(split.mlp, mlps @ d, atol=1e-4, rtol=0)
        np.testing.assert_allclose(split.embedding, embedding @ d, atol=1e-4, rtol=0)
        np.testing.assert_allclose(split.total, total, atol=1e-4, rtol=0)
        parts = split.embedding + split.attention.sum() + split.mlp.sum()
        assert abs(split.bias) < 1e-4 and parts + split.bias == pytest.approx(split.total)
        # HF's own parts add up to HF's logit too: the linearisation is exact
        assert abs(embedding @ d + (heads @ d).sum() + (mlps @ d).sum() - total) < 1e-4
    assert np.abs(got.logit.attention).max() > 1e-2  # heads do contribute here


def hf_logprob(hf: torch.nn.Module, ids: np.ndarray, row: int, token: int,
               hidden: int | None) -> float:
    """log p(token) at ``row`` in HF, with key ``hidden`` masked for every other query."""
    n = row + 1
    allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))
    if hidden is not None:
        allowed[:, hidden] = False
        allowed[hidden, hidden] = True
    mask = torch.zeros(1, 1, n, n).masked_fill(~allowed, torch.finfo(torch.float32).min)
    with torch.no_grad():
        logits = hf(torch.from_numpy(ids[:n])[None], attention_mask=mask).logits[0, row]
    return float(torch.log_softmax(logits.double(), -1)[token])


@pytest.mark.parametrize("row", [9, 6])
def test_occlusion_equals_hf_with_the_key_masked(tiny, row):
    model, hf = tiny
    ids = ids_of(model)
    got = occlusion(model, PromptTokens.text(ids), row)
    token = int(ids[row + 1]) if row + 1 < len(ids) else got.token
    assert got.token == token and got.delta.shape == (row,)
    clean = hf_logprob(hf, ids, row, token, None)
    assert got.logprob == pytest.approx(clean, abs=1e-4)
    expected = np.array([hf_logprob(hf, ids, row, token, j) - clean for j in range(row)])
    np.testing.assert_allclose(got.delta, expected, atol=2e-4, rtol=0)
    assert np.abs(expected).max() > 1e-2  # hiding a token does change the answer


def test_cli_json_adds_contributions_and_attribution(tiny, capsys):
    model, _ = tiny
    assert main(["inspect", str(model.path), "Hello world", "--raw", "--contributions",
                 "--attribution", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    parts = out["contributions"]
    assert len(parts["layers"]) == SPEC.layers
    assert all(len(layer["attention"]) == SPEC.heads for layer in parts["layers"])
    summed = parts["embedding"] + parts["bias"] + sum(
        sum(layer["attention"]) + layer["mlp"] for layer in parts["layers"])
    assert summed == pytest.approx(parts["total"], abs=1e-9)
    assert parts["token"] == out["lens"][-1]["top"][0]["id"]
    assert parts["total"] == pytest.approx(out["lens"][-1]["top"][0]["logit"], abs=1e-5)
    position = out["position"]
    assert [a["position"] for a in out["attribution"]] == list(range(position))


def test_contributions_and_occlusion_equal_hf_on_the_demo_model(demo_05b):
    """The real 0.5B model (tied embeddings, q/k/v bias, 14 heads over 2 kv heads)."""
    model = open_model(demo_05b)
    ids = np.array([151644, 872, 198, 675, 2326, 10250, 5109, 13, 151645, 198, 151644, 77091,
                    198])
    row = len(ids) - 1
    got = inspect_context(model, PromptTokens.text(ids), str, row).contributions
    attribution = occlusion(model, PromptTokens.text(ids), row)
    hf = hf_model(demo_05b, attn_implementation="eager")
    try:
        heads, mlps, embedding, final, logits = hf_parts(hf, ids, row)
        scale = np.sqrt(np.mean(final ** 2) + hf.config.rms_norm_eps)
        d = (hf.lm_head.weight[got.token].detach().double().numpy()
             * hf.model.norm.weight.detach().double().numpy() / scale)
        clean = hf_logprob(hf, ids, row, got.token, None)
        hidden = [hf_logprob(hf, ids, row, got.token, j) - clean for j in range(row)]
    finally:
        del hf
    assert got.token == int(logits.argmax())
    np.testing.assert_allclose(got.logit.attention, heads @ d, atol=2e-3, rtol=0)
    np.testing.assert_allclose(got.logit.mlp, mlps @ d, atol=2e-3, rtol=0)
    assert got.logit.total == pytest.approx(logits[got.token], abs=2e-3)
    assert abs(got.logit.bias) < 1e-3 and np.abs(got.logit.mlp).max() > 1.0
    assert attribution.token == got.token and attribution.logprob == pytest.approx(clean,
                                                                                   abs=2e-3)
    np.testing.assert_allclose(attribution.delta, hidden, atol=5e-3, rtol=0)
    assert np.abs(attribution.delta).max() > 0.5
