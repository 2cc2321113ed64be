"""Embeddings as Ollama serves them (/api/embed, /api/embeddings, /v1/embeddings): the final
hidden state after output_norm, pooled as the GGUF asks (default: the last token, as
Ollama's runner takes it from llama.cpp), checked against the numpy reference forward pass
on a tiny synthetic model, through the official ``ollama`` and ``openai`` clients."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import ollama
import openai
import pytest

from engine.catalog.importer import import_gguf
from engine.launch import EngineChoices, load_local
from engine.reference.text import forward, rms_norm
from engine.reference.weights import ReferenceWeights
from engine.runtime.embed import embed_text, unit_length
from engine.serve.server import LanternServer
from engine.store import Store
from tests.fixtures.serving import running_server
from tests.unit.serve.test_serve import post

TEXTS = ("Hello there", "Another, longer text to embed: with punctuation!")
EXACT = EngineChoices(exact=True)


@pytest.fixture(scope="module")
def store(tmp_path_factory, synthetic_gguf) -> Store:
    store = Store.open(tmp_path_factory.mktemp("embed") / "models")
    import_gguf(store, synthetic_gguf("qwen2", seed=7), "tiny")
    import_gguf(store, synthetic_gguf("qwen2", seed=7, overrides={"qwen2.pooling_type": 1}),
                "tiny-mean")
    return store


@pytest.fixture(scope="module")
def server(store) -> Iterator[LanternServer]:
    """Exact mode: fp32 activations, so the engine's states match the reference closely."""
    with running_server(store, EXACT) as server:
        yield server


def reference_states(store: Store, name: str, text: str) -> np.ndarray:
    """Every position's hidden state after output_norm [S, H], from the numpy oracle."""
    model = load_local(store.get(name), EXACT, 256)
    ids = model.tokenizer.encode_prompt([(text, True)])
    weights = ReferenceWeights(model.gguf)
    last_block = forward(model.gguf, ids, weights=weights).hidden_states[-1]     # [S, H]
    return rms_norm(last_block, weights.output_norm(), weights.config.rms_eps)


def test_the_engine_pools_the_final_normed_state_as_the_gguf_says(store):
    for name, pool in (("tiny", lambda s: s[-1]), ("tiny-mean", lambda s: s.mean(axis=0))):
        model = load_local(store.get(name), EXACT, 256)
        for text in TEXTS:
            expected = pool(reference_states(store, name, text))
            got = embed_text(model, text, 256)
            np.testing.assert_allclose(got.vector, expected, atol=2e-4, rtol=1e-3,
                                       err_msg=f"{name}: {text!r}")
            assert got.token_count == len(model.tokenizer.encode_prompt([(text, True)]))
        # a cached prefix changes nothing: the same text again, then a longer one
        again = embed_text(model, TEXTS[0], 256).vector
        np.testing.assert_allclose(again, pool(reference_states(store, name, TEXTS[0])),
                                   atol=2e-4, rtol=1e-3)


def test_ollama_clients_embed_and_embeddings_answer_as_ollama_does(store, server):
    client = ollama.Client(host=server.url)
    answer = client.embed(model="tiny", input=list(TEXTS))
    assert answer.model == "tiny" and len(answer.embeddings) == 2
    for text, vector in zip(TEXTS, answer.embeddings, strict=True):
        expected = reference_states(store, "tiny", text)[-1]
        np.testing.assert_allclose(vector, expected / np.linalg.norm(expected), atol=1e-4)
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    model = load_local(store.get("tiny"), EXACT, 256)
    counts = [len(model.tokenizer.encode_prompt([(t, True)])) for t in TEXTS]
    assert answer.prompt_eval_count == sum(counts)
    assert answer.total_duration >= answer.load_duration > 0

    single = client.embed(model="tiny", input=TEXTS[0], dimensions=8)
    assert len(single.embeddings) == 1 and len(single.embeddings[0]) == 8
    assert np.linalg.norm(single.embeddings[0]) == pytest.approx(1.0, abs=1e-5)

    raw = client.embeddings(model="tiny", prompt=TEXTS[0])     # the older route: not scaled
    np.testing.assert_allclose(raw.embedding, reference_states(store, "tiny", TEXTS[0])[-1],
                               atol=2e-4, rtol=1e-3)
    assert client.embeddings(model="tiny", prompt="").embedding == []
    assert client.embed(model="tiny", input=[]).embeddings == []      # only loads


def test_truncation_and_errors(server):
    client = ollama.Client(host=server.url)
    long_text = " ".join(["word"] * 200)
    cut = client.embed(model="tiny", input=long_text, options={"num_ctx": 32})
    assert cut.prompt_eval_count == 32
    with pytest.raises(ollama.ResponseError) as refused:
        client.embed(model="tiny", input=long_text, truncate=False, options={"num_ctx": 32})
    assert refused.value.status_code == 400 and "context" in refused.value.error
    with pytest.raises(ollama.ResponseError) as missing:
        client.embed(model="nope", input="x")
    assert missing.value.status_code == 404
    status, lines = post(server, "/api/embed", {"model": "tiny", "input": [1, 2]})
    assert status == 400 and "input" in lines[0]["error"]      # the client would refuse it


def test_openai_embeddings_match_ollamas(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
    answer = client.embeddings.create(model="tiny", input=list(TEXTS))   # base64 by default
    ours = ollama.Client(host=server.url).embed(model="tiny", input=list(TEXTS))
    assert [d.index for d in answer.data] == [0, 1]
    for item, vector in zip(answer.data, ours.embeddings, strict=True):
        np.testing.assert_allclose(item.embedding, vector, atol=1e-6)
    assert answer.usage.prompt_tokens == ours.prompt_eval_count
    floats = client.embeddings.create(model="tiny", input=TEXTS[0], encoding_format="float")
    np.testing.assert_allclose(floats.data[0].embedding, ours.embeddings[0], atol=1e-6)


def test_unit_length_cuts_then_scales():
    vector = np.array([3.0, 4.0, 12.0], np.float32)
    np.testing.assert_allclose(unit_length(vector), vector / 13)
    np.testing.assert_allclose(unit_length(vector, 2), [0.6, 0.8])
    assert not unit_length(np.zeros(3, np.float32)).any()
