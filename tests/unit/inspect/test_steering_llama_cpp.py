"""A control vector written by Lantern, loaded into llama.cpp (llama-cpp-python's
llama_set_adapter_cvec, fed as llama.cpp's own loader lays a file out: direction N at
offset (N - 1) * n_embd, times its strength), steers llama.cpp as it steers Lantern's
reference: the same logits, and not those of the vector one block off."""

from __future__ import annotations

import ctypes

import numpy as np
from gguf import GGUFReader

from engine.gguf import open_model
from engine.gguf.control_vector import Steering, write_control_vector
from engine.inspect.second_opinion import llama_build
from engine.reference import forward
from tests.fixtures.synthetic_gguf import TextSpec, write_model

IDS = [5, 17, 42, 8, 99, 3, 250, 7]
STRENGTH = 0.7


def llama_cpp_layout(path, strength: float, n_embd: int) -> np.ndarray:
    """The buffer llama.cpp's control-vector loader builds from a file (layer 1 at 0)."""
    tensors = GGUFReader(path).tensors
    deepest = max(int(t.name.split(".")[1]) for t in tensors)
    data = np.zeros(deepest * n_embd, np.float32)
    for t in tensors:
        n = int(t.name.split(".")[1])
        data[(n - 1) * n_embd:n * n_embd] += strength * t.data
    return data


def test_llama_cpp_steered_by_our_file_equals_the_steered_reference(tmp_path):
    assert llama_build().problem is None, llama_build().problem
    import llama_cpp

    path = write_model(tmp_path / "m.gguf", "qwen2", TextSpec(layers=3, vocab=400), seed=2)
    model = open_model(path)
    hidden, layers = model.config.text.hidden_size, model.config.text.n_layers
    rng = np.random.default_rng(0)
    vector = tmp_path / "v.gguf"
    write_control_vector(vector, {n: rng.standard_normal(hidden) for n in (1, 2)}, "qwen2")
    data = llama_cpp_layout(vector, STRENGTH, hidden)

    llm = llama_cpp.Llama(model_path=str(path), n_ctx=32, logits_all=True, verbose=False)
    try:
        assert llama_cpp.llama_set_adapter_cvec(
            llm._ctx.ctx, data.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), len(data),
            hidden, 1, layers) == 0
        llm.eval(IDS)
        theirs = np.array(llm.scores[:len(IDS)], np.float64)
    finally:
        llm.close()

    table = Steering.load([(vector, STRENGTH)]).table("qwen2", layers, hidden)
    ours = forward(model, IDS, steering=table).logits
    plain = forward(model, IDS).logits
    moved = np.abs(ours - plain).max()
    assert moved > 0.5
    assert np.abs(theirs - ours).max() < 0.01 * moved
    one_off = np.zeros_like(table)
    one_off[2] = table[1]                       # direction 1 after block 2: not llama.cpp's
    assert np.abs(theirs - forward(model, IDS, steering=one_off).logits).max() > 0.2 * moved
