"""A context with images, as each of two compared models reads it.

The text (ids, positions) is the one the chat core built; every picture is read again by
each model's own vision tower in the numpy fp32 reference (like the text, so neither
model's row depends on the engine's mode). A picture must come out as as many tokens for
the second model as the context holds; when it does not, the two texts are different id
sequences and nothing is compared (the error names both counts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import LanternError
from engine.gguf import GGUFModel
from engine.gguf.config import VisionConfig
from engine.inspect.attention import ImageGrid, image_grids
from engine.reference import qwen3vl_tower, siglip_tower, vision_tower
from engine.vision.preprocess import ImageInput
from engine.vision.prompt import Encode, stored_embeds
from engine.vision.video import VideoInput


class ComparisonError(LanternError):
    """Two models that cannot be compared on one text."""


def picture_inputs(attachments: Sequence[ImageInput | VideoInput]) -> list[ImageInput]:
    """The pictures attachments put in a prompt, in order: an image's one, a video's one
    per temporal patch (each is one run of image rows)."""
    return [p for item in attachments
            for p in (item.patches if isinstance(item, VideoInput) else (item,))]


def reference_encode(model: GGUFModel) -> Encode:
    """``model``'s vision tower in the fp32 reference, as engine.vision.prompt.Encode."""
    vision = model.config.vision
    if vision is not None and vision.siglip:
        return lambda image: siglip_tower.forward(model, image.pixel_values).embeds
    if vision is not None and vision.tower == "qwen3vl":
        weights = qwen3vl_tower.Qwen3VLWeights(model)

        def deepstack(image: ImageInput) -> np.ndarray:
            out = qwen3vl_tower.forward(model, image.pixel_values, image.grid, weights=weights)
            return np.concatenate([out.embeds[None], out.deepstack])
        return deepstack
    weights = vision_tower.VisionWeights(model)
    return lambda image: vision_tower.forward(model, image.pixel_values, image.grid,
                                              weights=weights).embeds


def own_images(model: GGUFModel, name: str, context: PromptTokens,
               pictures: Sequence[ImageInput]) -> PromptTokens:
    """``context`` with each picture's rows (and DeepStack features) from ``model``'s own
    tower, stored as the prompt builders store them (stored_embeds); the context itself
    when it holds no image."""
    grids = image_grids(context)
    if not grids:
        return context
    vision = model.config.vision
    if vision is None:
        raise ComparisonError(f"{name} has no vision tower, so it cannot read the "
                              f"{len(grids)} image(s) of this context")
    if len(pictures) != len(grids):
        raise ComparisonError(f"the context holds {len(grids)} image(s) but "
                              f"{len(pictures)} picture(s) came with it")
    for k, (grid, picture) in enumerate(zip(grids, pictures, strict=True)):
        _check_fits(vision, name, k, grid, picture)
    encode = reference_encode(model)
    features = [_stacked(encode(picture)) for picture in pictures]
    return dataclasses.replace(
        context, image_embeds=stored_embeds(np.concatenate([f[0] for f in features]),
                                            model.config),
        image_deepstack=np.concatenate([f[1:] for f in features], axis=1).astype(np.float32)
        if len(features[0]) > 1 else None)


def _stacked(encoded: np.ndarray) -> np.ndarray:
    encoded = np.asarray(encoded)
    return encoded[None] if encoded.ndim == 2 else encoded    # [1 + K, n, H]


def _check_fits(vision: VisionConfig, name: str, k: int, grid: ImageGrid,
                picture: ImageInput) -> None:
    """The picture, as prepared for the context, is the tokens ``model`` would make of it."""
    held = grid.height * grid.width
    if picture.patch_size != vision.patch_size or picture.raster != vision.siglip:
        raise ComparisonError(
            f"image {k + 1} was cut into {picture.patch_size}-pixel patches for this "
            f"context; {name}'s vision tower reads {vision.patch_size}-pixel patches "
            f"{'in raster order' if vision.siglip else 'in merge blocks'}")
    t, gh, gw = picture.grid
    made = vision.tokens_per_image if vision.siglip else \
        t * gh * gw // (vision.spatial_merge_size ** 2)
    if made != held:
        raise ComparisonError(
            f"image {k + 1} is {held} tokens in this context but {made} for {name}'s vision "
            "tower: the two models would read different token sequences")


def check_aligned(contexts: tuple[PromptTokens, PromptTokens],
                  names: tuple[str, str]) -> None:
    """Both contexts are one id sequence; otherwise say where they part (an image's token
    count when that is where)."""
    a, b = contexts
    counts = [[g.height * g.width for g in image_grids(c)] for c in contexts]
    for k, (n_a, n_b) in enumerate(zip(*counts, strict=False)):
        if n_a != n_b:
            raise ComparisonError(f"image {k + 1} is {n_a} tokens for {names[0]} and {n_b} "
                                  f"for {names[1]}: the texts are different token sequences")
    if len(a) != len(b) or (a.ids != b.ids).any():
        same = min(len(a), len(b))
        first = next((i for i in range(same) if a.ids[i] != b.ids[i]), same)
        raise ComparisonError(f"{names[0]} and {names[1]} tokenize the text differently "
                              f"(from token {first}): compare needs models with one "
                              "vocabulary")
