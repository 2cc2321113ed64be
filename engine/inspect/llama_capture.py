"""llama.cpp's hidden state after every block, read from its per-tensor eval callback.

llama-cpp-python's low-level API exposes the context parameter ``cb_eval``: ggml's
scheduler calls it for every node of the compute graph, first asking (``ask`` true)
whether the node's data is wanted, then, once that node is computed, handing it over
(``ask`` false). llama.cpp names each block's output ``l_out-N`` (N counts blocks from 0);
Qwen3-VL adds the picture's DeepStack features after it (``deepstack_out-N``), which is
block N's output as Lantern's reference and HF count it.
Its embeddings are not read: that node's name is no stable part of llama.cpp, and where a
family scales them (Gemma) it holds them before the scale. Every position asks for
its logits, which keeps all rows in the last block's output (llama.cpp drops the rows
without an output there).

The callback's tensor is a ``struct ggml_tensor *``: its leading fields (type, buffer,
ne, nb) are read as a ctypes structure, its name and data through ggml's own functions
(``ggml_get_name``, ``ggml_backend_tensor_get``, which copies from any backend).

A steered answer (control vectors, engine/gguf/control_vector.py) is run steered here too,
through llama.cpp's ``llama_set_adapter_cvec``: its buffer starts at layer 1, as its
control-vector loader lays a file out, and llama.cpp adds layer N's row to block N's output
(before ``l_out-N``), Lantern's convention (tests/unit/inspect/test_steering_llama_cpp.py).
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import LanternError
from engine.inspect.llama_pictures import LlamaImage, LlamaPictures, read_pictures

BLOCK_OUTPUT = "l_out-{}"      # llama.cpp's name of block N's output
DEEPSTACK_OUTPUT = "deepstack_out-{}"   # Qwen3-VL: l_out-N with its DeepStack features added
GGML_TYPE_F32 = 0
DECODE_ABORTED = 2             # llama_decode's return value when the abort callback fired


class LlamaRunFailed(LanternError):
    """llama.cpp could not load the model or run the context."""


class LlamaRunCancelled(LanternError):
    """The user cancelled the llama.cpp run."""


class _TensorHead(ctypes.Structure):
    """The leading fields of ggml's ``struct ggml_tensor`` (ggml.h)."""

    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p),
                ("ne", ctypes.c_int64 * 4), ("nb", ctypes.c_size_t * 4)]


@dataclass(frozen=True)
class LlamaStates:
    blocks: list[np.ndarray]     # n_layers of float32 [S, H]: each block's output
    logits: np.ndarray           # float32 [S, V]


def _ggml_base():
    """ggml's base library as llama-cpp-python ships it, typed for the calls made here."""
    import llama_cpp
    from llama_cpp._ctypes_extensions import load_shared_library

    lib = load_shared_library("ggml-base", Path(llama_cpp.__file__).parent / "lib")
    lib.ggml_get_name.argtypes, lib.ggml_get_name.restype = [ctypes.c_void_p], ctypes.c_char_p
    lib.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                            ctypes.c_size_t]
    lib.ggml_backend_tensor_get.restype = None
    return lib


class _Collector:
    """The eval callback's state: which tensors are wanted and what came back."""

    def __init__(self, n_layers: int, on_block: Callable[[int], None]) -> None:
        self.ggml = _ggml_base()
        self.wanted = {BLOCK_OUTPUT.format(i).encode(): i for i in range(n_layers)}
        self.later = {DEEPSTACK_OUTPUT.format(i).encode(): i for i in range(n_layers)}
        self.blocks: dict[int, list[np.ndarray]] = {}   # a part per decoded run
        self.on_block = on_block
        self.error: BaseException | None = None

    def __call__(self, tensor: int, ask: bool, _user_data: int) -> bool:
        name = self.ggml.ggml_get_name(tensor)
        layer, later = self.wanted.get(name), self.later.get(name)
        if ask:
            return layer is not None or later is not None
        if layer is None and later is None:
            return True
        try:
            if later is not None:       # the run's block output, DeepStack features added
                self.blocks[later][-1] = self._read(tensor)
                return True
            self.blocks.setdefault(layer, []).append(self._read(tensor))
            self.on_block(layer)
        except BaseException as error:   # raised through C it would be lost: stop the graph
            self.error = error
            return False
        return True

    def _read(self, tensor: int) -> np.ndarray:
        head = _TensorHead.from_address(tensor)
        hidden, rows = head.ne[0], head.ne[1]
        if head.type != GGML_TYPE_F32 or head.ne[2] != 1 or head.ne[3] != 1 \
                or head.nb[1] != 4 * hidden:
            raise LlamaRunFailed(f"llama.cpp's {self.ggml.ggml_get_name(tensor).decode()} is "
                                 f"not a contiguous float32 matrix (type {head.type}, shape "
                                 f"{list(head.ne)}); this reader expects one")
        out = np.empty((rows, hidden), dtype=np.float32)   # ggml's ne is [H, S]: row-major [S, H]
        self.ggml.ggml_backend_tensor_get(tensor, out.ctypes.data, 0, out.nbytes)
        return out


