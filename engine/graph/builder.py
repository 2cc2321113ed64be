"""A small ONNX graph builder whose weights never enter the protobuf.

Large initializers are written into the model as *external* tensors (a location, offset
and length in a weights file that need not exist) and kept here as numpy arrays; a
session gets them as OrtValues through ``SessionOptions.add_external_initializers``, so a
model of any size is built without the 2 GB protobuf limit and without a serialized copy
of its weights. ``save_model`` writes the same model to disk: the offsets already point
into the weights file it writes next to it.

Weights read in place (``add_file_bytes``: a GGUF tensor's bytes for lantern.GgufMatMul)
never leave the model file: the graph holds an empty initializer tagged with where the bytes
lie, and a session gets a view of the memory-mapped file through
``SessionOptions.add_initializer``, which ONNX Runtime uses without a copy (measured,
BENCHMARKS.md). A saved model therefore holds no copy of them either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from numpy.typing import DTypeLike
from onnx import TensorProto, helper, numpy_helper

from engine import native

OPSET = 21
MS_OPSET = 1
IR_VERSION = 10        # onnx.helper stamps a newer one than ONNX Runtime accepts
INLINE_BYTES = 1024    # smaller initializers stay inside the model (shape constants and such)
ALIGN = 65536          # offsets in the weights file: mmap-able on every platform
FILE_BYTES = "lantern.file_bytes"  # doc_string tag of an in-place weight: "<tag> offset length"

Dims = Sequence[int | str | None]
ValueSpec = onnx.ValueInfoProto | tuple[str, DTypeLike, Dims | None]


class GraphBuilder:
    """Collects nodes and initializers; every name it returns is unique in the graph."""

    def __init__(self, name: str = "lantern"):
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.external: dict[str, np.ndarray] = {}  # name -> array, in weights-file order
        self.in_place: dict[str, np.ndarray] = {}  # name -> a view of the model file's bytes
        self._names: set[str] = set()
        self._file_size = 0

    @property
    def weights_file(self) -> str:
        return f"{self.name}.weights"

    def unique(self, base: str) -> str:
        """Claim ``base`` or, if taken, the first free ``base_1``, ``base_2``..."""
        name, i = base, 0
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name

    def add_initializer(self, name: str, array: np.ndarray) -> str:
        """Add a constant; arrays of INLINE_BYTES or more stay numpy, outside the protobuf."""
        name = self.unique(name)
        array = np.ascontiguousarray(array)
        if array.nbytes < INLINE_BYTES:
            self.initializers.append(numpy_helper.from_array(array, name))
            return name
        offset = -(-self._file_size // ALIGN) * ALIGN
        tensor = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype),
                             dims=array.shape, data_location=TensorProto.EXTERNAL)
        for key, value in (("location", self.weights_file), ("offset", str(offset)),
                           ("length", str(array.nbytes))):
            tensor.external_data.add(key=key, value=value)
        self.initializers.append(tensor)
        self.external[name] = array
        self._file_size = offset + array.nbytes
        return name

    def add_file_bytes(self, name: str, view: np.ndarray) -> str:
        """Add bytes of a memory-mapped file (a GGUF tensor) that the session reads where
        they lie; the graph records only their offset and length in that file."""
        name = self.unique(name)
        whole, offset = mapped_bytes(view)
        tensor = numpy_helper.from_array(np.zeros(0, np.uint8), name)
        tensor.doc_string = f"{FILE_BYTES} {offset} {view.nbytes}"
        self.initializers.append(tensor)
        self.in_place[name] = whole[offset:offset + view.nbytes]
        return name

    def add_node(self, op_type: str, inputs: Sequence[str],
                 outputs: Sequence[str] | int | None = None, domain: str = "",
                 **attrs) -> list[str]:
        """Append a node; ``outputs`` are base names (made unique) or a count (auto-named).

        An empty string in ``inputs`` skips an optional input. Attributes set to None are
        left out, so optional attributes can be passed through unconditionally.
        """
        if outputs is None:
            outputs = 1
        if isinstance(outputs, int):
            outputs = [op_type] * outputs
        names = [self.unique(base) for base in outputs]
        attrs = {key: value for key, value in attrs.items() if value is not None}
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=names[0],
                                           domain=domain or None, **attrs))
        return names

    def make_model(self, inputs: Sequence[ValueSpec],
                   outputs: Sequence[ValueSpec]) -> onnx.ModelProto:
        """The model (opset 21 + com.microsoft 1, + lantern 1 when it runs GgufMatMul; IR 10);
        inputs/outputs as ValueInfoProto or (name, dtype, shape) with None / strings for
        dynamic dims."""
        graph_inputs = [value_info(spec) for spec in inputs]
        for vi in graph_inputs:
            if vi.name in self._names:
                raise ValueError(f"graph input {vi.name!r} is also a node output or initializer")
        graph = helper.make_graph(self.nodes, self.name, graph_inputs,
                                  [value_info(spec) for spec in outputs],
                                  initializer=self.initializers)
        opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", MS_OPSET)]
        if any(node.domain == native.DOMAIN for node in self.nodes):
            opsets.append(helper.make_opsetid(native.DOMAIN, 1))
        model = helper.make_model(graph, opset_imports=opsets)
        model.ir_version = IR_VERSION
        return model


def value_info(spec: ValueSpec) -> onnx.ValueInfoProto:
    if isinstance(spec, onnx.ValueInfoProto):
        return spec
    name, dtype, shape = spec
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def mapped_bytes(view: np.ndarray) -> tuple[np.ndarray, int]:
    """The whole buffer ``view`` was cut from (a memory-mapped file), as uint8 bytes, and
    the offset at which ``view`` starts in it."""
    root = view
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.base is None or not view.flags.c_contiguous:
        raise ValueError("in-place bytes must be a contiguous view of a mapped buffer")
    whole = np.frombuffer(root.base, np.uint8)
    return whole, view.ctypes.data - whole.ctypes.data


def in_place_views(model: onnx.ModelProto, file_bytes: np.ndarray) -> dict[str, np.ndarray]:
    """The in-place weights of ``model`` (add_file_bytes), cut again from ``file_bytes``:
    the same views a build made, for a model read back from disk."""
    views = {}
    for tensor in model.graph.initializer:
        tag, *place = tensor.doc_string.split() or [""]
        if tag == FILE_BYTES:
            offset, length = map(int, place)
            views[tensor.name] = file_bytes[offset:offset + length]
    return views


def feed_in_place(options: ort.SessionOptions,
                  in_place: Mapping[str, np.ndarray]) -> list[ort.OrtValue]:
    """Hand ``in_place`` to sessions made with ``options`` without a copy. ONNX Runtime
    reads the memory as long as the session lives and does not own it: the caller keeps the
    returned values (which keep the views, and so the mapping, alive) at least that long."""
    values = [ort.OrtValue.ortvalue_from_numpy(view) for view in in_place.values()]
    for name, value in zip(in_place, values, strict=True):
        options.add_initializer(name, value)
    return values


def create_session(model: onnx.ModelProto, external: Mapping[str, np.ndarray],
                   options: ort.SessionOptions | None = None,
                   providers: Sequence[str] = ("CPUExecutionProvider",)) -> ort.InferenceSession:
    """An InferenceSession fed the external weights from memory.

    ONNX Runtime copies them while the session is created (measured: a 256 MB initializer
    adds 256 MB; changing the numpy array afterwards changes nothing), so the arrays may
    be dropped once this returns. ``options`` is consumed: it holds the weights. In-place
    weights are not among them: see ``feed_in_place``.
    """
    options = options or ort.SessionOptions()
    if external:
        values = [ort.OrtValue.ortvalue_from_numpy(array) for array in external.values()]
        options.add_external_initializers(list(external), values)
    return ort.InferenceSession(model.SerializeToString(), options, providers=list(providers))


def save_model(model: onnx.ModelProto, external: Mapping[str, np.ndarray], path: Path) -> None:
    """Write ``path`` and, beside it, the weights file its external tensors point into."""
    path = Path(path)
    path.write_bytes(model.SerializeToString())
    places = {t.name: {e.key: e.value for e in t.external_data}
              for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL}
    if not places:
        return
    (location,) = {place["location"] for place in places.values()}
    with open(path.parent / location, "wb") as f:
        for name, array in external.items():
            f.seek(int(places[name]["offset"]))
            f.write(array.reshape(-1).view(np.uint8))
