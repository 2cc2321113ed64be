"""Animated image -> Qwen3-VL video input, as transformers' Qwen3VLVideoProcessor and
Qwen3VLProcessor define it.

Frames are sampled at 2 per second (at least 4, at most 768, never more than the file
has), resized together so that all frames share one size whose total pixel count lies in
the processor's bounds, and paired: every temporal patch holds two consecutive sampled
frames (the last repeated when the count is odd). The tower reads each temporal patch as
one picture; the prompt shows each as ``<t seconds><|vision_start|>pads<|vision_end|>``,
``t`` the mean time of its two frames.

Sources are what Pillow decodes without a new dependency: animated GIF, WebP and PNG
(APNG). One deliberate difference from HF: frames are resized with Pillow's bicubic, as
images are, where HF's video processor uses torchvision's.
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
from PIL import Image, UnidentifiedImageError

from engine.errors import ImageError
from engine.gguf.config import VisionConfig
from engine.vision.preprocess import (
    MAX_ASPECT_RATIO,
    MAX_IMAGE_PIXELS,
    QWEN3VL_MEAN,
    QWEN3VL_STD,
    ImageInput,
    normalise,
    pixels,
    temporal_patch,
    to_rgb,
)

# Qwen3VLVideoProcessor's defaults: sampling rate, frame bounds, total pixels over all frames
FPS = 2.0
MIN_FRAMES = 4
MAX_FRAMES = 768
VIDEO_MIN_PIXELS = 128 * 32 * 32
VIDEO_MAX_PIXELS = 768 * 32 * 32
TEMPORAL_PATCH_SIZE = 2
UNKNOWN_FPS = 24.0  # HF's rate when a video does not say its own
VIDEO_SUFFIXES = frozenset({".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v", ".mpg", ".mpeg",
                            ".wmv", ".flv", ".3gp"})
ACCEPTED = "an animated GIF, WebP or PNG (APNG)"
T = TypeVar("T")


@dataclass(frozen=True)
class Frames:
    """The frames of an animated file: Pillow images in RGB and their start times."""

    images: list[Image.Image] = field(repr=False)
    times: list[float]   # seconds from the start, one per frame
    total: int           # frames in the file (``images`` may be a sample of them)
    fps: float           # the file's average frame rate


@dataclass(frozen=True)
class VideoSummary:
    """An animated file as the user sees it, and what the model would see of it."""

    total: int       # frames in the file
    seconds: float   # how long it plays
    sampled: int     # frames the model sees (FPS per second, within the frame bounds)


@dataclass(frozen=True)
class VideoInput:
    """A video ready for the vision tower: one ImageInput per temporal patch."""

    patches: tuple[ImageInput, ...]
    times: tuple[float, ...]  # seconds, one per temporal patch (mean of its two frames)
    frames: int               # frames sampled from the file

    @property
    def grid(self) -> tuple[int, int, int]:
        """(t, gh, gw): HF's video_grid_thw."""
        return (len(self.patches), *self.patches[0].grid[1:])

    @property
    def n_tokens(self) -> int:
        return sum(patch.n_tokens for patch in self.patches)

    def timestamp(self, k: int) -> str:
        """The text in front of temporal patch ``k``, as Qwen3VLProcessor writes it."""
        return f"<{self.times[k]:.1f} seconds>"


def is_animated(source: Path | str | bytes) -> bool:
    """The file holds more than one frame (an animation Pillow can read). Quick: Pillow
    looks for a second frame only, without decoding the rest."""
    try:
        return _reading(source, lambda image: bool(getattr(image, "is_animated", False)))
    except ImageError:
        return False


def check_format(path: Path | str) -> None:
    """An ImageError naming the accepted formats for a video file Pillow cannot decode
    (MP4, MOV, ...); nothing for any other file. Reads nothing."""
    if Path(path).suffix.lower() in VIDEO_SUFFIXES:
        raise ImageError(f"{path} is a video format Lantern cannot decode; convert it to "
                         f"{ACCEPTED} (for example: ffmpeg -i {Path(path).name} "
                         f"{Path(path).stem}.gif)")


def sample_indices(total: int, fps: float, rate: float = FPS, min_frames: int = MIN_FRAMES,
                   max_frames: int = MAX_FRAMES) -> np.ndarray:
    """Which frames HF's sample_frames keeps: ``rate`` per second, evenly spread."""
    n = int(total / fps * rate)
    n = min(max(n, min_frames), max_frames, total)
    return np.linspace(0, total - 1, n).round().astype(int)


