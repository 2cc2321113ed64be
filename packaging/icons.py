"""The platform icon files, made from resources/icons' PNGs with Pillow at build time
(no iconutil or ImageMagick needed, so every platform can build every icon)."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

SOURCE = "lantern-512.png"                          # the largest rendered size
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)           # Windows shows at most 256 px
ICNS_SIZES = (16, 32, 64, 128, 256, 512)             # Pillow packs what macOS knows


def make_icons(pngs: Path, out: Path) -> dict[str, Path]:
    """Write ``lantern.ico`` and ``lantern.icns`` into ``out``, each from the 512 px PNG
    resampled to the platform's sizes; returns them by extension."""
    out.mkdir(parents=True, exist_ok=True)
    source = Image.open(pngs / SOURCE).convert("RGBA")
    ico, icns = out / "lantern.ico", out / "lantern.icns"
    source.save(ico, sizes=[(s, s) for s in ICO_SIZES])
    # Pillow's ICNS writer takes the other sizes from append_images by their size.
    source.save(icns, append_images=[source.resize((s, s), Image.LANCZOS) for s in ICNS_SIZES])
    return {"ico": ico, "icns": icns}
