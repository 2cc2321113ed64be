"""The lens grid's experts column: per layer, the experts the token took with their weights
(a mixture-of-experts model's router choice beside what the layer predicts)."""

from __future__ import annotations

import numpy as np

from app.inspector.lens_grid import LensGrid
from engine.inspect import ExpertChoice, LensRow, LensToken


def rows(n: int) -> tuple[LensRow, ...]:
    return tuple(LensRow(layer, (LensToken(7, "a", 1.0, 0.9),), 0.1) for layer in range(n))


def test_each_layer_row_names_its_experts(qtbot):
    grid = LensGrid()
    qtbot.addWidget(grid)
    choices = (ExpertChoice(np.array([3, 5]), np.array([0.62, 0.38], np.float32)),
               ExpertChoice(np.array([0, 7]), np.array([0.9, 0.1], np.float32)))
    grid.set_rows(rows(3), choices)
    assert grid.experts_text(0) == ""  # the embeddings take no expert
    assert grid.experts_text(1) == "#3 62%  #5 38%"
    assert grid.experts_text(2) == "#0 90%  #7 10%"
    narrow = grid._cell(0, 0).width()
    grid.set_rows(rows(3))  # a dense model: no column, the lens takes the width
    assert grid.experts_text(1) == "" and grid._cell(0, 0).width() > narrow
    grid.resize(600, grid.height())
    grid.set_rows(rows(3), choices)
    grid.grab()  # paints with the column
