"""A control vector written by Lantern, loaded into llama.cpp (llama-cpp-python's
llama_set_adapter_cvec, fed as llama.cpp's own loader lays a file out: direction N at
offset (N - 1) * n_embd, times its strength), steers llama.cpp as it steers Lantern's
reference: the same logits, and not those of the vector one block off. The llama.cpp views
of a steered answer (second opinion, layer by layer) run llama.cpp steered the same way."""

from __future__ import annotations

import ctypes
import dataclasses
import json

import numpy as np
from gguf import GGUFReader

from engine.chat.prompt_tokens import PromptTokens
from engine.cli import main
from engine.gguf import open_model
from engine.gguf.control_vector import Steering, write_control_vector
from engine.inspect import inspect_context
from engine.inspect.llama_capture import block_states
from engine.inspect.llama_layers import llama_layers
from engine.inspect.second_opinion import llama_build, second_opinion
from engine.reference import forward
from engine.remote.crosscheck import TOLERANCE
from engine.tokenizer import load_tokenizer
from tests.fixtures.synthetic_gguf import TextSpec, write_model

IDS = [5, 17, 42, 8, 99, 3, 250, 7]
STRENGTH = 0.7
TEXT = "def fibonacci(n):\n    if n < 2:\n        return n\n    return"


def llama_cpp_layout(path, strength: float, n_embd: int) -> np.ndarray:
    """The buffer llama.cpp's control-vector loader builds from a file (layer 1 at 0)."""
    tensors = GGUFReader(path).tensors
    deepest = max(int(t.name.split(".")[1]) for t in tensors)
    data = np.zeros(deepest * n_embd, np.float32)
    for t in tensors:
        n = int(t.name.split(".")[1])
        data[(n - 1) * n_embd:n * n_embd] += strength * t.data
    return data


def steered_model(tmp_path, seed: int):
    """A tiny random-weight Qwen2 GGUF, opened, and a control vector file for blocks 1 and 2
    (random directions drawn with ``seed``)."""
    path = write_model(tmp_path / "m.gguf", "qwen2", TextSpec(layers=3, vocab=400), seed=2)
    model = open_model(path)
    rng = np.random.default_rng(seed)
    vector = tmp_path / "v.gguf"
    write_control_vector(vector, {n: rng.standard_normal(model.config.text.hidden_size)
                                  for n in (1, 2)}, "qwen2")
    return path, model, vector


def test_llama_cpp_steered_by_our_file_equals_the_steered_reference(tmp_path):
    assert llama_build().problem is None, llama_build().problem
    import llama_cpp

    path, model, vector = steered_model(tmp_path, seed=0)
    hidden, layers = model.config.text.hidden_size, model.config.text.n_layers
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


def test_llama_cpp_capture_is_steered_from_block_1_on(tmp_path):
    """block_states with a steering table: block 0's output as unsteered (never steered),
    block N's moved by table row N, both engines' blocks within the layers' tolerance."""
    path, model, vector = steered_model(tmp_path, seed=1)
    hidden, layers = model.config.text.hidden_size, model.config.text.n_layers
    table = Steering.load([(vector, STRENGTH)]).table("qwen2", layers, hidden)
    plain, steered = block_states(path, IDS, layers), block_states(path, IDS, layers,
                                                                    steering=table)
    np.testing.assert_array_equal(steered.blocks[0], plain.blocks[0])
    assert np.abs(steered.blocks[1] - plain.blocks[1]).max() > 0.5 * STRENGTH
    result = llama_layers(path, model, IDS, steering=table)
    assert result.ok and result.steered and result.to_json()["steered"], result.verdict()
    unsteered = llama_layers(path, model, IDS)
    assert not unsteered.steered
    assert result.rows[1].ours != unsteered.rows[1].ours       # the reference steered too
    assert result.rows[1].theirs != unsteered.rows[1].theirs   # and llama.cpp


def test_a_steered_answer_gets_a_steered_second_opinion(demo_05b, tmp_path):
    """The demo model steered by a random vector: llama.cpp steered the same way agrees with
    the steered reference within the cross-check's tolerance; llama.cpp left unsteered
    against the same steered inspection does not (what the second opinion used to say)."""
    model, tokenizer = open_model(demo_05b), load_tokenizer(demo_05b)
    hidden, layers = model.config.text.hidden_size, model.config.text.n_layers
    rng = np.random.default_rng(0)
    directions = {n: rng.standard_normal(hidden) for n in range(1, layers)}
    vector = tmp_path / "random.gguf"
    write_control_vector(vector, {n: d / np.linalg.norm(d) for n, d in directions.items()},
                         "qwen2")
    table = Steering.load([(vector, 4.0)]).table("qwen2", layers, hidden)
    piece = tokenizer.id_to_piece
    prompt = PromptTokens.text(tokenizer.encode(TEXT))
    steered = inspect_context(model, prompt, piece, steering=table)
    opinion = second_opinion(demo_05b, steered, piece)
    assert opinion.steered and opinion.to_json()["steered"]
    assert opinion.same_top1, (opinion.ours, opinion.theirs)
    assert opinion.delta.max() < TOLERANCE, opinion.delta
    unsteered = second_opinion(demo_05b, dataclasses.replace(steered, steering=None), piece)
    assert not unsteered.steered
    assert unsteered.delta.max() > 4 * TOLERANCE, unsteered.delta


def test_cli_inspect_and_debug_run_steered(tmp_path, capsys):
    """`--control-vector` on `lantern inspect --llama` and `lantern debug --llama-layers`:
    both engines steered (the lens and the blocks move, llama.cpp still agrees); a vector
    of another width is refused with the reason."""
    path = write_model(tmp_path / "m.gguf", "qwen2", TextSpec(layers=3, vocab=400), seed=2)
    hidden = open_model(path).config.text.hidden_size
    rng = np.random.default_rng(1)
    vector = tmp_path / "v.gguf"
    write_control_vector(vector, {n: rng.standard_normal(hidden) for n in (1, 2)}, "qwen2")
    steer = ["--control-vector", f"{vector}:{STRENGTH}"]

    def run(*args: str) -> dict:
        assert main([*args, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    inspect = ["inspect", str(path), "Hello world", "--raw", "--llama"]
    plain, steered = run(*inspect), run(*inspect, *steer)
    assert not plain["second_opinion"]["steered"] and steered["second_opinion"]["steered"]
    assert steered["second_opinion"]["max_delta_logprob"] < TOLERANCE
    assert plain["lens"][-1] != steered["lens"][-1]
    debug = ["debug", str(path), "Hello world", "--raw", "--llama-layers"]
    plain, steered = run(*debug), run(*debug, *steer)
    assert steered["steered"] and steered["first_off"] is None, steered["verdict"]
    assert plain["layers"][0] == steered["layers"][0]          # block 0 is never steered
    assert plain["layers"][1]["ours"] != steered["layers"][1]["ours"]

    write_control_vector(tmp_path / "wide.gguf", {1: np.ones(hidden + 1)}, "qwen2")
    assert main([*debug, "--control-vector", str(tmp_path / "wide.gguf")]) == 1
    assert f"{hidden + 1} values per layer" in capsys.readouterr().err
    assert main(["debug", str(path), "Hi", *steer]) == 2
    assert "--llama-layers" in capsys.readouterr().err
