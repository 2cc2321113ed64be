"""Ollama's one-file Qwen2.5-VL (arch ``qwen25vl``, tower inside) re-laid as llama.cpp's
pair: a ``qwen2vl`` text GGUF and a clip mmproj (``clip.projector_type =
"qwen2.5vl_merger"``), the files llama.cpp and its libmtmd load.

The tensors are copied byte for byte (same types, no re-quantization), renamed as
llama.cpp's converter names them (the inverse of ``canonical_projector_tensors``); the
projector's ``clip.*`` keys are the ones that converter writes, from the parsed tower.
Only llama.cpp reads these files: they live in Lantern's cache, keyed by the model file's
blob digest, never in the user's store, and are written to a temporary folder first so a
crash leaves no half-written pair.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from itertools import pairwise
from pathlib import Path

from gguf import GGUFReader, GGUFValueType, GGUFWriter

from engine.errors import UnsupportedModel
from engine.gguf.config import VisionConfig
from engine.gguf.model import GGUFModel
from engine.gguf.reader import TensorInfo
from engine.gguf.vision_config import CLIP_TO_CANONICAL, PROJECTOR_TYPE
from engine.gguf.writing import add_value, write_out
from engine.paths import cache_dir
from engine.vision.preprocess import IMAGE_MEAN, IMAGE_STD

INLINE_ARCH = "qwen25vl"
TEXT_ARCH = "qwen2vl"
IMAGE_SIZE = 560        # what llama.cpp's converter writes when the HF config has none
PAIR_FORMAT = 1         # a change to what is written here: raise it, older pairs are not reused
_CLIP_NAMES = {canonical: stored for stored, canonical in CLIP_TO_CANONICAL.items()}
_RENAMED_KEYS = {f"{INLINE_ARCH}.rope.mrope_section": f"{TEXT_ARCH}.rope.dimension_sections"}


def convertible(model: GGUFModel) -> bool:
    """Whether ``model`` is a one-file Qwen2.5-VL this module re-lays for llama.cpp."""
    return model.projector_path is None and model.config.architecture == INLINE_ARCH


def llama_text(model: GGUFModel) -> Path:
    """The text model file llama.cpp loads for ``model`` (its own, or the re-laid one)."""
    return llama_pair(model)[0] if convertible(model) else model.path


def llama_pair(model: GGUFModel) -> tuple[Path, Path]:
    """The (text, projector) files of ``model`` in llama.cpp's layout, from the cache or
    written there now."""
    if not convertible(model):
        raise UnsupportedModel(f"{model.path}: not a one-file Qwen2.5-VL model")
    folder = cache_dir() / "llama-pairs" / f"{PAIR_FORMAT}-{_key(model.path)}"
    files = (folder / "text.gguf", folder / "mmproj.gguf")
    if all(f.is_file() for f in files):
        return files
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".writing-"))
    try:
        write_text(model, tmp / files[0].name)
        write_projector(model, tmp / files[1].name)
        shutil.rmtree(folder, ignore_errors=True)   # a pair left incomplete
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)      # gone already when the pair is in place
    return files


def _key(path: Path) -> str:
    """The blob's digest (Ollama names blobs ``sha256-<hex>``), else one of its path,
    size and modification time."""
    if path.name.startswith("sha256-"):
        return path.name
    stat = path.stat()
    text = f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    return "path-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def write_text(model: GGUFModel, out: Path) -> None:
    """The text model as llama.cpp's ``qwen2vl``: every key but the tower's, renamed."""
    writer = GGUFWriter(str(out), TEXT_ARCH)
    for field in GGUFReader(model.path).fields.values():
        name = _text_key(field.name)
        if name is None:
            continue
        value = field.contents()
        if name == _RENAMED_KEYS[f"{INLINE_ARCH}.rope.mrope_section"]:
            value = [*value, 0][:4]                 # llama.cpp keeps four sections
        sub = field.types[-1] if field.types[0] == GGUFValueType.ARRAY else None
        writer.add_key_value(name, value, field.types[0], sub_type=sub)
    for name, tensor in model.tensors.items():
        if not name.startswith("v."):
            _add(writer, name, tensor)
    write_out(writer)


def _text_key(name: str) -> str | None:
    """The key's name in the text file (None: not copied)."""
    if name.startswith("GGUF.") or name == "general.architecture" or name.startswith(
            f"{INLINE_ARCH}.vision."):
        return None
    if name in _RENAMED_KEYS:
        return _RENAMED_KEYS[name]
    if name.startswith(INLINE_ARCH + "."):
        return TEXT_ARCH + name[len(INLINE_ARCH):]
    return name


def write_projector(model: GGUFModel, out: Path) -> None:
    """The tower as llama.cpp's converter writes a Qwen2.5-VL mmproj."""
    vision = model.config.vision
    assert vision is not None                       # convertible() models have one
    writer = GGUFWriter(str(out), "clip")
    for key, value in projector_keys(vision, model.path).items():
        add_value(writer, key, value)
    for name, tensor in model.tensors.items():
        if name.startswith("v."):
            _add(writer, _CLIP_NAMES.get(name, name), tensor)
    write_out(writer)


def projector_keys(vision: VisionConfig, path: Path) -> dict[str, object]:
    """The clip.* keys of the mmproj (llama.cpp's converter: MmprojModel, Qwen2VLVisionModel)."""
    p = "clip.vision."
    return {
        "general.type": "mmproj",
        "clip.projector_type": PROJECTOR_TYPE,
        "clip.has_vision_encoder": True,
        "clip.use_silu": True,
        p + "block_count": vision.n_layers,
        p + "embedding_length": vision.hidden_size,
        p + "feed_forward_length": vision.intermediate_size,
        p + "attention.head_count": vision.n_heads,
        p + "attention.layer_norm_epsilon": vision.eps,
        p + "patch_size": vision.patch_size,
        p + "image_size": IMAGE_SIZE,
        p + "projection_dim": vision.out_hidden_size,
        p + "n_wa_pattern": window_pattern(vision.fullatt_block_indexes, path),
        p + "image_mean": list(IMAGE_MEAN),
        p + "image_std": list(IMAGE_STD),
    }


def window_pattern(full: tuple[int, ...], path: Path) -> int:
    """llama.cpp's period of the full-attention blocks (every n-th block, from n-1)."""
    period = full[0] + 1 if full else 0
    if not full or any(b - a != period for a, b in pairwise(full)):
        raise UnsupportedModel(
            f"{path}: full-attention vision blocks {list(full)} are not every n-th block, "
            "the only pattern llama.cpp's projector can state")
    return period


def _add(writer: GGUFWriter, name: str, tensor: TensorInfo) -> None:
    """The tensor's bytes as stored (the writer derives the shape from them and the type)."""
    writer.add_tensor(name, tensor.raw, raw_dtype=tensor.ggml_type)
