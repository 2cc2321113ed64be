"""Memory-mapped GGUF parsing: header, metadata and tensor table read once; tensor bytes stay
in the file and are handed out as zero-copy numpy views.

Why not ``gguf.GGUFReader``: it builds two numpy arrays per metadata string, which takes
seconds for a 152k-token vocabulary (measured:
docs/benchmarks-journal.md, 'Figures behind design choices'). This reader walks the
header with ``struct`` and decodes the big string arrays only when someone asks for them.
Every way a file can be short or malformed ends in ``CorruptModel`` naming the file, the
byte offset and what was being read — never a raw struct/numpy error.
"""

from __future__ import annotations

import math
import mmap
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGUF_MAGIC, GGMLQuantizationType, GGUFValueType
from gguf.quants import dequantize

from engine.errors import CorruptModel, UnsupportedModel

_SCALAR_FORMATS = {
    GGUFValueType.UINT8: "<B",
    GGUFValueType.INT8: "<b",
    GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I",
    GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f",
    GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q",
    GGUFValueType.FLOAT64: "<d",
}
_ARRAY_DTYPES = {kind: np.dtype(fmt) for kind, fmt in _SCALAR_FORMATS.items()}
_MAX_DIMS = 4            # GGML_MAX_DIMS
_DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT


@dataclass(frozen=True)
class TensorInfo:
    """One tensor: numpy-order shape (out-first) over the raw bytes in the file."""

    name: str
    ggml_type: GGMLQuantizationType
    shape: tuple[int, ...]      # numpy order: token_embd is (vocab, hidden)
    raw: np.ndarray = field(repr=False, compare=False)  # uint8 [*shape[:-1], row_bytes]
    n_elements: int

    @property
    def n_bytes(self) -> int:
        return int(self.raw.nbytes)

    def dequantize(self) -> np.ndarray:
        """float32 values of ``shape`` (gguf-py's de-quantization is the reference).

        F32 tensors come back as a read-only view of the file, other types as new arrays.
        """
        values = dequantize(self.raw, self.ggml_type)
        return np.asarray(values, dtype=np.float32).reshape(self.shape)


@dataclass(frozen=True)
class _NumericArray:
    offset: int
    dtype: np.dtype
    count: int


@dataclass(frozen=True)
class _StringArray:
    starts: np.ndarray          # uint64 [count]: offset of each string's length prefix
    end: int                    # first byte after the last string


class Metadata(Mapping[str, object]):
    """GGUF key -> Python value, decoding big arrays on first access only.

    ``array(key)`` gives numeric arrays as read-only numpy views (no copy) and string
    arrays as ``list[str]``; ``string_index(key, text)`` finds one string in a string
    array without decoding the rest (used for special-token look-ups).
    """

    def __init__(self, path: Path, buf: mmap.mmap, entries: dict[str, object]) -> None:
        self._path = path
        self._buf = buf
        self._entries = entries
        self._decoded: dict[int, list[str]] = {}   # string arrays by end offset

    def __getitem__(self, key: str) -> object:
        entry = self._entries[key]
        if isinstance(entry, _NumericArray | _StringArray):
            return self._value(key, entry)
        if isinstance(entry, list):  # array of arrays (rare): decode everything
            return [self._value(key, item) for item in entry]
        return entry

    def _value(self, key: str, entry: object) -> object:
        if isinstance(entry, _NumericArray):
            return np.frombuffer(self._buf, entry.dtype, entry.count, entry.offset).tolist()
        if isinstance(entry, _StringArray):
            if entry.end not in self._decoded:
                self._decoded[entry.end] = self._decode_strings(key, entry)
            return self._decoded[entry.end]
        if isinstance(entry, list):
            return [self._value(key, item) for item in entry]
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def array(self, key: str) -> np.ndarray | list[str]:
        """A metadata array: numpy view for numbers, list of str for strings."""
        entry = self._entries[key]
        if isinstance(entry, _NumericArray):
            return np.frombuffer(self._buf, entry.dtype, entry.count, entry.offset)
        if isinstance(entry, _StringArray | list):
            return self._value(key, entry)  # type: ignore[return-value]
        raise TypeError(f"{self._path}: metadata key {key!r} is not an array")

    def array_length(self, key: str) -> int:
        entry = self._entries[key]
        if isinstance(entry, _NumericArray):
            return entry.count
        if isinstance(entry, _StringArray):
            return len(entry.starts)
        if isinstance(entry, list):
            return len(entry)
        raise TypeError(f"{self._path}: metadata key {key!r} is not an array")

    def string_index(self, key: str, text: str) -> int | None:
        """Index of ``text`` in the string array ``key`` (None when absent)."""
        entry = self._entries.get(key)
        if not isinstance(entry, _StringArray) or len(entry.starts) == 0:
            return None
        encoded = text.encode("utf-8")
        needle = struct.pack("<Q", len(encoded)) + encoded
        first = int(entry.starts[0])
        at = self._buf.find(needle, first, entry.end)
        while at != -1:
            index = int(np.searchsorted(entry.starts, at))
            if index < len(entry.starts) and int(entry.starts[index]) == at:
                return index
            at = self._buf.find(needle, at + 1, entry.end)
        return None

    def _decode_strings(self, key: str, entry: _StringArray) -> list[str]:
        buf = self._buf
        out: list[str] = []
        for index, start in enumerate(entry.starts.tolist()):
            (length,) = struct.unpack_from("<Q", buf, start)
            try:
                out.append(buf[start + 8 : start + 8 + length].decode("utf-8"))
            except UnicodeDecodeError as error:
                raise CorruptModel(
                    f"{self._path}: metadata {key}[{index}] is not valid UTF-8 ({error.reason})"
                ) from None
        return out


