"""Seeing inside one context: the logit lens, attention maps, llama.cpp's second opinion.

Everything here is computed on demand from the plain numpy fp32 reference (never from the
streaming engine), so the numbers are exact whatever mode the engine runs in.
"""

from engine.inspect.attention import ImageGrid, image_grids
from engine.inspect.inspection import ExpertChoice, Inspection, continued, inspect_context
from engine.inspect.lens import LensRow, LensToken, logit_lens

__all__ = [
    "ExpertChoice",
    "ImageGrid",
    "Inspection",
    "LensRow",
    "LensToken",
    "continued",
    "image_grids",
    "inspect_context",
    "logit_lens",
]
