"""Control vectors in llama.cpp's GGUF format, and their weighted sum (steering).

The format: ``general.architecture = "controlvector"``, ``controlvector.model_hint`` (the
architecture it was made on), ``controlvector.layer_count``, and one F32 tensor
``direction.N`` of n_embd values per layer. llama.cpp adds direction N, times the
vector's strength, to the residual stream after block N (0-based), for N from 1 to
n_layers - 1: the embeddings and block 0's output are never steered. Several vectors (and
several tensors of one file for the same layer) add up, each times its own strength.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter

from engine.errors import ControlVectorMismatch, CorruptModel
from engine.gguf.reader import read_gguf
from engine.gguf.writing import write_out

ARCHITECTURE = "controlvector"
_DIRECTION = re.compile(r"direction\.(\d+)")


@dataclass(frozen=True)
class ControlVector:
    """One file's directions by layer (N of ``direction.N``, 1-based as in the file)."""

    path: Path
    model_hint: str
    directions: Mapping[int, np.ndarray]  # layer -> float32 [n_embd]

    @property
    def n_embd(self) -> int:
        return len(next(iter(self.directions.values())))

    @property
    def name(self) -> str:
        return self.path.stem


def read_control_vector(path: str | Path) -> ControlVector:
    """A control-vector GGUF; CorruptModel when it is not one (what llama.cpp refuses too:
    a tensor not named direction.N with N >= 1, not F32, not 1-D, widths that differ)."""
    path = Path(path)
    file = read_gguf(path)
    arch = file.metadata.get("general.architecture")
    if arch != ARCHITECTURE:
        raise CorruptModel(f"{path}: not a control vector (general.architecture is {arch!r}, "
                           f"expected {ARCHITECTURE!r})")
    directions: dict[int, np.ndarray] = {}
    for name, tensor in file.tensors.items():
        match = _DIRECTION.fullmatch(name)
        if match is None or int(match[1]) == 0:
            raise CorruptModel(f"{path}: tensor {name!r} is not a direction.N with N >= 1")
        if tensor.ggml_type != GGMLQuantizationType.F32 or len(tensor.shape) != 1:
            raise CorruptModel(f"{path}: {name} must be a 1-D F32 tensor, it is "
                               f"{tensor.ggml_type.name} {list(tensor.shape)}")
        layer = int(match[1])
        value = np.array(tensor.dequantize(), np.float32).reshape(-1)
        if directions and len(value) != len(next(iter(directions.values()))):
            raise CorruptModel(f"{path}: {name} has {len(value)} values, the other "
                               "directions another number")
        directions[layer] = directions.get(layer, 0) + value
    if not directions:
        raise CorruptModel(f"{path}: holds no direction tensors")
    return ControlVector(path, str(file.metadata.get(f"{ARCHITECTURE}.model_hint", "")),
                         directions)


def write_control_vector(path: str | Path, directions: Mapping[int, np.ndarray],
                         model_hint: str) -> None:
    """Write ``directions`` (layer N -> [n_embd]) as llama.cpp writes and reads them."""
    writer = GGUFWriter(str(path), arch=ARCHITECTURE)
    writer.add_string(f"{ARCHITECTURE}.model_hint", model_hint)
    writer.add_int32(f"{ARCHITECTURE}.layer_count", len(directions))
    for layer in sorted(directions):
        writer.add_tensor(f"direction.{layer}", np.asarray(directions[layer], np.float32))
    write_out(writer)


def parse_spec(spec: str) -> tuple[Path, float]:
    """``FILE[:STRENGTH]`` (strength 1 when left out, as llama.cpp's --control-vector)."""
    path, sep, strength = spec.rpartition(":")
    if sep:
        try:
            return Path(path), float(strength)
        except ValueError:
            pass  # a ':' inside the file name
    return Path(spec), 1.0


@dataclass(frozen=True)
class Steering:
    """Control vectors with a strength each (``--control-vector FILE:STRENGTH``)."""

    vectors: tuple[tuple[ControlVector, float], ...] = ()

    @classmethod
    def load(cls, specs: list[tuple[Path, float]]) -> Steering:
        """The files read, each with its strength."""
        return cls(tuple((read_control_vector(path), strength) for path, strength in specs))

    def with_strength(self, index: int, strength: float) -> Steering:
        """The same vectors, vector ``index`` at another strength (a slider moved)."""
        vectors = list(self.vectors)
        vectors[index] = (vectors[index][0], strength)
        return Steering(tuple(vectors))

    def __bool__(self) -> bool:
        return any(strength != 0 for _, strength in self.vectors)

    @property
    def label(self) -> str:
        """What steers, said in one line: "calm x0.8 + terse x-1"."""
        return " + ".join(f"{v.name} x{strength:g}" for v, strength in self.vectors
                          if strength != 0)

    def table(self, architecture: str, n_layers: int, hidden_size: int) -> np.ndarray:
        """What each block's output gets added, float32 [n_layers, hidden_size] (row i:
        after block i; row 0 stays zero). ControlVectorMismatch for another model's vector."""
        table = np.zeros((n_layers, hidden_size), np.float32)
        for vector, strength in self.vectors:
            check_fits(vector, architecture, n_layers, hidden_size)
            for layer, direction in vector.directions.items():
                table[layer] += np.float32(strength) * direction
        return table


def check_fits(vector: ControlVector, architecture: str, n_layers: int,
               hidden_size: int) -> None:
    """A vector made on another architecture, width or depth cannot steer this model."""
    if vector.model_hint and vector.model_hint != architecture:
        raise ControlVectorMismatch(f"{vector.path.name} was made for a {vector.model_hint} "
                                    f"model, this one is {architecture}")
    if vector.n_embd != hidden_size:
        raise ControlVectorMismatch(f"{vector.path.name} has {vector.n_embd} values per layer, "
                                    f"this model's residual stream {hidden_size}")
    deepest = max(vector.directions)
    if deepest >= n_layers:
        raise ControlVectorMismatch(f"{vector.path.name} steers layer {deepest}, this model "
                                    f"has layers 1..{n_layers - 1} to steer")
