"""Gemma 3's image input: HF's Gemma3 image processor (no pan-and-scan) and the soft tokens
of its prompt.

Every image is resized to one square (896 pixels in the released models) with Pillow's
bilinear filter, rescaled and normalised with mean and std 0.5, and cut into patch rows in
raster order, column c*P*P + py*P + px (the patch convolution's kernel flattened). In the
prompt each ``<start_of_image>`` the template left becomes ``\\n\\n<start_of_image>``, one
``<image_soft_token>`` per pooled cell and ``<end_of_image>\\n\\n``, as Gemma's processor
writes it; positions stay 1-D, and the rows of one image attend to each other both ways.
The image rows go in divided by the embedding scale, which Gemma applies to token
embeddings only while the decoder applies it to every input row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence

import numpy as np
from PIL import Image

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import ImageError
from engine.gguf.config import ModelConfig, VisionConfig
from engine.vision.preprocess import ImageInput, load_image, normalise, to_rgb
from engine.vision.prompt import Encode, stored_embeds

GEMMA3_IMAGE_PLACEHOLDER = "<start_of_image>"  # what Gemma's chat template writes per image
SIGLIP_MEAN = (0.5, 0.5, 0.5)
SIGLIP_STD = (0.5, 0.5, 0.5)


def preprocess_square(image: Image.Image | str | bytes, vision: VisionConfig) -> ImageInput:
    """Resize to vision.image_size square, normalise, and lay out the patch rows."""
    if not isinstance(image, Image.Image):
        image = load_image(image)
    size, p = vision.image_size, vision.patch_size
    resized = to_rgb(image).resize((size, size), Image.Resampling.BILINEAR)
    rgb = np.asarray(resized, dtype=np.uint8)  # [H, W, C]
    x = normalise(rgb, SIGLIP_MEAN, SIGLIP_STD)
    g, c = size // p, x.shape[2]
    x = x.reshape(g, p, g, p, c).transpose(0, 2, 4, 1, 3)  # [gy, gx, C, py, px]
    key = hashlib.sha256(rgb.tobytes())
    key.update(repr(("siglip", rgb.shape, p, SIGLIP_MEAN, SIGLIP_STD)).encode())
    return ImageInput(pixel_values=np.ascontiguousarray(x.reshape(g * g, c * p * p)),
                      grid=(1, g, g), digest=key.hexdigest(),
                      merge=vision.spatial_merge_size, raster=True, patch_size=p,
                      mean=SIGLIP_MEAN, std=SIGLIP_STD)


def soft_token_prompt(ids: Sequence[int], images: Sequence[ImageInput], config: ModelConfig,
                      encode: Encode, around: Sequence[int] = ()) -> PromptTokens:
    """Expand each ``<start_of_image>`` of ``ids`` into the image's soft tokens and attach
    its embeddings; ``around`` (the ids of "\\n\\n") goes before and after each image."""
    special, vision = config.special, config.vision
    if vision is None or not vision.siglip:
        raise ImageError(f"{config.name or config.architecture} has no Gemma 3 vision tower")
    pad, start, end = special.image_pad, special.vision_start, special.vision_end
    ids = [int(i) for i in ids]
    slots = [i for i, token in enumerate(ids) if token == start]
    if len(slots) != len(images):
        raise ImageError(
            f"the prompt has {len(slots)} image placeholder(s) for {len(images)} image(s); "
            "each image needs exactly one <start_of_image> in the rendered template")
    out: list[int] = []
    keys: list[Hashable] = []
    rows: list[np.ndarray] = []
    embeds: list[np.ndarray] = []
    previous = 0
    for slot, image in zip(slots, images, strict=True):
        opening = [*ids[previous:slot], *around, start]
        out += opening
        keys += opening
        n = image.n_tokens
        rows.append(np.arange(len(out), len(out) + n, dtype=np.int64))
        out += [pad] * n
        keys += [(pad, image.digest, r) for r in range(n)]
        out += [end, *around]
        keys += [end, *around]
        embedding = encode(image)  # [n, H]
        if embedding.shape != (n, config.text.hidden_size):
            raise ImageError(f"image embeddings of shape {embedding.shape}; the prompt needs "
                             f"({n}, {config.text.hidden_size})")
        embeds.append(embedding)
        previous = slot + 1
    out += ids[previous:]
    keys += ids[previous:]
    return PromptTokens(
        ids=np.asarray(out, dtype=np.int64),
        positions=np.arange(len(out), dtype=np.int64),
        keys=tuple(keys),
        next_position=len(out),
        image_rows=np.concatenate(rows),
        image_embeds=stored_embeds(np.concatenate(embeds), config),
        bidirectional_images=True,
    )
