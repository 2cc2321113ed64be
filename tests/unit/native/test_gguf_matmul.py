"""lantern.GgufMatMul through a one-node ONNX graph against gguf.quants.dequantize.

Exact mode: within float32 accumulation error of x @ dequantize(W).T, per output against
sum_k |x||w|. Fast mode: within the error of rounding x to 8 bits per block (half a step
of each block's scale). Both: a row comes out to the same bits whatever the other rows are
(a verify step equals one-token steps), the op reads the file's bytes where they lie, and
an expert index picks one matrix of a 3-D tensor.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

from engine.graph.builder import GraphBuilder, feed_in_place, in_place_views, save_model
from engine.graph.fuse import split_rows, stack_rows
from engine.graph.linear import GgufWeight, gguf_matmul
from engine.native import custom_ops

OPS = custom_ops()
pytestmark = pytest.mark.skipif(not OPS.available, reason=f"no custom-op library: {OPS.why}")

FLOATS = (T.F32, T.F16, T.BF16)
K_QUANTS = (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K)
TYPES = (*FLOATS, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, *K_QUANTS, T.MXFP4)
FP16_FIELDS = {  # byte offsets of each block's fp16 scales (the rest of a block is codes)
    T.Q4_0: (0,), T.Q4_1: (0, 2), T.Q5_0: (0,), T.Q5_1: (0, 2), T.Q8_0: (0,),
    T.Q2_K: (80, 82), T.Q3_K: (108,), T.Q4_K: (0, 2), T.Q5_K: (0, 2), T.Q6_K: (208,),
}


def random_raw(qtype: T, n: int, k: int, seed: int = 0) -> np.ndarray:
    """GGUF bytes [n, row_bytes] of moderate values (no overflow in a float32 dot)."""
    rng = np.random.default_rng(seed)
    if qtype in FLOATS:
        values = rng.standard_normal((n, k)).astype(np.float32)
        raw = {T.F32: values, T.F16: values.astype(np.float16),
               T.BF16: (values.view(np.uint32) >> 16).astype(np.uint16)}[qtype]
        return raw.view(np.uint8).reshape(n, -1)
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n, k // block, size), dtype=np.uint8)
    if qtype == T.MXFP4:  # the first byte is an E8M0 scale: 2^(e - 127)
        raw[..., 0] = rng.integers(118, 127, (n, k // block))
    for at in FP16_FIELDS.get(qtype, ()):
        scales = rng.uniform(0.001, 0.02, (n, k // block)).astype(np.float16)
        raw[..., at:at + 2] = scales.view(np.uint8).reshape(n, k // block, 2)
    return raw.reshape(n, -1)


def mapped(raw: np.ndarray, tmp_path: Path, writable: bool = False) -> np.ndarray:
    """``raw`` written to a file at an odd offset and mapped back, as the GGUF reader maps."""
    path = tmp_path / "blob"
    path.write_bytes(b"GGUF" * 3 + raw.tobytes())
    with open(path, "r+b" if writable else "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)
    return np.frombuffer(buf, np.uint8, raw.nbytes, 12).reshape(raw.shape)


def session(weight: GgufWeight, *, fast: bool, experts: int = 0):
    """A one-op session and the values it reads in place (keep them while it runs)."""
    g = GraphBuilder("op")
    y = gguf_matmul(g, "x", weight, "w", fast=fast, expert="e" if experts else "",
                    experts=experts)
    inputs = [("x", np.float32, None)] + ([("e", np.int64, [1])] if experts else [])
    model = g.make_model(inputs, [(y, np.float32, None)])
    options = ort.SessionOptions()
    options.register_custom_ops_library(str(OPS.path))
    options.intra_op_num_threads = 2
    values = feed_in_place(options, g.in_place)
    return ort.InferenceSession(model.SerializeToString(), options), values, model, g


def activations(m: int, k: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, m, k)).astype(np.float32)


def check(qtype: T, y: np.ndarray, x: np.ndarray, raw: np.ndarray, fast: bool) -> None:
    w = dequantize(raw, qtype).reshape(raw.shape[0], -1).astype(np.float64)
    x = x.reshape(-1, w.shape[1]).astype(np.float64)
    y = y.reshape(x.shape[0], -1)
    scale = np.abs(x) @ np.abs(w).T
    bound = 1e-5 * scale + 1e-30
    if fast and qtype not in FLOATS:  # dense types: fast mode computes exact mode's values
        block = 256 if qtype in K_QUANTS else 32
        step = np.abs(x).reshape(x.shape[0], -1, block).max(axis=-1) / 127  # [m, blocks]
        half_steps = np.repeat(step, block, axis=-1) / 2
        bound = bound + 1.01 * half_steps @ np.abs(w).T
    err = np.abs(y - x @ w.T)
    assert (err <= bound).all(), f"worst error {err.max()} at bound {bound[err.argmax()]}"


@pytest.mark.parametrize("fast", [False, True], ids=["exact", "fast"])
@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_matches_dequantize_and_rows_are_independent(qtype, fast, tmp_path):
    n, k = 70, 512  # 70 columns: a full chunk of 64 and a short one
    raw = mapped(random_raw(qtype, n, k), tmp_path)
    sess, _values, _, _ = session(GgufWeight(qtype, n, k, raw), fast=fast)
    x = activations(5, k)
    y = sess.run(None, {"x": x})[0]
    assert y.shape == (1, 5, n) and y.dtype == np.float32
    check(qtype, y, x, raw, fast)
    for i in range(5):  # each row alone, as a one-token step computes it: the same bits
        alone = sess.run(None, {"x": x[:, i:i + 1]})[0]
        assert alone.tobytes() == y[:, i:i + 1].tobytes()


def test_reads_the_files_bytes_in_place(tmp_path):
    n, k = 8, 64
    raw = mapped(random_raw(T.Q8_0, n, k), tmp_path, writable=True)
    sess, _values, model, g = session(GgufWeight(T.Q8_0, n, k, raw), fast=False)
    x = activations(1, k)
    before = sess.run(None, {"x": x})[0]
    raw[3, 2:] = 0  # row 3's codes in the mapped file, after the session was made
    after = sess.run(None, {"x": x})[0]
    assert (after[..., 3] == 0).all() and np.array_equal(np.delete(after, 3, -1),
                                                         np.delete(before, 3, -1))
    # the graph holds where the bytes lie, not the bytes: a saved copy has no weights file
    save_model(model, g.external, tmp_path / "op.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob", "op.onnx"]
    whole = np.frombuffer(raw.base.base, np.uint8)
    [view] = in_place_views(model, whole).values()
    assert view.ctypes.data == raw.ctypes.data and view.nbytes == raw.nbytes


@pytest.mark.parametrize("fast", [False, True], ids=["exact", "fast"])
@pytest.mark.parametrize("index_type", [np.int64, np.int32])
def test_expert_index_picks_one_matrix(fast, index_type, tmp_path):
    experts, n, k = 3, 40, 256
    raw = random_raw(T.Q4_K, experts * n, k)
    g_raw = mapped(raw, tmp_path)
    sess, _values, model, _ = session(GgufWeight(T.Q4_K, n, k, g_raw), fast=fast,
                                      experts=experts)
    x = activations(2, k)
    for e in range(experts):
        y = sess.run(None, {"x": x, "e": np.array([e], np.int64)})[0]
        check(T.Q4_K, y, x, raw[e * n:(e + 1) * n], fast)
    if index_type is np.int32:  # the index's type is the caller's: int32 gives the same
        model.graph.input[1].type.tensor_type.elem_type = 6
        options = ort.SessionOptions()
        options.register_custom_ops_library(str(OPS.path))
        values = feed_in_place(options, in_place_views(model, np.frombuffer(
            g_raw.base.base, np.uint8)))
        sess32 = ort.InferenceSession(model.SerializeToString(), options)
        y32 = sess32.run(None, {"x": x, "e": np.array([2], np.int32)})[0]
        assert y32.tobytes() == sess.run(None, {"x": x, "e": np.array([2], np.int64)})[0].tobytes()
        del values
    with pytest.raises(Exception, match="expert index 3 is outside 0..2"):
        sess.run(None, {"x": x, "e": np.array([3], np.int64)})


def test_wrong_sizes_say_what_is_wrong(tmp_path):
    n, k = 8, 64
    raw = mapped(random_raw(T.Q8_0, n, k), tmp_path)
    sess, _values, _, _ = session(GgufWeight(T.Q8_0, n + 1, k, raw), fast=False)
    with pytest.raises(Exception, match="w holds 544 bytes; GGML type 8 with k=64, n=9 needs 612"):
        sess.run(None, {"x": activations(1, k)})
    with pytest.raises(Exception, match="last dimension must be k=64"):
        sess.run(None, {"x": activations(1, 32)})


def test_describes_itself():
    assert OPS.isa in {"avx512-vnni", "avx512", "avx2", "neon", "portable"}
    assert OPS.isa in OPS.describe()


def test_a_fused_tensor_splits_into_views_of_its_rows(tmp_path):
    """Phi-3 stores q|k|v as one tensor: each part is a view of its rows, never a copy, and
    multiplies to the whole's columns."""
    n, k = 96, 256
    raw = mapped(random_raw(T.Q4_K, n, k), tmp_path)
    whole = GgufWeight(T.Q4_K, n, k, raw)
    parts = split_rows(whole, [64, 16, 16])
    assert [p.n for p in parts] == [64, 16, 16] and stack_rows(parts) is None
    assert all(np.shares_memory(p.raw, raw) for p in parts)
    x = activations(3, k)
    sessions = [session(w, fast=True) for w in (whole, *parts)]  # each with its values
    y, *got = (sess.run(None, {"x": x})[0] for sess, *_ in sessions)
    assert np.concatenate(got, axis=-1).tobytes() == y.tobytes()


@pytest.mark.parametrize("fast", [False, True], ids=["exact", "fast"])
@pytest.mark.parametrize("qtype", [T.Q4_K, T.Q6_K, T.Q8_0], ids=lambda t: t.name)
def test_a_row_alone_on_the_calling_thread_equals_the_pools(qtype, fast, tmp_path):
    """A small product (a one-token step's k projection) runs on the calling thread alone,
    a larger one on the pool's threads (op.c, SERIAL_BYTES): the same bits either way."""
    n, k = 256, 1536  # 221-430 KB: one row stays on the calling thread, 8 rows do not
    raw = mapped(random_raw(qtype, n, k), tmp_path)
    assert raw.nbytes < 512 * 1024 <= 8 * raw.nbytes
    sess, _values, _, _ = session(GgufWeight(qtype, n, k, raw), fast=fast)
    x = activations(8, k)
    y = sess.run(None, {"x": x})[0]
    check(qtype, y, x, raw, fast)
    for i in range(8):
        assert sess.run(None, {"x": x[:, i:i + 1]})[0].tobytes() == y[:, i:i + 1].tobytes()
