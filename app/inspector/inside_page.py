"""The panel's "Inside" tab: the logit lens and the attention of one position.

Filled from an engine.inspect.Inspection computed on demand (a job with progress and
cancel), never while an answer streams. The page only draws; the Inspector decides what
to compute.
"""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.discard import discard
from app.inspector.attention_map import ImageHeat, TokenHeat
from app.inspector.attribution_heat import AttributionHeat, AttributionImage
from app.inspector.contribution_grid import ContributionGrid, summary
from app.inspector.lens_grid import LensGrid
from app.inspector.progress_strip import ProgressStrip
from app.inspector.rows import visible_piece
from app.inspector.widgets import (
    hint,
    scrolling_body,
    section,
)
from engine.inspect import Inspection
from engine.inspect.occlusion import Attribution

MEAN = -1


PICK_A_POSITION = ("Click a token in the reply (with colouring on), a point on the Token tab's "
                   "chart or a row of the Prompt tab, or inspect the latest token.")

class InsidePage(QWidget):
    inspectRequested = Signal()          # the latest token
    attributionRequested = Signal()      # occlusion of the inspected position
    cancelRequested = Signal()
    positionClicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.inspection: Inspection | None = None
        self.pictures: list[np.ndarray | None] = []
        layout = scrolling_body(self)
        self._add_controls(layout)
        self._add_lens(layout)
        self._add_contributions(layout)
        self._add_attribution(layout)
        self._add_attention(layout)
        layout.addStretch(1)

    def _add_controls(self, layout: QVBoxLayout) -> None:
        self.title = hint(PICK_A_POSITION)
        self.title.setObjectName("tokenTitle")
        layout.addWidget(self.title)
        self.inspect_button = QPushButton("Inspect the latest token")
        self.inspect_button.clicked.connect(self.inspectRequested)
        self.strip = ProgressStrip(self.inspect_button, self.cancelRequested)
        self.progress, self.cancel_button = self.strip.progress, self.strip.cancel_button
        layout.addWidget(self.strip)
        self.status = hint("")
        layout.addWidget(self.status)

    def _add_lens(self, layout: QVBoxLayout) -> None:
        layout.addWidget(section("Logit lens"))
        layout.addWidget(hint("What each layer would predict here: lm_head(final_norm(h)) "
                              "after the embeddings and every block. Colour = probability; "
                              "the final answer is outlined; hover for the top-5."))
        self.lens = LensGrid()
        layout.addWidget(self.lens)

    def _add_contributions(self, layout: QVBoxLayout) -> None:
        layout.addWidget(section("Why this token"))
        layout.addWidget(hint("The explained token's logit split into the embedding, every "
                              "attention head (columns) of every layer (rows) and every MLP "
                              "(last column): the final norm frozen at this position's scale, "
                              "so the parts add up. Blue pushes it up, red down (tint: square "
                              "root of the share of the largest); click a head for its "
                              "attention map."))
        self.split_box = QComboBox()
        self.split_box.currentIndexChanged.connect(self._redraw_contributions)
        layout.addWidget(self.split_box)
        self.split_summary = hint("")
        layout.addWidget(self.split_summary)
        self.contributions = ContributionGrid()
        self.contributions.headClicked.connect(self.show_head)
        layout.addWidget(self.contributions)

    def _add_attribution(self, layout: QVBoxLayout) -> None:
        layout.addWidget(section("What in the input caused it"))
        layout.addWidget(hint("Each earlier token hidden from attention in turn (its "
                              "position kept): how the explained token's log-probability "
                              "changes. Blue: hiding it lowers it (the token supported the "
                              "answer); red: raises it (tint: square root of the share of the "
                              "largest change). One reference run per token."))
        self.attribute_button = QPushButton("Hide each earlier token")
        self.attribute_button.setObjectName("attributeButton")
        self.attribute_button.clicked.connect(self.attributionRequested)
        # its own progress and Cancel beside its button: this section is far below the top
        self.attribute_strip = ProgressStrip(self.attribute_button, self.cancelRequested)
        layout.addWidget(self.attribute_strip)
        self.attribution_note = hint("")
        layout.addWidget(self.attribution_note)
        self.attribution = AttributionHeat()
        self.attribution.positionClicked.connect(self.positionClicked)
        layout.addWidget(self.attribution)
        self.attribution_area = QVBoxLayout()
        layout.addLayout(self.attribution_area)
        self.attribution_images: list[QWidget] = []

    def _add_attention(self, layout: QVBoxLayout) -> None:
        layout.addWidget(section("Attention"))
        layout.addWidget(hint("How much this position attends to every earlier one (tint "
                              "scaled to the largest weight after the first token); images "
                              "are shown with their merged patches tinted."))
        choose = QHBoxLayout()
        self.layer_box = QComboBox()
        self.head_box = QComboBox()
        self.layer_box.currentIndexChanged.connect(self._redraw_attention)
        self.head_box.currentIndexChanged.connect(self._redraw_attention)
        choose.addWidget(self.layer_box, 1)
        choose.addWidget(self.head_box, 1)
        layout.addLayout(choose)
        self.heat = TokenHeat()
        self.heat.positionClicked.connect(self.positionClicked)
        layout.addWidget(self.heat)
        self.image_area = QVBoxLayout()
        layout.addLayout(self.image_area)
        self.image_heats: list[tuple[QLabel, ImageHeat]] = []

    # -- states ---------------------------------------------------------------------------

    def show_running(self, text: str) -> None:
        self.title.setText(text)
        self.strip.start()
        self.attribute_button.setEnabled(False)
        self.status.setText("")

    def show_progress(self, stage: str, fraction: float) -> None:
        strip = self.attribute_strip if self.attribute_strip.busy else self.strip
        strip.advance(stage, fraction)

    def show_waiting(self, text: str) -> None:
        self.title.setText(text)
        self.status.setText("It runs when the answer ends, so the stream is not slowed.")

    def show_failed(self, text: str) -> None:
        self._idle()
        self.status.setText(text)

    def show_attributing(self) -> None:
        self.attribute_strip.start("Hiding each earlier token…")
        self.inspect_button.setEnabled(False)

    def _idle(self) -> None:
        self.strip.still()
        self.attribute_strip.still()
        self.attribute_button.setEnabled(self.inspection is not None)

    def clear(self) -> None:
        self._idle()
        self.title.setText(PICK_A_POSITION)
        self.inspection = None
        self.attribute_button.setEnabled(False)
        self.lens.set_rows(())
        self.split_box.clear()
        self.split_summary.setText("")
        self.contributions.set_split(None)
        self._clear_attribution()
        self.heat.set_data((), np.zeros(0), ())
        self._set_images([])
        self.status.setText("")

    # -- results ----------------------------------------------------------------------------

    def show_inspection(self, inspection: Inspection, title: str, note: str,
                        pictures: list[np.ndarray | None]) -> None:
        """pictures: the uint8 [H, W, 3] image of each of inspection.images (or None)."""
        self.inspection, self.pictures = inspection, pictures
        self._idle()
        self.title.setText(title)
        self.status.setText(note)
        self.lens.set_rows(inspection.lens, inspection.experts)
        self._clear_attribution()
        parts = inspection.contributions
        self.split_box.blockSignals(True)
        self.split_box.clear()
        capped = f" before the cap at {parts.softcap:g}" if parts.softcap else ""
        self.split_box.addItems([
            f"logit of {visible_piece(parts.pieces[0])}{capped}",
            f"margin over {visible_piece(parts.pieces[1])}{capped}"])
        self.split_box.blockSignals(False)
        self._redraw_contributions()
        layers, heads = inspection.attention.shape[:2]
        for box, items in ((self.layer_box, ["mean over layers"] +
                            [f"layer {i + 1}" for i in range(layers)]),
                           (self.head_box, ["mean over heads"] +
                            [f"head {i + 1}" for i in range(heads)])):
            keep = box.currentIndex() if box.count() == len(items) else 0
            box.blockSignals(True)
            box.clear()
            box.addItems(items)
            box.setCurrentIndex(keep)
            box.blockSignals(False)
        self._set_images(inspection.images)
        self._redraw_attention()

    def show_head(self, layer: int, head: int) -> None:
        """A head clicked in the grid: its attention map below."""
        self.layer_box.setCurrentIndex(layer + 1)
        self.head_box.setCurrentIndex(head + 1)
        self.heat.setFocus()

    def show_attribution(self, attribution: Attribution) -> None:
        self._idle()
        if self.inspection is None or attribution.position != self.inspection.position:
            return
        delta = np.append(attribution.spread, 0.0)  # the inspected position itself: nothing
        self.attribution.set_data(self.inspection.tokens, delta, self.inspection.images)
        j = int(np.argmin(attribution.delta)) if len(attribution.delta) else None
        most = "" if j is None else (
            f"; hiding #{j} <code>{html.escape(visible_piece(self.inspection.tokens[j]))}"
            f"</code> lowers it most ({attribution.delta[j]:+.3f})")
        explained = html.escape(visible_piece(self.inspection.contributions.pieces[0]))
        self.attribution_note.setText(f"log-probability of <code>{explained}</code>: "
                                      f"{attribution.logprob:.3f}{most}")
        for n, grid in enumerate(self.inspection.images):
            laid = grid.lay_out(delta)
            group = attribution.patch_group
            each = ("each merged patch" if group == 1
                    else f"merged patches in {group} × {group} blocks (value shared out)")
            label = hint(f"Image {n + 1}: {each} hidden in turn (sum {laid.sum():+.3f})")
            heat = AttributionImage()
            heat.set_data(self.pictures[n] if n < len(self.pictures) else None, laid)
            for widget in (label, heat):
                self.attribution_area.addWidget(widget)
                self.attribution_images.append(widget)

    def _clear_attribution(self) -> None:
        self.attribution.set_data((), np.zeros(0), ())
        self.attribution_note.setText("")
        for widget in self.attribution_images:
            discard(widget)
        self.attribution_images = []

    def _redraw_contributions(self) -> None:
        if self.inspection is None or self.inspection.contributions is None:
            return
        parts = self.inspection.contributions
        split = parts.margin if self.split_box.currentIndex() == 1 else parts.logit
        self.split_summary.setText(summary(split, self.split_box.currentText()))
        self.contributions.set_split(split)

    def weights(self) -> np.ndarray:
        """The attention row drawn now [position + 1], for the chosen layer and head."""
        probs = self.inspection.attention  # [L, heads, T]
        layer, head = self.layer_box.currentIndex() - 1, self.head_box.currentIndex() - 1
        chosen = probs.mean(axis=0) if layer == MEAN else probs[layer]   # [heads, T]
        return chosen.mean(axis=0) if head == MEAN else chosen[head]

    def _set_images(self, grids) -> None:
        for label, heat in self.image_heats:
            for widget in (label, heat):
                discard(widget)
        self.image_heats = []
        for _grid in grids:
            label = hint("")
            heat = ImageHeat()
            self.image_area.addWidget(label)
            self.image_area.addWidget(heat)
            self.image_heats.append((label, heat))

    def _redraw_attention(self) -> None:
        if self.inspection is None:
            return
        weights = self.weights()
        self.heat.set_data(self.inspection.tokens, weights, self.inspection.images)
        for n, (grid, (label, heat)) in enumerate(zip(self.inspection.images, self.image_heats,
                                                       strict=True)):
            laid = grid.lay_out(weights)
            picture = self.pictures[n] if n < len(self.pictures) else None
            heat.set_data(picture, laid)
            label.setText(f"Image {n + 1}: {grid.height} × {grid.width} merged patches, "
                          f"{laid.sum():.1%} of this position's attention")


def position_title(inspection: Inspection, where: str) -> str:
    token = html.escape(visible_piece(inspection.tokens[-1]))
    return (f"<b>Position {inspection.position}</b> ({where}): after <code>{token}</code>, "
            f"predicting the next token")