@dataclass(frozen=True)
class GGUFFile:
    """The parsed table of contents of one GGUF file."""

    path: Path
    version: int
    metadata: Metadata
    tensors: dict[str, TensorInfo]   # names exactly as stored in the file
    alignment: int
    data_offset: int
    size: int


class _Cursor:
    """Bounds-checked reads from the mapped file; running off the end is CorruptModel."""

    def __init__(self, path: Path, buf: mmap.mmap) -> None:
        self.path = path
        self.buf = buf
        self.size = len(buf)
        self.pos = 0

    def need(self, n: int, what: str) -> None:
        if self.pos + n > self.size:
            raise CorruptModel(
                f"{self.path}: file ends at byte {self.size} while reading {what} "
                f"(needs bytes {self.pos}..{self.pos + n}); the download is probably "
                "incomplete — pull or copy the model again"
            )

    def scalar(self, fmt: str, what: str) -> int | float | bool:
        size = struct.calcsize(fmt)
        self.need(size, what)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def u32(self, what: str) -> int:
        return int(self.scalar("<I", what))

    def u64(self, what: str) -> int:
        return int(self.scalar("<Q", what))

    def skip_string(self, what: str) -> None:
        length = self.u64(what)
        self.need(length, what)
        self.pos += length

    def string(self, what: str) -> str:
        start = self.pos
        self.skip_string(what)
        try:
            return self.buf[start + 8 : self.pos].decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorruptModel(
                f"{self.path}: {what} at byte {start} is not valid UTF-8 ({error.reason})"
            ) from None

    def value_type(self, what: str) -> GGUFValueType:
        raw = self.u32(what)
        try:
            return GGUFValueType(raw)
        except ValueError:
            raise CorruptModel(
                f"{self.path}: {what} has unknown value type {raw} at byte {self.pos - 4}"
            ) from None


