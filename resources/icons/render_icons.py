"""Render lantern.svg into the PNG sizes desktops and installers ask for.

    python resources/icons/render_icons.py
"""

import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
HERE = Path(__file__).resolve().parent


def render(svg: Path, size: int) -> QImage:
    image = QImage(size, size, QImage.Format_ARGB32_Premultiplied)
    image.fill(Qt.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.Antialiasing)
    QSvgRenderer(str(svg)).render(painter)
    painter.end()
    return image


def main() -> int:
    QGuiApplication(sys.argv[:1] + ["-platform", "offscreen"])
    svg = HERE / "lantern.svg"
    for size in SIZES:
        out = HERE / f"lantern-{size}.png"
        if not render(svg, size).save(str(out)):
            print(f"could not write {out}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