def video_smart_resize(num_frames: int, height: int, width: int, factor: int = 32,
                       min_pixels: int = VIDEO_MIN_PIXELS,
                       max_pixels: int = VIDEO_MAX_PIXELS) -> tuple[int, int]:
    """One (height, width) for all frames: multiples of ``factor``, frames x area within
    the pixel bounds. HF's arithmetic (tiny frames scaled up to ``factor`` first)."""
    if num_frames < TEMPORAL_PATCH_SIZE:
        raise ImageError(f"a video needs at least {TEMPORAL_PATCH_SIZE} frames, not "
                         f"{num_frames}; attach a still picture as an image")
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    ratio = max(height, width) / min(height, width)
    if ratio > MAX_ASPECT_RATIO:
        raise ImageError(f"the video's frames have an aspect ratio of {ratio:.0f}:1; the "
                         f"vision model accepts at most {MAX_ASPECT_RATIO}:1, so crop them")
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    t_bar = round(num_frames / TEMPORAL_PATCH_SIZE) * TEMPORAL_PATCH_SIZE
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt(num_frames * height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def patch_times(times: list[float]) -> tuple[float, ...]:
    """Per temporal patch the mean time of its first and last frame (HF's
    _calculate_timestamps), the last frame repeated to fill the final pair."""
    padded = times + times[-1:] * (-len(times) % TEMPORAL_PATCH_SIZE)
    return tuple((padded[i] + padded[i + TEMPORAL_PATCH_SIZE - 1]) / 2
                 for i in range(0, len(padded), TEMPORAL_PATCH_SIZE))


def load_frames(source: Path | str | bytes) -> Frames:
    """Every HF-sampled frame of an animated file, composited to RGB, with its time."""
    def read(image: Image.Image) -> Frames:
        total, times, fps = _timing(image)
        kept = sample_indices(total, fps)
        images = []
        for index in kept:
            image.seek(int(index))
            images.append(to_rgb(image.copy()))
        return Frames(images, [times[int(i)] for i in kept], total, fps)

    return _reading(source, read)


def summarize(source: Path | str | bytes) -> VideoSummary | None:
    """How an animated file plays and how many frames the model would see; None for a
    still picture."""
    def read(image: Image.Image) -> VideoSummary | None:
        if not getattr(image, "is_animated", False):
            return None
        total, _, fps = _timing(image)
        return VideoSummary(total, total / fps, len(sample_indices(total, fps)))

    return _reading(source, read)


def prepare_video(vision: VisionConfig | None, source: Path | str | bytes) -> VideoInput:
    """An animated file as Qwen3-VL's video processor prepares it; an ImageError for a
    model whose tower does not read video."""
    if vision is None or vision.tower != "qwen3vl":
        raise ImageError("this model cannot read video; attach a still image, or pick a "
                         "Qwen3-VL model for video")
    return preprocess_video(load_frames(source), vision)


def pictures(item: ImageInput | VideoInput) -> list[np.ndarray]:
    """The pictures an attachment puts in a prompt, as the model saw them (uint8
    [H, W, 3]): an image's one, a video's first frame of each temporal patch (each is one
    picture of tokens in the prompt)."""
    return [pixels(p) for p in item.patches] if isinstance(item, VideoInput) else [pixels(item)]


def _reading(source: Path | str | bytes, read: Callable[[Image.Image], T]) -> T:
    """``read`` over the opened file, a damaged one reported as an ImageError."""
    try:
        with _open(source) as image:
            return read(image)
    except (OSError, EOFError, SyntaxError, ValueError) as e:
        raise ImageError(f"{source if not isinstance(source, bytes) else 'the video'} is "
                         f"truncated or damaged ({e}); re-save or re-download it") from e


def _timing(image: Image.Image) -> tuple[int, list[float], float]:
    """(frames, start time of each in seconds, average frame rate) of an opened file;
    a file that records no durations plays at HF's assumed rate."""
    total = getattr(image, "n_frames", 1)
    starts, clock = [], 0  # milliseconds, as the files record them
    for index in range(total):
        image.seek(index)
        image.load()  # WebP tells a frame's duration only once it is decoded
        starts.append(clock)
        clock += image.info.get("duration") or 0
    if clock <= 0:
        return total, [i / UNKNOWN_FPS for i in range(total)], UNKNOWN_FPS
    return total, [s / 1000 for s in starts], total * 1000 / clock


def preprocess_video(frames: Frames, vision: VisionConfig) -> VideoInput:
    """Sampled frames -> temporal patches for Qwen3-VL's tower (statistics 0.5)."""
    first = frames.images[0]
    height, width = video_smart_resize(len(frames.images), first.height, first.width,
                                       vision.patch_size * vision.spatial_merge_size)
    rgb = [np.asarray(f.resize((width, height), Image.Resampling.BICUBIC), np.uint8)
           for f in frames.images]
    rgb += rgb[-1:] * (-len(rgb) % TEMPORAL_PATCH_SIZE)
    patches = []
    for k in range(0, len(rgb), TEMPORAL_PATCH_SIZE):
        pair = np.stack(rgb[k:k + TEMPORAL_PATCH_SIZE])  # [T, H, W, C]
        patches.append(temporal_patch(normalise(pair, QWEN3VL_MEAN, QWEN3VL_STD),
                                      pair.tobytes(), vision.patch_size,
                                      vision.spatial_merge_size, QWEN3VL_MEAN, QWEN3VL_STD))
    return VideoInput(tuple(patches), patch_times(frames.times), len(frames.images))


def _open(source: Path | str | bytes) -> Image.Image:
    """The file opened lazily by Pillow; a clear ImageError for what it cannot be."""
    name = "the pasted video" if isinstance(source, bytes) else str(source)
    if not isinstance(source, bytes):
        check_format(source)
    try:
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except (UnidentifiedImageError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ImageError(f"{name} is not a video Lantern can read ({e}); use {ACCEPTED}") from e
    except OSError as e:
        raise ImageError(f"cannot read {name}: {e.strerror or e}") from e
    if image.width * image.height > MAX_IMAGE_PIXELS:
        raise ImageError(f"{name} has frames of {image.width}x{image.height} pixels, more "
                         f"than the {MAX_IMAGE_PIXELS:,} Lantern decodes; downscale it first")
    return image
