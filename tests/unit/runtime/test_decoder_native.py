"""The decoder on both matmul paths: Lantern's GgufMatMul over the GGUF's bytes, and the
MatMulNBits mapping that runs when the library is absent (here: LANTERN_NATIVE=off).

Both must match the numpy reference in exact mode and pick its token in fast mode; the op
path must read every matrix in place (no weights in the graph or its cache entry, exact
mode cached too), and give a verify step's rows the bits of one-token steps with no matmul
run row by row.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnx
import pytest

from engine.gguf import open_model
from engine.graph import decoder as graph
from engine.graph.builder import in_place_views
from engine.graph.kernels import kernels_for
from engine.native import ENV, custom_ops
from engine.reference import forward
from engine.runtime.decoder import DecoderSession
from engine.runtime.graph_cache import MODEL_FILE, GraphCache
from tests.fixtures.synthetic_gguf import T, TextSpec, write_model
from tests.unit.runtime.test_decoder import PROMPT, assert_close
from tests.unit.runtime.test_speculation import MIXED, verify_and_steps

OPS = custom_ops()
needs_library = pytest.mark.skipif(not OPS.available, reason=f"no custom-op library: {OPS.why}")
SPEC = TextSpec(hidden=256, heads=4, kv_heads=2, ffn=512, layers=2)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    """K-quants, legacy formats and Q8_0 in one model (rows of 256 for the K-quants)."""
    return write_model(tmp_path_factory.mktemp("native") / "m.gguf", "qwen2", SPEC,
                       default_type=T.Q8_0, types=MIXED)


@pytest.mark.parametrize("native", [pytest.param(True, marks=needs_library), False],
                         ids=["op", "fallback"])
def test_both_paths_match_the_reference(model_path, native, monkeypatch):
    if not native:
        monkeypatch.setenv(ENV, "off")
    model = open_model(model_path)
    expected = forward(model, PROMPT).logits[-1]
    exact = DecoderSession(model, exact=True, max_cache_len=16)
    assert_close(exact.forward(input_ids=PROMPT).logits, expected, "exact")
    fast = DecoderSession(model, max_cache_len=16)
    logits = fast.forward(input_ids=PROMPT).logits
    assert np.abs(logits - expected).max() < 0.05 * np.abs(expected).max()
    assert logits.argmax() == expected.argmax()
    if native:
        assert "Lantern's GGUF matmul" in fast.matmul and fast.kernels is None
    else:
        assert f"MatMulNBits, weights repacked (turned off by {ENV})" in fast.matmul
        assert fast.kernels is not None


@needs_library
@pytest.mark.parametrize("exact", [False, True], ids=["fast", "exact"])
def test_the_op_graph_reads_every_matrix_in_place(model_path, exact):
    """No MatMulNBits, no dense copy, no Scan (even where the kernel choices would run a
    verify step's matmuls row by row): every matrix is one GgufMatMul over a view of the
    file, and the weights the graph holds itself are the norms' vectors."""
    model = open_model(model_path)
    kernels = replace(kernels_for(), rows_apart_bits=(4, 8))
    built = graph.build_decoder(model, graph.DecoderOptions(
        exact=exact, max_cache_len=16, kernels=kernels, native=True))
    ops = {node.op_type for node in built.model.graph.node}
    assert "GgufMatMul" in ops and not ops & {"MatMulNBits", "MatMul", "Scan"}
    assert graph.ROWS_APART not in {i.name for i in built.model.graph.input}
    matrices = [name for name, t in model.tensors.items()
                if len(t.shape) == 2 and name != "token_embd.weight"]
    assert len(built.in_place) == len(matrices) + model.config.text.tie_embeddings
    assert sum(a.nbytes for a in built.external.values()) < 0.01 * model_path.stat().st_size


@needs_library
@pytest.mark.parametrize("exact", [False, True], ids=["fast", "exact"])
def test_the_cache_holds_the_graph_only(model_path, exact, tmp_path, monkeypatch):
    """Exact mode is cached too; an entry's weights file holds vectors only (every matrix
    is a place in the GGUF), and a session made from it computes what the built one did."""
    monkeypatch.setenv("LANTERN_CACHE_DIR", str(tmp_path))
    model = open_model(model_path)
    built = DecoderSession(model, exact=exact, max_cache_len=16)
    assert built.cache_state == "stored"
    [(_, _, entry)] = GraphCache().entries()
    stored = onnx.load(str(entry / MODEL_FILE), load_external_data=False)
    assert {len(t.dims) for t in stored.graph.initializer
            if t.data_location == onnx.TensorProto.EXTERNAL} <= {1}
    assert len(in_place_views(stored, np.zeros(model_path.stat().st_size, np.uint8))) == len(
        built._in_place) > 0
    hit = DecoderSession(open_model(model_path), exact=exact, max_cache_len=16)
    assert hit.cache_state == "hit"
    np.testing.assert_array_equal(hit.forward(input_ids=PROMPT).logits,
                                  built.forward(input_ids=PROMPT).logits)


@needs_library
@pytest.mark.parametrize("arch, default, types", [("qwen2", T.Q8_0, MIXED),
                                                  ("qwen3", T.Q8_0, MIXED),
                                                  ("qwen2", T.F16, {})], ids=["q2", "q3", "f16"])
def test_a_verify_step_equals_one_token_steps_on_the_op_path(tmp_path, arch, default, types):
    """Fast mode, matrices as wide as a small real model's: each row by the op's one code
    path, so the verify rows are one-token steps' to the bit without any row-by-row run."""
    spec = TextSpec(vocab=400, hidden=1024, heads=16, kv_heads=4, ffn=2816, layers=2)
    path = write_model(tmp_path / "q.gguf", arch, spec, default_type=default, types=types,
                       seed=4)
    decoder = DecoderSession(open_model(path), max_cache_len=64, cache=False)
    assert decoder.row_invariant and "Lantern's GGUF matmul" in decoder.matmul
    assert not decoder._rows_apart
    for k in (1, 2, 5, 9):
        decoder.reset()
        batch, single = verify_and_steps(decoder, [99, 3, 250, 7, 11, 40, 41, 300, 12][:k])
        np.testing.assert_array_equal(batch, single)
