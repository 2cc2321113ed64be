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
from engine.gguf.config import ModelConfig
from engine.vision.mrope import mrope_positions
from engine.vision.preprocess import ImageInput

# image -> float32 [n_tokens, text hidden], or for a DeepStack tower (Qwen3-VL)
# [1 + K, n_tokens, text hidden]: the embeddings, then the K DeepStack features
Encode = Callable[[ImageInput], np.ndarray]


def image_prompt(ids: Sequence[int], images: Sequence[ImageInput], config: ModelConfig,
                 encode: Encode) -> PromptTokens:
    """Expand the image placeholders of ``ids`` and attach the images' embeddings
    (``encode`` is usually engine.runtime.vision_encoder.VisionEncoder.encode)."""
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

    out: list[int] = []
    keys: list[Hashable] = []
    rows: list[np.ndarray] = []
    features: list[np.ndarray] = []  # [1 + K, n, H] per image
    previous = 0
    for slot, image in zip(slots, images, strict=True):
        text = ids[previous:slot]
        out += text
        keys += text
        opened = slot > 0 and ids[slot - 1] == start
        closed = slot + 1 < len(ids) and ids[slot + 1] == end
        if not opened:
            out.append(start)
            keys.append(start)
        n = image.n_tokens
        rows.append(np.arange(len(out), len(out) + n, dtype=np.int64))
        out += [pad] * n
        keys += [(pad, image.digest, r) for r in range(n)]
        if not closed:
            out.append(end)
            keys.append(end)
        encoded = np.asarray(encode(image))
        encoded = encoded[None] if encoded.ndim == 2 else encoded  # [1 + K, n, H]
        if encoded.shape[1:] != (n, config.text.hidden_size):
            raise ImageError(f"image embeddings of shape {encoded.shape}; the prompt needs "
                             f"({n}, {config.text.hidden_size})")
        features.append(encoded)
        previous = slot + 1
    out += ids[previous:]
    keys += ids[previous:]

    mrope = mrope_positions(out, pad, [image.grid for image in images],
                            vision.spatial_merge_size)
    return PromptTokens(
        ids=np.asarray(out, dtype=np.int64),
        positions=mrope.positions,
        keys=tuple(keys),
        next_position=mrope.next_position,
        image_rows=np.concatenate(rows) if rows else None,
        image_embeds=np.concatenate([f[0] for f in features]).astype(np.float32)
        if features else None,
        image_deepstack=np.concatenate([f[1:] for f in features], axis=1).astype(np.float32)
        if features and len(features[0]) > 1 else None,
    )
