"""Occlusion attribution over the text: each earlier token tinted by how much hiding it
from attention changes the explained token's log-probability (blue: hiding it lowers it,
the token supported the answer; red: hiding it raises it), the tint growing with the square
root of the share of the largest change (the token just before usually dominates).
An image is one chip holding the sum over its patches, and its picture is tinted patch by
patch (AttributionImage)."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QColor

from app.inspector.attention_map import ImageHeat, TokenHeat
from app.inspector.contribution_grid import signed_tint


class AttributionHeat(TokenHeat):
    def scale(self) -> float:
        return float(np.abs(self.weights).max()) if len(self.weights) else 1.0

    def colour(self, weight: float, scale: float) -> QColor:
        return signed_tint(-weight, scale)

    def describe(self, weight: float) -> str:
        return f"hidden: Δ log-probability {weight:+.4f}"


class AttributionImage(ImageHeat):
    """One image's merged patches tinted the same way (each patch is one token)."""

    def scale(self) -> float:
        return float(np.abs(self.grid).max()) if self.grid.size else 1.0

    def colour(self, weight: float, scale: float) -> QColor:
        return signed_tint(-weight, scale)

    def describe(self, weight: float) -> str:
        return f"hidden: Δ log-probability {weight:+.4f}"
