"""A tokenized prompt with images -> the decoder's PromptTokens.

The chat template leaves one ``<|image_pad|>`` per image (usually between
``<|vision_start|>`` and ``<|vision_end|>``; they are added where the template left them
out). Each placeholder becomes N = gh*gw/4 pads whose embedding rows the image's
embeddings replace, positions become 3-D (engine.vision.mrope), and cache keys name
image rows by (pad id, image digest, row) so a later turn reuses the cache only when the
same image sits in the same place.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import ImageError
from engine.gguf.config import ModelConfig, SpecialTokens
from engine.vision.mrope import mrope_positions
from engine.vision.preprocess import ImageInput
from engine.vision.video import VideoInput

# image -> float32 [n_tokens, text hidden], or for a DeepStack tower (Qwen3-VL)
# [1 + K, n_tokens, text hidden]: the embeddings, then the K DeepStack features
Encode = Callable[[ImageInput], np.ndarray]


def image_prompt(ids: Sequence[int], images: Sequence[ImageInput | VideoInput],
                 config: ModelConfig, encode: Encode,
                 encode_text: Callable[[str], list[int]] | None = None) -> PromptTokens:
    """Expand the image placeholders of ``ids`` and attach the images' embeddings
    (``encode`` is usually engine.runtime.vision_encoder.VisionEncoder.encode). A video
    (Qwen3-VL) takes an image's placeholder and widens it as HF's processor widens
    ``<|video_pad|>``: per temporal patch its timestamp (tokenized by ``encode_text``),
    ``<|vision_start|>``, its pads, ``<|vision_end|>``."""
    special, vision = config.special, config.vision
    if vision is None or None in (special.image_pad, special.vision_start, special.vision_end):
        raise ImageError(f"{config.name or config.architecture} cannot read images "
                         "(no vision tower); pick a vision model such as qwen2.5vl")
    pad, start, end = special.image_pad, special.vision_start, special.vision_end
    ids = [int(i) for i in ids]
    slots = [i for i, token in enumerate(ids) if token == pad]
    if len(slots) != len(images):
        raise ImageError(
            f"the prompt has {len(slots)} image placeholder(s) for {len(images)} image(s); "
            "each image needs exactly one <|image_pad|> in the rendered template"
        )

    built = _Built(config.text.hidden_size, encode)
    previous = 0
    for slot, image in zip(slots, images, strict=True):
        built.text(ids[previous:slot])
        if not (slot > 0 and ids[slot - 1] == start):
            built.text([start])
        if isinstance(image, VideoInput):
            _add_video(built, image, special, encode_text)
        else:
            built.vision(pad, image)
        if not (slot + 1 < len(ids) and ids[slot + 1] == end):
            built.text([end])
        previous = slot + 1
    built.text(ids[previous:])
    return built.prompt(pads=tuple(p for p in (pad, special.video_pad) if p is not None),
                        merge_size=vision.spatial_merge_size)


def stored_embeds(embeds: np.ndarray, config: ModelConfig) -> np.ndarray:
    """Image embeddings as a prompt stores them: the decoder scales every input row by
    the embedding scale (Gemma: sqrt(H)), which an image's rows must not get."""
    return (np.asarray(embeds) / config.text.embedding_scale).astype(np.float32)


def _add_video(built: _Built, video: VideoInput, special: SpecialTokens,
               encode_text: Callable[[str], list[int]] | None) -> None:
    if special.video_pad is None or encode_text is None:
        raise ImageError("this model's vocabulary has no <|video_pad|>; it cannot read "
                         "video, attach a still image instead")
    for k, patch in enumerate(video.patches):
        built.text(encode_text(video.timestamp(k)) + [special.vision_start])
        built.vision(special.video_pad, patch)
        built.text([special.vision_end])


class _Built:
    """The expanded prompt as it grows: ids, cache keys, and each picture's rows,
    features and grid in prompt order."""

    def __init__(self, hidden: int, encode: Encode):
        self.hidden, self.encode = hidden, encode
        self.ids: list[int] = []
        self.keys: list[Hashable] = []
        self.rows: list[np.ndarray] = []
        self.features: list[np.ndarray] = []  # [1 + K, n, H] per picture
        self.grids: list[tuple[int, int, int]] = []

    def text(self, ids: Sequence[int]) -> None:
        self.ids += ids
        self.keys += ids

    def vision(self, pad: int, image: ImageInput) -> None:
        n = image.n_tokens
        self.rows.append(np.arange(len(self.ids), len(self.ids) + n, dtype=np.int64))
        self.ids += [pad] * n
        self.keys += [(pad, image.digest, r) for r in range(n)]
        encoded = np.asarray(self.encode(image))
        encoded = encoded[None] if encoded.ndim == 2 else encoded  # [1 + K, n, H]
        if encoded.shape[1:] != (n, self.hidden):
            raise ImageError(f"image embeddings of shape {encoded.shape}; the prompt needs "
                             f"({n}, {self.hidden})")
        self.features.append(encoded)
        self.grids.append(image.grid)

    def prompt(self, pads: tuple[int, ...], merge_size: int) -> PromptTokens:
        mrope = mrope_positions(self.ids, pads, self.grids, merge_size)
        features = self.features
        return PromptTokens(
            ids=np.asarray(self.ids, dtype=np.int64),
            positions=mrope.positions,
            keys=tuple(self.keys),
            next_position=mrope.next_position,
            image_rows=np.concatenate(self.rows) if self.rows else None,
            image_embeds=np.concatenate([f[0] for f in features]).astype(np.float32)
            if features else None,
            image_deepstack=np.concatenate([f[1:] for f in features], axis=1)
            .astype(np.float32) if features and len(features[0]) > 1 else None,
        )
