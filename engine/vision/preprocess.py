"""Image -> Qwen2-VL pixel rows, value for value as HF's Pillow image processor.

Preprocessing is part of correctness: a different resize filter alone changed the top-1
token of an image prompt (ARCHITECTURE.md §6). So this module follows transformers'
`Qwen2VLImageProcessorPil` step by step: alpha composited over white, `smart_resize` to a
multiple of 28, Pillow bicubic, rescale in float64 then float32, normalise in float32,
frame duplicated for the temporal patch, patches laid out in merge-block order.

One deliberate difference: 16-bit grayscale is scaled to 8 bits (high byte, as Pillow's
own 16-bit RGB decoding does); HF's `convert("RGB")` clips it to 255, which turns most
16-bit images white.
"""

import hashlib
import io
import math
import struct
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from engine.errors import ImageError
from engine.gguf.config import VisionConfig

PATCH_SIZE = 14
MERGE_SIZE = 2
TEMPORAL_PATCH_SIZE = 2
MIN_PIXELS = 56 * 56
MAX_PIXELS = 2_097_152  # Ollama's cap for qwen2.5vl; HF's default is 12,845,056
MAX_ASPECT_RATIO = 200
# Largest image decoded at all (decompression-bomb guard): 100 megapixels, roughly
# 12000x8000, is more than a phone's main camera writes.
MAX_IMAGE_PIXELS = 100_000_000
# OpenAI CLIP statistics, the ones Qwen2-VL was trained with.
IMAGE_MEAN = (0.48145466, 0.4578275, 0.40821073)
IMAGE_STD = (0.26862954, 0.26130258, 0.27577711)
# Qwen3-VL's processor (its preprocessor config, which neither GGUF layout records):
# at least 65,536 pixels (size.shortest_edge), statistics 0.5
QWEN3VL_MIN_PIXELS = 65_536
QWEN3VL_MEAN = QWEN3VL_STD = (0.5, 0.5, 0.5)

_SIXTEEN_BIT_MODES = frozenset({"I", "I;16", "I;16L", "I;16B", "I;16N"})


@dataclass(frozen=True)
class ImageInput:
    """One image ready for the vision tower."""

    pixel_values: np.ndarray = field(repr=False)  # float32 [gh*gw, C*T*P*P], merge-block order
    #                                               (SigLIP: [gh*gw, C*P*P], raster order)
    grid: tuple[int, int, int]  # (t, gh, gw) in patches
    digest: str  # sha256 of the resized pixels and layout: the key for cached embeddings
    merge: int = MERGE_SIZE  # one prompt token per merge x merge patches (SigLIP: the pool)
    raster: bool = False     # rows in raster order, one frame (SigLIP) instead of merge blocks
    patch_size: int = PATCH_SIZE  # the layout and statistics it was made with (``pixels``)
    mean: tuple[float, float, float] = IMAGE_MEAN
    std: tuple[float, float, float] = IMAGE_STD

    @property
    def n_tokens(self) -> int:
        """Number of `<|image_pad|>` (Gemma 3: `<image_soft_token>`) tokens this image takes
        in a prompt: one per merged (pooled) cell."""
        t, gh, gw = self.grid
        return t * gh * gw // (self.merge * self.merge)


