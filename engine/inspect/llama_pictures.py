"""llama.cpp's reading of the pictures in an image context, through libmtmd (llama-cpp-python's
``llama_cpp.mtmd_cpp``), for the comparisons with llama.cpp (second opinion, layer by layer).

Lantern's context is the ground truth: its ids and positions, and where each image's rows
lie. Each picture goes to mtmd as Lantern encoded it (its resized pixels,
``engine.vision.preprocess.pixels``), so llama.cpp's own resize is the identity where it can
be. mtmd must make as many tokens of it, on the same grid, wrapped in the tokens the context
holds around it; otherwise the two engines would read different sequences and nothing is
compared (the error names both). llama.cpp's tower rows (with Qwen3-VL's DeepStack features,
as its text model takes them) then enter its text model as embeddings at the context's
positions (engine/inspect/llama_capture.py).

mtmd reads a projector file (llama.cpp's ``mmproj`` layout). A one-file Qwen2.5-VL
(Ollama's layout, the tower inside the model's GGUF) is re-laid as llama.cpp's pair in
Lantern's cache (engine/inspect/llama_pair.py: ``llama_text`` is the text file to load with
it); other one-file towers are refused.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import LanternError, Remedy
from engine.gguf import GGUFModel
from engine.inspect.attention import ImageGrid, image_grids
from engine.inspect.llama_pair import convertible, llama_pair

INSIDE = ("llama.cpp reads pictures from a separate projector file; this model keeps its "
          "vision tower inside its own GGUF, which Lantern re-lays only for Qwen2.5-VL")


class PicturesUnreadable(LanternError):
    """llama.cpp cannot read the context's pictures as Lantern did."""


@dataclass(frozen=True)
class LlamaPictures:
    """What llama.cpp needs to read an image context: the projector and the pictures."""

    projector: Path
    context: PromptTokens
    pixels: tuple[np.ndarray, ...]      # uint8 [H, W, 3] of each image, in order


@dataclass(frozen=True)
class LlamaImage:
    """One image's rows as llama.cpp's tower made them."""

    start: int                          # its first row in the context
    embeds: np.ndarray                  # float32 [n, llama_model_n_embd_inp]
    two_way: bool                       # its rows attend to each other both ways (Gemma 3)


def llama_pictures(model: GGUFModel, context: PromptTokens,
                   pixels: Sequence[np.ndarray]) -> LlamaPictures | None:
    """The pictures of ``context`` for llama.cpp (None when it holds none), or why not."""
    grids = image_grids(context)
    if not grids:
        return None
    if model.projector_path is None and not convertible(model):
        raise PicturesUnreadable(INSIDE, remedy=Remedy.PROJECTOR)
    if len(pixels) != len(grids):
        raise PicturesUnreadable(f"the context holds {len(grids)} image(s) but "
                                 f"{len(pixels)} picture(s) came with it")
    projector = model.projector_path or llama_pair(model)[1]
    return LlamaPictures(projector, context, tuple(pixels))


def read_pictures(model, pictures: LlamaPictures) -> list[LlamaImage]:
    """Every picture through mtmd (``model``: llama.cpp's loaded text model)."""
    import llama_cpp
    from llama_cpp import _logger
    from llama_cpp import mtmd_cpp as mtmd

    mtmd.mtmd_log_set(_logger.llama_log_callback, None)   # llama-cpp-python's log: errors only
    params = mtmd.mtmd_context_params_default()
    params.use_gpu, params.print_timings, params.warmup = False, False, False
    params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED   # as the text model runs
    params.n_threads = os.cpu_count() or 1
    context = mtmd.mtmd_init_from_file(str(pictures.projector).encode(), model, params)
    if not context:
        raise PicturesUnreadable(f"llama.cpp's libmtmd could not load the projector "
                                 f"{pictures.projector}")
    try:
        width = llama_cpp.llama_model_n_embd_inp(model)
        return [_encode(mtmd, context, pictures.context, k, grid, rgb, width)
                for k, (grid, rgb) in enumerate(zip(image_grids(pictures.context),
                                                    pictures.pixels, strict=True))]
    finally:
        mtmd.mtmd_free(context)


def _encode(mtmd, context, prompt: PromptTokens, k: int, grid: ImageGrid, rgb: np.ndarray,
            width: int) -> LlamaImage:
    """Image ``k``'s rows from mtmd, after checking it reads as the context."""
    rgb = np.ascontiguousarray(rgb, np.uint8)
    bitmap = mtmd.mtmd_bitmap_init(rgb.shape[1], rgb.shape[0],
                                   rgb.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)))
    chunks = mtmd.mtmd_input_chunks_init()
    try:
        marker = mtmd.mtmd_default_marker()
        text = mtmd.mtmd_input_text(marker, len(marker), False, True)
        status = mtmd.mtmd_tokenize(context, chunks, ctypes.byref(text),
                                    (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap), 1)
        if status != 0:
            raise PicturesUnreadable(f"llama.cpp's libmtmd could not read image {k + 1} "
                                     f"(mtmd_tokenize returned {status})")
        chunk = _check_place(mtmd, chunks, prompt, k, grid)
        if mtmd.mtmd_encode_chunk(context, chunk) != 0:
            raise PicturesUnreadable(f"llama.cpp's vision tower could not encode image {k + 1}")
        n = grid.height * grid.width
        embeds = np.ctypeslib.as_array(mtmd.mtmd_get_output_embd(context), shape=(n, width))
        return LlamaImage(grid.start, embeds.copy(),
                          bool(mtmd.mtmd_decode_use_non_causal(context, chunk)))
    finally:
        mtmd.mtmd_input_chunks_free(chunks)
        mtmd.mtmd_bitmap_free(bitmap)


def _check_place(mtmd, chunks, prompt: PromptTokens, k: int, grid: ImageGrid):
    """mtmd's image chunk, once its token count, grid and the text chunks around it are
    the context's."""
    parts = [mtmd.mtmd_input_chunks_get(chunks, i)
             for i in range(mtmd.mtmd_input_chunks_size(chunks))]
    kinds = [mtmd.mtmd_input_chunk_get_type(c) for c in parts]
    at = kinds.index(mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE)
    image = mtmd.mtmd_input_chunk_get_tokens_image(parts[at])
    made = mtmd.mtmd_input_chunk_get_n_tokens(parts[at])
    shape = (mtmd.mtmd_image_tokens_get_ny(image), mtmd.mtmd_image_tokens_get_nx(image))
    held = grid.height * grid.width
    if made != held or (shape != (grid.height, grid.width) and 1 not in shape):
        raise PicturesUnreadable(
            f"image {k + 1} is {held} tokens ({grid.height} x {grid.width}) in this context "
            f"but llama.cpp makes {made} ({shape[0]} x {shape[1]}) of the same picture: the "
            "two engines would read different token sequences")
    before = _text(mtmd, parts[:at])
    after = _text(mtmd, parts[at + 1:])
    ids = prompt.ids
    theirs = (before, after)
    ours = ([int(i) for i in ids[max(grid.start - len(before), 0):grid.start]],
            [int(i) for i in ids[grid.stop:grid.stop + len(after)]])
    if theirs != ours:
        raise PicturesUnreadable(f"llama.cpp wraps image {k + 1} in tokens {before} ... "
                                 f"{after}; the context holds {ours[0]} ... {ours[1]}")
    return parts[at]


def _text(mtmd, parts) -> list[int]:
    """The token ids of text chunks, in order."""
    out: list[int] = []
    for chunk in parts:
        n = ctypes.c_size_t()
        tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
        out += [int(tokens[i]) for i in range(n.value)]
    return out