def block_states(path: Path, ids: Sequence[int], n_layers: int, *,
                 on_block: Callable[[int], None] = lambda layer: None,
                 cancel: threading.Event | None = None,
                 steering: np.ndarray | None = None,
                 pictures: LlamaPictures | None = None) -> LlamaStates:
    """Run llama.cpp (CPU, llama-cpp-python's default settings) over ``ids`` and return the
    output of its first ``n_layers`` blocks and the logits of every position;
    ``steering`` [n_layers, H]: what the answer added to each block's output (row 0 none),
    as ``engine.gguf.control_vector.Steering.table`` gives it; ``pictures``: the images of
    an image context (whose ids ``ids`` are), read by llama.cpp's own tower and decoded at
    the context's positions, text and image runs one batch each."""
    import llama_cpp

    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)   # its log, errors only
    llama_cpp.llama_backend_init()
    model_params = llama_cpp.llama_model_default_params()
    model_params.n_gpu_layers = 0
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), model_params)
    if not model:
        raise LlamaRunFailed(f"llama.cpp could not load {path}")
    try:
        images = read_pictures(model, pictures) if pictures is not None else []
        positions = pictures.context.positions if pictures is not None else np.arange(len(ids))
        runs = [_Batch(llama_cpp, positions, start, stop, ids, image)
                for start, stop, image in _runs(len(ids), images)]
        return _decode(llama_cpp, model, runs, _Collector(n_layers, on_block), cancel,
                       steering)
    finally:
        llama_cpp.llama_model_free(model)


def llama_logits(path: Path, ids: Sequence[int], steering: np.ndarray | None = None,
                 pictures: LlamaPictures | None = None) -> np.ndarray:
    """llama.cpp's logits of every position over ``ids``, float32 [S, V] (no block read)."""
    return block_states(path, ids, 0, steering=steering, pictures=pictures).logits


def _runs(n: int, images: Sequence[LlamaImage]) -> list[tuple[int, int, LlamaImage | None]]:
    """(start, stop, image or None for text) of the first ``n`` rows' runs, in order (an
    image the rows end in, its first rows)."""
    runs, at = [], 0
    for image in (i for i in images if i.start < n):
        if image.start > at:
            runs.append((at, image.start, None))
        at = min(image.start + len(image.embeds), n)
        runs.append((image.start, at, image))
    return runs + ([(at, n, None)] if at < n else [])


