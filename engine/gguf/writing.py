"""Writing GGUF files with gguf-py's ``GGUFWriter``: a metadata value by its Python type,
and the three sections written out in order. Lantern writes control vectors and the
llama.cpp layout of a one-file model; the tests write their synthetic models."""

from __future__ import annotations

from gguf import GGUFWriter


def add_value(writer: GGUFWriter, key: str, value: object) -> None:
    """``value`` as GGUF stores it: bool, uint32, float32, string, else an array."""
    if isinstance(value, bool):
        writer.add_bool(key, value)
    elif isinstance(value, int):
        writer.add_uint32(key, value)
    elif isinstance(value, float):
        writer.add_float32(key, value)
    elif isinstance(value, str):
        writer.add_string(key, value)
    else:
        writer.add_array(key, list(value))  # type: ignore[call-overload]


def write_out(writer: GGUFWriter) -> None:
    """Header, metadata and tensors to the writer's file, then close it."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