def read_gguf(path: str | Path) -> GGUFFile:
    """Parse a GGUF file's header and tensor table; tensors stay in the memory map."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            size = path.stat().st_size
            if size == 0:
                raise CorruptModel(f"{path}: file is empty, not a GGUF model")
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise CorruptModel(f"{path}: file does not exist") from None
    except IsADirectoryError:
        raise CorruptModel(f"{path}: is a directory, not a GGUF file") from None
    except PermissionError:
        raise CorruptModel(f"{path}: cannot be read (permission denied)") from None
    cursor = _Cursor(path, buf)

    cursor.need(4, "the GGUF magic")
    magic = struct.unpack_from("<I", buf, 0)[0]
    if magic != GGUF_MAGIC:
        raise CorruptModel(
            f"{path}: not a GGUF file (starts with {bytes(buf[:4])!r}, expected b'GGUF')"
        )
    cursor.pos = 4
    version = cursor.u32("the GGUF version")
    if version & 0xFFFF == 0:
        raise UnsupportedModel(f"{path}: big-endian GGUF files are not supported")
    if version not in (2, 3):
        raise UnsupportedModel(f"{path}: GGUF version {version} is not supported (2 or 3 are)")
    n_tensors = cursor.u64("the tensor count")
    n_keys = cursor.u64("the metadata key count")

    entries: dict[str, object] = {}
    for index in range(n_keys):
        key = cursor.string(f"metadata key #{index}")
        if key in entries:
            raise CorruptModel(f"{path}: metadata key {key!r} appears twice")
        kind = cursor.value_type(f"the type of metadata {key}")
        entries[key] = _read_value(cursor, kind, f"metadata {key}")

    infos = [_read_tensor_info(cursor, index) for index in range(n_tensors)]

    alignment = entries.get("general.alignment", _DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise CorruptModel(f"{path}: general.alignment {alignment!r} is not a power of two")
    data_offset = -(-cursor.pos // alignment) * alignment

    tensors: dict[str, TensorInfo] = {}
    for name, dims, ggml_type, offset in infos:
        if name in tensors:
            raise CorruptModel(f"{path}: tensor {name} appears twice")
        tensors[name] = _tensor(cursor, name, dims, ggml_type, data_offset + offset, alignment)
    return GGUFFile(path, version, Metadata(path, buf, entries), tensors, alignment,
                    data_offset, cursor.size)


def _read_value(cursor: _Cursor, kind: GGUFValueType, what: str) -> object:
    if kind == GGUFValueType.STRING:
        return cursor.string(what)
    if kind == GGUFValueType.ARRAY:
        item_kind = cursor.value_type(f"the item type of {what}")
        count = cursor.u64(f"the length of {what}")
        if item_kind == GGUFValueType.STRING:
            return _skip_strings(cursor, count, what)
        if item_kind == GGUFValueType.ARRAY:
            return [_read_value(cursor, GGUFValueType.ARRAY, f"{what}[{i}]") for i in range(count)]
        dtype = _ARRAY_DTYPES[item_kind]
        cursor.need(count * dtype.itemsize, what)
        entry = _NumericArray(cursor.pos, dtype, count)
        cursor.pos += count * dtype.itemsize
        return entry
    return cursor.scalar(_SCALAR_FORMATS[kind], what)


def _skip_strings(cursor: _Cursor, count: int, what: str) -> _StringArray:
    """Walk ``count`` length-prefixed strings, recording where each starts (hot loop)."""
    cursor.need(count * 8, what)  # every string takes at least its 8-byte length
    starts: list[int] = []
    append = starts.append
    buf, pos, size = cursor.buf, cursor.pos, cursor.size
    unpack = struct.Struct("<Q").unpack_from
    for i in range(count):
        append(pos)
        if pos + 8 > size:
            cursor.pos = pos
            cursor.need(8, f"{what}[{i}]")
        pos += 8 + unpack(buf, pos)[0]
    if count:
        cursor.pos = starts[-1]
        cursor.skip_string(f"{what}[{count - 1}]")
    return _StringArray(np.array(starts, dtype=np.uint64), cursor.pos)


def _read_tensor_info(cursor: _Cursor, index: int) -> tuple[str, list[int], int, int]:
    name = cursor.string(f"the name of tensor #{index}")
    n_dims = cursor.u32(f"the rank of tensor {name}")
    if not 1 <= n_dims <= _MAX_DIMS:
        raise CorruptModel(f"{cursor.path}: tensor {name} claims {n_dims} dimensions (1..4)")
    dims = [cursor.u64(f"the shape of tensor {name}") for _ in range(n_dims)]
    ggml_type = cursor.u32(f"the type of tensor {name}")
    offset = cursor.u64(f"the data offset of tensor {name}")
    return name, dims, ggml_type, offset


def _tensor(
    cursor: _Cursor, name: str, dims: list[int], raw_type: int, start: int, alignment: int
) -> TensorInfo:
    path = cursor.path
    try:
        ggml_type = GGMLQuantizationType(raw_type)
        block_size, type_size = GGML_QUANT_SIZES[ggml_type]
    except (ValueError, KeyError):
        raise UnsupportedModel(
            f"{path}: tensor {name} has GGML type {raw_type}, which Lantern does not know"
        ) from None
    shape = tuple(reversed(dims))  # GGUF lists dims innermost-first
    if shape[-1] % block_size:
        raise CorruptModel(
            f"{path}: tensor {name} ({ggml_type.name}) has rows of {shape[-1]} values, "
            f"not a multiple of the block size {block_size}"
        )
    n_elements = math.prod(shape)
    n_bytes = n_elements // block_size * type_size
    if start % alignment:
        raise CorruptModel(f"{path}: tensor {name} starts at byte {start}, not {alignment}-aligned")
    if start + n_bytes > cursor.size:
        raise CorruptModel(
            f"{path}: file ends at byte {cursor.size} but tensor {name} needs bytes "
            f"{start}..{start + n_bytes}; the download is probably incomplete — "
            "pull or copy the model again"
        )
    byte_shape = (*shape[:-1], shape[-1] // block_size * type_size)
    raw = np.frombuffer(cursor.buf, np.uint8, n_bytes, start).reshape(byte_shape)
    return TensorInfo(name, ggml_type, shape, raw, n_elements)