class _Batch:
    """A llama_batch of one run of rows (token ids, or an image's embeddings), every row's
    logits wanted, over numpy arrays it keeps alive."""

    def __init__(self, llama_cpp, positions: np.ndarray, start: int, stop: int,
                 ids: Sequence[int], image: LlamaImage | None) -> None:
        n, self.image = stop - start, image
        rows = np.asarray(positions)[..., start:stop]
        if image is None or rows.ndim == 1:   # M-RoPE text rows: llama.cpp spreads one position
            pos = rows if rows.ndim == 1 else rows[0]
        else:                                  # an image's (t, y, x) and an unused fourth
            pos = np.concatenate([rows, np.zeros((1, n), rows.dtype)])
        self.pos = np.ascontiguousarray(pos, np.int32).reshape(-1)
        self.seq = (ctypes.c_int32 * 1)(0)
        self.seq_ids = (ctypes.POINTER(ctypes.c_int32) * (n + 1))(*[self.seq] * n)
        self.n_seq, self.logits = np.ones(n, np.int32), np.ones(n, np.int8)
        int_p = ctypes.POINTER(ctypes.c_int32)
        self.batch = llama_cpp.llama_batch(
            n_tokens=n, pos=self.pos.ctypes.data_as(int_p),
            n_seq_id=self.n_seq.ctypes.data_as(int_p), seq_id=self.seq_ids,
            logits=self.logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8)))
        if image is None:
            self.data = np.asarray(ids[start:stop], np.int32)
            self.batch.token = self.data.ctypes.data_as(int_p)
        else:
            self.data = np.ascontiguousarray(image.embeds[:n], np.float32)
            self.batch.embd = self.data.ctypes.data_as(ctypes.POINTER(ctypes.c_float))

    def __len__(self) -> int:
        return len(self.logits)


def _steer(llama_cpp, context, table: np.ndarray | None) -> None:
    """Hand llama.cpp the rows of ``table`` after block 1 onwards (row 0 is never steered)."""
    if table is None:
        return
    data = np.ascontiguousarray(table[1:], np.float32).reshape(-1)
    status = llama_cpp.llama_set_adapter_cvec(
        context, data.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), len(data),
        table.shape[1], 1, table.shape[0] - 1)
    if status != 0:
        raise LlamaRunFailed(f"llama.cpp refused the control vectors ({table.shape[1]} values "
                             "per layer; they must match the model's hidden size)")


def _decode(llama_cpp, model, runs: list[_Batch], collector: _Collector,
            cancel: threading.Event | None, steering: np.ndarray | None) -> LlamaStates:
    n = sum(len(run) for run in runs)
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = params.n_batch = params.n_ubatch = max(n, 16)
    params.n_threads = params.n_threads_batch = os.cpu_count() or 1
    # as llama-cpp-python's Llama() runs it (flash_attn=False); llama.cpp's own default
    # (auto: on, CPU) parts from the reference on long batches (BENCHMARKS.md, the 1.5B's blk.26)
    params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    callback = llama_cpp.ggml_backend_sched_eval_callback(collector)
    aborted = llama_cpp.ggml_abort_callback(lambda _data: cancel is not None and cancel.is_set())
    params.cb_eval, params.abort_callback = callback, aborted
    context = llama_cpp.llama_init_from_model(model, params)
    if not context:
        raise LlamaRunFailed(f"llama.cpp could not make a context of {n} tokens")
    vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    try:
        _steer(llama_cpp, context, steering)
        collector.blocks.clear()
        logits = np.concatenate([_run(llama_cpp, context, run, collector, cancel, vocab)
                                 for run in runs])  # [S, V]
    finally:
        llama_cpp.llama_free(context)
    missing = sorted(set(range(len(collector.wanted))) - set(collector.blocks))
    if missing:
        raise LlamaRunFailed(f"llama.cpp's graph named no {BLOCK_OUTPUT.format(missing[0])} "
                             f"(an architecture that names its block outputs otherwise)")
    return LlamaStates([np.concatenate(collector.blocks[i])
                        for i in range(len(collector.wanted))], logits)


def _run(llama_cpp, context, run: _Batch, collector: _Collector,
         cancel: threading.Event | None, vocab: int) -> np.ndarray:
    """Decode one run; its logits [n, V]. An image whose rows see each other both ways
    runs with causal attention off, as libmtmd's helper runs it."""
    two_way = run.image is not None and run.image.two_way
    if two_way:
        llama_cpp.llama_set_causal_attn(context, False)
    try:
        status = llama_cpp.llama_decode(context, run.batch)
    finally:
        if two_way:
            llama_cpp.llama_set_causal_attn(context, True)
    if collector.error is not None:
        raise collector.error
    if status == DECODE_ABORTED or (cancel is not None and cancel.is_set()):
        raise LlamaRunCancelled("the llama.cpp run was cancelled")
    if status != 0:
        raise LlamaRunFailed(f"llama.cpp's decode returned {status}")
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits(context),
                                 shape=(len(run), vocab)).copy()
