"""Image and video input for vision-language models: decoding, resizing and patch layout
(video: engine.vision.video, Qwen3-VL only)."""

from engine.vision.preprocess import ImageInput, load_image, preprocess, smart_resize

__all__ = ["ImageInput", "load_image", "preprocess", "smart_resize"]
