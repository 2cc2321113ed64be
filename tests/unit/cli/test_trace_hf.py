"""Causal tracing against HF transformers: a tiny random-weight Qwen2 from the same GGUF,
each hidden state of the corrupted run restored by a forward hook, the last position's
logit difference equal to ours at every layer and position; `lantern trace` prints it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.cli import main
from engine.gguf import open_model
from engine.inspect.tracing import trace
from tests.fixtures.synthetic_gguf import TextSpec, write_model

SPEC = TextSpec(layers=2)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace")
    path = write_model(folder / "qwen2.gguf", "qwen2", SPEC, std=0.2, seed=7)
    hf = AutoModelForCausalLM.from_pretrained(folder, gguf_file=path.name, dtype=torch.float32)
    return path, hf.eval()


def hf_diff(hf, ids, direction, restore: tuple[int, int, torch.Tensor] | None) -> float:
    """HF's logit difference at the last position, with hidden state (layer, i) replaced
    (layer 0: the embeddings' output; layer l: block l - 1's output)."""
    hooks = []
    if restore is not None:
        layer, i, state = restore
        module = hf.model.embed_tokens if layer == 0 else hf.model.layers[layer - 1]

        def patch(_module, _args, out):
            hidden = out[0] if isinstance(out, tuple) else out
            hidden[0, i] = state
            return out
        hooks.append(module.register_forward_hook(patch))
    try:
        with torch.no_grad():
            logits = hf(torch.from_numpy(np.asarray(ids))[None]).logits[0, -1].double().numpy()
    finally:
        for hook in hooks:
            hook.remove()
    return float(logits @ direction)


def test_trace_equals_hf_with_a_hidden_state_restored(tiny):
    path, hf = tiny
    rng = np.random.default_rng(8)
    clean = rng.integers(0, 300, 7)
    corrupt = clean.copy()
    corrupt[2] = (clean[2] + 11) % 300
    got = trace(open_model(path), clean, corrupt)
    direction = np.zeros(hf.config.vocab_size)
    direction[got.answer], direction[got.rival] = 1.0, -1.0
    with torch.no_grad():
        states = hf(torch.from_numpy(clean)[None], output_hidden_states=True).hidden_states
    captured = []
    hook = hf.model.layers[-1].register_forward_hook(
        lambda _m, _a, o: captured.append((o[0] if isinstance(o, tuple) else o)[0].clone()))
    with torch.no_grad():
        hf(torch.from_numpy(clean)[None])
    hook.remove()
    clean_states = [s[0] for s in states[:-1]] + [captured[0]]  # before the final norm
    assert got.clean_diff == pytest.approx(hf_diff(hf, clean, direction, None), abs=1e-4)
    assert got.corrupt_diff == pytest.approx(hf_diff(hf, corrupt, direction, None), abs=1e-4)
    expected = np.array([[hf_diff(hf, corrupt, direction, (layer, i, clean_states[layer][i]))
                          for i in range(len(clean))] for layer in range(SPEC.layers + 1)])
    np.testing.assert_allclose(got.diff, expected, atol=2e-4, rtol=0)
    restored = got.restored
    # before the changed token nothing differs; restoring it at the embeddings restores all
    np.testing.assert_allclose(restored[:, :2], 0.0, atol=1e-5)
    assert restored[0, 2] == pytest.approx(1.0, abs=1e-5)
    assert restored[-1, -1] == pytest.approx(1.0, abs=1e-5)


def test_trace_cli(tiny, capsys):
    path, _ = tiny
    assert main(["trace", str(path), "--clean", "Hello world the thing", "--corrupt",
                 "Hello world the thing", "--raw"]) == 1
    assert "prompts are the same: change a word" in capsys.readouterr().err
    assert main(["trace", str(path), "--clean", "Hello world the thing", "--corrupt",
                 "Hello the the thing", "--raw", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert np.array(out["restored"]).shape == (SPEC.layers + 1, len(out["clean"]))
    assert main(["trace", str(path), "--clean", "Hello world the thing", "--corrupt",
                 "Hello the the thing", "--raw"]) == 0
    text = capsys.readouterr().out
    assert "most restored" in text and text.count("|") == 2 * len(out["clean"])


def test_cancel_stops_the_first_runs_after_one_block(tiny, monkeypatch):
    """Cancel is honoured inside the clean and corrupted runs, not only between restores:
    on a large model those runs alone take long."""
    import threading

    import engine.inspect.tracing as tracing
    from engine.inspect.inspection import InspectionCancelled

    blocks: list[int] = []
    real = tracing.forward

    def counted(*args, on_layer, **kwargs):
        return real(*args, on_layer=lambda i: (blocks.append(i), on_layer(i)), **kwargs)

    monkeypatch.setattr(tracing, "forward", counted)
    cancel = threading.Event()
    with pytest.raises(InspectionCancelled):
        trace(open_model(tiny[0]), [1, 2, 3], [1, 4, 3], cancel=cancel,
              progress=lambda stage, fraction: cancel.set())
    assert blocks == [0]