def load_image(source: Path | str | bytes) -> Image.Image:
    """Decode a file or in-memory image into an upright RGB Pillow image.

    EXIF orientation applied, transparency composited over white, animated images give
    their first frame. Anything that cannot be used raises ImageError naming the image.
    """
    if isinstance(source, bytes):
        name, data = f"the pasted image ({len(source):,} bytes)", source
    else:
        name = str(source)
        try:
            data = Path(source).read_bytes()
        except OSError as e:
            raise ImageError(f"cannot read image {name}: {e.strerror or e}") from e

    try:
        with warnings.catch_warnings():
            # Our own MAX_IMAGE_PIXELS check below decides; Pillow's warning would be noise.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:
        raise ImageError(f"{name} is too large to decode safely ({e}); downscale it first") from e
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise ImageError(
            f"{name} is not an image Lantern can read ({e}); "
            "use a PNG, JPEG, WebP, GIF, BMP or TIFF file"
        ) from e

    _check_size(name, *image.size)
    if image.width * image.height > MAX_IMAGE_PIXELS:
        raise ImageError(
            f"{name} is {image.width}x{image.height} = {image.width * image.height:,} pixels, "
            f"more than the {MAX_IMAGE_PIXELS:,} Lantern decodes (decompression-bomb guard); "
            "downscale it first"
        )
    try:
        image.load()  # decodes frame 0 only
        image = ImageOps.exif_transpose(image)
    except (OSError, SyntaxError, ValueError, EOFError, struct.error) as e:
        raise ImageError(f"{name} is truncated or damaged ({e}); re-save or re-download it") from e
    return to_rgb(image)


def to_rgb(image: Image.Image) -> Image.Image:
    """RGB with transparency composited over white, as HF's `convert_to_rgb` does."""
    if image.mode in _SIXTEEN_BIT_MODES:
        high_byte = np.asarray(image, dtype=np.int64).clip(0, 65535) >> 8
        image = Image.fromarray(high_byte.astype(np.uint8), mode="L")
    if "A" in image.getbands() or image.info.get("transparency") is not None:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")


def smart_resize(
    height: int,
    width: int,
    factor: int = PATCH_SIZE * MERGE_SIZE,
    min_pixels: int = MIN_PIXELS,
    max_pixels: int = MAX_PIXELS,
) -> tuple[int, int]:
    """Target (height, width): multiples of `factor`, area within [min_pixels, max_pixels],
    aspect ratio kept as closely as the grid allows. Same arithmetic as HF's (Python's
    banker's `round`, floor when shrinking, ceil when growing)."""
    _check_size("the image", width, height)
    new_h = round(height / factor) * factor
    new_w = round(width / factor) * factor
    if new_h * new_w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        new_h = max(factor, math.floor(height / beta / factor) * factor)
        new_w = max(factor, math.floor(width / beta / factor) * factor)
    elif new_h * new_w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        new_h = math.ceil(height * beta / factor) * factor
        new_w = math.ceil(width * beta / factor) * factor
    return new_h, new_w


def preprocess(
    image: Image.Image | Path | str | bytes,
    *,
    max_pixels: int = MAX_PIXELS,
    min_pixels: int = MIN_PIXELS,
    patch_size: int = PATCH_SIZE,
    merge_size: int = MERGE_SIZE,
    temporal_patch_size: int = TEMPORAL_PATCH_SIZE,
    mean: tuple[float, float, float] = IMAGE_MEAN,
    std: tuple[float, float, float] = IMAGE_STD,
) -> ImageInput:
    """Resize, normalise and patchify one image (a Pillow image, or a file to load)."""
    if not isinstance(image, Image.Image):
        image = load_image(image)
    if max_pixels < min_pixels:
        raise ImageError(f"max_pixels {max_pixels:,} is below min_pixels {min_pixels:,}; raise it")
    image = to_rgb(image)
    height, width = smart_resize(
        image.height, image.width, patch_size * merge_size, min_pixels, max_pixels
    )
    resized = image.resize((width, height), Image.Resampling.BICUBIC)
    rgb = np.asarray(resized, dtype=np.uint8)  # [H, W, C]
    x = normalise(rgb, mean, std)  # [H, W, C]

    frames = np.broadcast_to(x[None], (temporal_patch_size, *x.shape))  # frame repeated
    return temporal_patch(frames, rgb.tobytes(), patch_size, merge_size, mean, std)


