"""The on-disk cache of built decoder graphs: a hit gives the same logits without building,
keys follow everything the graph depends on, writes are atomic, eviction is LRU within the
limit and spares the entry in use."""

from __future__ import annotations

import os

import numpy as np
import pytest

from engine.gguf import open_model
from engine.graph import decoder as graph
from engine.native import ENV, custom_ops
from engine.runtime import graph_cache
from engine.runtime.decoder import DecoderSession
from engine.runtime.graph_cache import GraphCache, cache_limit, entry_key, source_identity
from tests.fixtures.synthetic_gguf import T, TextSpec, write_model

SPEC = TextSpec(hidden=256, heads=4, kv_heads=2, ffn=256, layers=2)
PROMPT = [5, 71, 300, 12, 99]


@pytest.fixture
def model(tmp_path, monkeypatch):
    monkeypatch.setenv("LANTERN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LANTERN_CACHE_LIMIT", raising=False)
    return open_model(write_model(tmp_path / "m.gguf", "qwen2", SPEC, default_type=T.Q4_K))


def test_second_session_loads_from_the_cache_with_the_same_logits(model, tmp_path, monkeypatch):
    first = DecoderSession(model, max_cache_len=16)
    assert first.cache_state == "stored"
    second = DecoderSession(model, max_cache_len=32)  # another cache length: same entry
    assert second.cache_state == "hit"
    np.testing.assert_array_equal(second.forward(input_ids=PROMPT).logits,
                                  first.forward(input_ids=PROMPT).logits)
    assert len(GraphCache().entries()) == 1
    # GgufMatMul reads the weights in place, so exact mode's graph is as small and cached
    exact = DecoderSession(model, exact=True, max_cache_len=16).cache_state
    assert exact == ("stored" if custom_ops().available else "off")
    monkeypatch.setenv(ENV, "off")  # MatMulNBits: exact mode's fp32 weights are never cached
    assert DecoderSession(model, exact=True, max_cache_len=16).cache_state == "off"
    assert DecoderSession(model, max_cache_len=16, cache=False).cache_state == "off"
    assert not [p for p in (tmp_path / "cache" / "decoders").iterdir()
                if p.name.startswith(".")]  # no staging left behind


def test_keys_follow_source_and_options(model, tmp_path):
    fast = graph.DecoderOptions()
    key = entry_key(model.path, fast)
    assert key == entry_key(model.path, graph.DecoderOptions(max_cache_len=99))
    assert key != entry_key(model.path, graph.DecoderOptions(all_logits=True))
    assert key != entry_key(model.path, graph.DecoderOptions(float16=True))
    os.utime(model.path, ns=(1, 1))  # a rewritten file is another model
    assert key != entry_key(model.path, fast)
    blob = tmp_path / ("sha256-" + "ab" * 32)
    blob.write_bytes(b"x")
    assert source_identity(blob) == "sha256-" + "ab" * 32


def test_code_change_changes_the_key(model, monkeypatch):
    before = entry_key(model.path, graph.DecoderOptions())
    monkeypatch.setattr(graph_cache, "code_digest", lambda: "another engine")
    assert entry_key(model.path, graph.DecoderOptions()) != before


def fake_entry(root, name: str, size: int, mtime: int) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / graph_cache.MODEL_FILE).write_bytes(b"m")
    (d / "decoder.weights").write_bytes(b"\0" * size)
    os.utime(d, (mtime, mtime))


def test_eviction_is_lru_within_the_limit_and_spares_the_entry_in_use(tmp_path):
    store = GraphCache(tmp_path, limit=2500)
    for i, name in enumerate(["old", "mid", "new", "current"]):
        fake_entry(tmp_path, name, 1000, mtime=1000 + i)
    os.utime(tmp_path / "current", (1, 1))  # oldest of all, but in use
    store.evict(keep="current")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "new"]
    assert store.lookup("new") is not None and store.lookup("old") is None


def test_limit_setting(monkeypatch):
    for value, expected in (("", 8 << 30), ("0", 0), ("512M", 512 << 20), ("1.5G", 3 << 29),
                            ("2GiB", 2 << 30), ("1000", 1000)):
        monkeypatch.setenv("LANTERN_CACHE_LIMIT", value)
        assert cache_limit() == expected
    monkeypatch.setenv("LANTERN_CACHE_LIMIT", "lots")
    with pytest.raises(ValueError, match="LANTERN_CACHE_LIMIT"):
        cache_limit()


def test_limit_zero_turns_the_cache_off(model, monkeypatch):
    monkeypatch.setenv("LANTERN_CACHE_LIMIT", "0")
    assert DecoderSession(model, max_cache_len=16).cache_state == "off"


def test_unwritable_cache_only_costs_load_time(model, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("LANTERN_CACHE_DIR", str(blocker))
    session = DecoderSession(model, max_cache_len=16)
    assert session.cache_state.startswith("off (")
    assert session.forward(input_ids=PROMPT).logits.shape == (model.config.text.vocab_size,)
