"""Images for a server: decoded and checked like local ones (engine.vision), shrunk to the
pixel budget, sent as PNG bytes (a data URL for OpenAI-compatible servers, base64 for
Ollama). The server's own processor does the rest."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RemoteImage:
    mime: str
    data: bytes = b""

    def __repr__(self) -> str:
        return f"RemoteImage({self.mime}, {len(self.data):,} bytes)"


def read_image(source: Path | str | bytes, max_pixels: int) -> RemoteImage:
    from engine.vision.preprocess import load_image  # Pillow, only for a chat with images

    image = load_image(source)
    pixels = image.width * image.height
    if pixels > max_pixels:
        scale = math.sqrt(max_pixels / pixels)
        image = image.resize((max(1, int(image.width * scale)), max(1, int(image.height * scale))))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return RemoteImage("image/png", buffer.getvalue())