def temporal_patch(frames: np.ndarray, rgb: bytes, patch_size: int, merge_size: int,
                   mean: tuple[float, float, float], std: tuple[float, float, float]
                   ) -> ImageInput:
    """Normalised frames float32 [T, H, W, C] (one temporal patch: an image's frame
    repeated, or consecutive video frames) -> patch rows in merge-block order, each row
    C x T x P x P as HF's patchify lays them out. ``rgb``: the resized pixels, hashed."""
    t, height, width, c = frames.shape
    gh, gw = height // patch_size, width // patch_size
    bh, bw, m, p = gh // merge_size, gw // merge_size, merge_size, patch_size
    x = frames.reshape(t, bh, m, p, bw, m, p, c)  # [T, bh, mh, py, bw, mw, px, C]
    x = x.transpose(1, 4, 2, 5, 7, 0, 3, 6)       # [bh, bw, mh, mw, C, T, py, px]
    pixel_values = np.ascontiguousarray(x.reshape(gh * gw, c * t * p * p))

    key = hashlib.sha256(rgb)
    key.update(repr((frames.shape, patch_size, merge_size, mean, std)).encode())
    return ImageInput(pixel_values=pixel_values, grid=(1, gh, gw), digest=key.hexdigest(),
                      merge=merge_size, patch_size=patch_size, mean=mean, std=std)


def preprocess_for(vision: VisionConfig | None, image: Image.Image | Path | str | bytes,
                   max_pixels: int = MAX_PIXELS) -> ImageInput:
    """``image`` as the model's own processor prepares it: Qwen3-VL's (patches of its
    patch size, at least QWEN3VL_MIN_PIXELS, statistics 0.5), else Qwen2.5-VL's."""
    if vision is not None and vision.tower == "qwen3vl":
        return preprocess(image, max_pixels=max(max_pixels, QWEN3VL_MIN_PIXELS),
                          min_pixels=QWEN3VL_MIN_PIXELS, patch_size=vision.patch_size,
                          merge_size=vision.spatial_merge_size, mean=QWEN3VL_MEAN,
                          std=QWEN3VL_STD)
    return preprocess(image, max_pixels=max_pixels)


def normalise(rgb: np.ndarray, mean: tuple[float, float, float],
              std: tuple[float, float, float]) -> np.ndarray:
    """uint8 [H, W, C] -> float32, HF's dtype path: rescale in float64, store float32,
    normalise in float32."""
    x = (rgb.astype(np.float64) * (1 / 255)).astype(np.float32)
    return (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)


def _check_size(name: str, width: int, height: int) -> None:
    if width <= 0 or height <= 0:
        raise ImageError(f"{name} has zero size ({width}x{height}); use a non-empty image")
    ratio = max(width, height) / min(width, height)
    if ratio > MAX_ASPECT_RATIO:
        raise ImageError(
            f"{name} is {width}x{height}, an aspect ratio of {ratio:.0f}:1; the vision model "
            f"accepts at most {MAX_ASPECT_RATIO}:1, so crop or pad it"
        )


def pixels(image: ImageInput) -> np.ndarray:
    """The picture the model saw (resized, before normalising): uint8 [H, W, 3], undoing
    ``preprocess``'s layout, so inspection draws attention over exactly these pixels."""
    t, gh, gw = image.grid
    p = image.patch_size
    if image.raster:
        x = image.pixel_values.reshape(gh, gw, 3, p, p).transpose(0, 3, 1, 4, 2)
    else:
        bh, bw, m = gh // image.merge, gw // image.merge, image.merge
        x = image.pixel_values.reshape(bh, bw, m, m, 3, -1, p, p)[:, :, :, :, :, 0]
        x = x.transpose(0, 2, 5, 1, 3, 6, 4)
    x = x.reshape(gh * p, gw * p, 3)  # [H, W, C]
    x = x * np.asarray(image.std, np.float32) + np.asarray(image.mean, np.float32)
    return np.clip(np.rint(x * 255), 0, 255).astype(np.uint8)
