"""Image preprocessing must give the very pixel values HF's Pillow processor gives
(transformers' Qwen2VLImageProcessorPil, built locally with Qwen2.5-VL's settings)."""

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from engine.errors import ImageError
from engine.vision.preprocess import (
    MAX_PIXELS,
    MIN_PIXELS,
    load_image,
    preprocess,
    smart_resize,
)

hf_pil = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")


@pytest.fixture(scope="module")
def hf():
    """HF's slow (Pillow) processor with Qwen2.5-VL's defaults and Ollama's pixel cap."""
    return hf_pil.Qwen2VLImageProcessorPil(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)


def noise(width: int, height: int, mode: str = "RGB", seed: int = 0) -> Image.Image:
    """Random pixels: every value matters, so any resampling difference shows."""
    bands = len(Image.new(mode, (1, 1)).getbands())
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, (height, width, bands), dtype=np.uint8)
    return Image.fromarray(data[..., 0] if bands == 1 else data, mode=mode)


def encoded(image: Image.Image, fmt: str, **kwargs) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt, **kwargs)
    return buf.getvalue()


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def raw_png(width: int, height: int, bit_depth: int, color_type: int, rows: bytes) -> bytes:
    """A PNG written by hand (Pillow cannot write 16-bit RGB, nor lie about its size)."""
    header = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", zlib.compress(rows))
        + png_chunk(b"IEND", b"")
    )


def assert_same_as_hf(ours, theirs) -> None:
    expected = theirs["pixel_values"]
    assert ours.pixel_values.dtype == np.float32
    assert ours.pixel_values.shape == expected.shape
    assert tuple(theirs["image_grid_thw"][0]) == ours.grid
    diff = np.abs(ours.pixel_values - expected).max()
    assert np.array_equal(ours.pixel_values, expected), f"max |diff| {diff}"


@pytest.mark.parametrize(
    "width, height",
    [(513, 37), (37, 513), (1000, 20), (20, 1000), (1, 1), (640, 480), (56, 56), (2000, 1500)],
)
def test_rgb_sizes_match_hf(hf, width, height):
    image = noise(width, height, seed=width * 7 + height)
    ours = preprocess(load_image(encoded(image, "PNG")))
    assert_same_as_hf(ours, hf(image))
    assert ours.pixel_values.shape[1] == 3 * 2 * 14 * 14


def test_larger_than_max_pixels_is_shrunk_like_hf(hf):
    image = noise(2000, 1500, seed=3)  # 3.0 Mpx > 2,097,152
    ours = preprocess(image)
    _, gh, gw = ours.grid
    assert gh * gw * 14 * 14 <= MAX_PIXELS
    assert_same_as_hf(ours, hf(image))
    small_hf = hf_pil.Qwen2VLImageProcessorPil(min_pixels=MIN_PIXELS, max_pixels=200_000)
    assert_same_as_hf(preprocess(image, max_pixels=200_000), small_hf(image))


def test_rgba_is_composited_over_white_like_hf(hf):
    rgba = noise(640, 480, "RGBA", seed=5)
    ours = preprocess(load_image(encoded(rgba, "PNG")))
    assert_same_as_hf(ours, hf(rgba))
    clear = Image.new("RGBA", (56, 56), (0, 0, 0, 0))
    white = (1.0 - np.array([0.48145466, 0.4578275, 0.40821073])) / np.array(
        [0.26862954, 0.26130258, 0.27577711]
    )
    rows = preprocess(load_image(encoded(clear, "PNG"))).pixel_values.reshape(-1, 3, 392)
    np.testing.assert_allclose(rows[0, :, 0], white, rtol=1e-6)


def test_palette_grayscale_and_la_match_hf(hf, tmp_path):
    palette = noise(300, 200, seed=7).convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
    palette.info["transparency"] = 3
    path = tmp_path / "palette.png"
    palette.save(path, transparency=3)
    with Image.open(path) as opened:
        assert opened.mode == "P" and "transparency" in opened.info
        assert_same_as_hf(preprocess(load_image(path)), hf(opened))

    opaque = noise(300, 200, seed=8).convert("P")
    assert_same_as_hf(preprocess(load_image(encoded(opaque, "PNG"))), hf(opaque))
    gray = noise(123, 321, "L", seed=9)
    assert_same_as_hf(preprocess(load_image(encoded(gray, "PNG"))), hf(gray))
    la = noise(90, 70, "LA", seed=10)
    assert_same_as_hf(preprocess(load_image(encoded(la, "PNG"))), hf(la))


def test_cmyk_jpeg_matches_hf(hf):
    data = encoded(noise(200, 150, "CMYK", seed=11), "JPEG", quality=90)
    opened = Image.open(io.BytesIO(data))
    assert opened.mode == "CMYK"
    assert_same_as_hf(preprocess(load_image(data)), hf(opened))


def test_16bit_rgb_png_matches_hf(hf):
    rng = np.random.default_rng(12)
    pixels = rng.integers(0, 65536, (50, 70, 3), dtype=np.uint16)
    rows = b"".join(b"\x00" + row.astype(">u2").tobytes() for row in pixels)
    data = raw_png(70, 50, 16, 2, rows)
    opened = Image.open(io.BytesIO(data))
    assert opened.mode == "RGB"  # Pillow keeps the high byte of each sample
    assert np.array_equal(np.asarray(opened), (pixels >> 8).astype(np.uint8))
    assert_same_as_hf(preprocess(load_image(data)), hf(opened))


def test_16bit_gray_png_is_scaled_not_clipped(hf):
    """Deliberate difference: HF clips 16-bit gray at 255; we keep the high byte."""
    rng = np.random.default_rng(13)
    pixels = rng.integers(0, 65536, (60, 80), dtype=np.uint16)
    data = encoded(Image.fromarray(pixels), "PNG")
    assert Image.open(io.BytesIO(data)).mode == "I;16"
    ours = preprocess(load_image(data))
    high_byte = Image.fromarray((pixels >> 8).astype(np.uint8), mode="L")
    assert_same_as_hf(ours, hf(high_byte))
    clipped = hf(Image.open(io.BytesIO(data)))["pixel_values"]
    assert not np.array_equal(ours.pixel_values, clipped)


def test_exif_rotation_applied_like_hf_load_image(hf, tmp_path):
    from transformers.image_utils import load_image as hf_load_image

    exif = Image.Exif()
    exif[0x0112] = 6  # stored sideways: rotate 90 degrees clockwise to view
    path = tmp_path / "rotated.jpg"
    noise(400, 100, seed=14).save(path, "JPEG", exif=exif, quality=95)
    image = load_image(path)
    assert image.size == (100, 400)
    assert_same_as_hf(preprocess(image), hf(hf_load_image(str(path))))


def test_animated_gif_gives_first_frame():
    frames = [Image.new("RGB", (60, 60), color) for color in ((255, 0, 0), (0, 0, 255))]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:])
    image = load_image(buf.getvalue())
    assert image.mode == "RGB"
    assert image.getpixel((30, 30)) == (255, 0, 0)


def test_row_layout_is_merge_block_order():
    """row = ((bh*(gw/2)+bw)*2+mh)*2+mw, column = c*392 + t*196 + py*14 + px."""
    height, width = 56, 84  # grid 4 x 6 patches, already multiples of 28
    image = noise(width, height, seed=15)
    ours = preprocess(image)
    assert ours.grid == (1, 4, 6)
    assert ours.n_tokens == 6
    x = (np.asarray(image).astype(np.float64) * (1 / 255)).astype(np.float32)
    x = (x - np.float32([0.48145466, 0.4578275, 0.40821073])) / np.float32(
        [0.26862954, 0.26130258, 0.27577711]
    )
    gw = 6
    for bh, bw, mh, mw, c, t, py, px in [(0, 0, 0, 0, 0, 0, 0, 0), (1, 2, 1, 0, 2, 1, 13, 5)]:
        row = ((bh * (gw // 2) + bw) * 2 + mh) * 2 + mw
        col = c * 392 + t * 196 + py * 14 + px
        y, xx = (bh * 2 + mh) * 14 + py, (bw * 2 + mw) * 14 + px
        assert ours.pixel_values[row, col] == x[y, xx, c]


def test_digest_follows_content():
    a, b = noise(64, 64, seed=1), noise(64, 64, seed=2)
    assert preprocess(a).digest == preprocess(a.copy()).digest
    assert preprocess(a).digest != preprocess(b).digest
    big = noise(640, 480, seed=3)
    assert preprocess(big).digest != preprocess(big, max_pixels=100_000).digest


@pytest.mark.parametrize(
    "height, width, expected",
    [
        (37, 513, (28, 504)),
        (14, 14, (56, 56)),  # grown to min_pixels with ceil
        (42, 42, (56, 56)),  # round(1.5) = 2 (banker's), then 56*56 >= min
        (70, 70, (56, 56)),  # round(2.5) = 2, banker's rounding
        (1500, 2000, (1232, 1652)),  # shrunk with floor
    ],
)
def test_smart_resize_matches_hf(height, width, expected):
    assert smart_resize(height, width) == expected
    assert hf_pil.smart_resize(height, width, 28, MIN_PIXELS, MAX_PIXELS) == expected


def test_smart_resize_rejects_extreme_aspect():
    with pytest.raises(ImageError, match="aspect ratio of 300:1"):
        smart_resize(10, 3000)
    assert smart_resize(10, 2000)  # exactly 200:1 is allowed, as in HF


def test_zero_size_rejected(tmp_path):
    with pytest.raises(ImageError, match="zero size"):
        preprocess(Image.new("RGB", (0, 12)))
    path = tmp_path / "empty.png"
    path.write_bytes(raw_png(0, 12, 8, 2, b""))
    with pytest.raises(ImageError, match=r"empty\.png is not an image"):
        load_image(path)


def test_aspect_300_to_1_rejected(tmp_path):
    path = tmp_path / "strip.png"
    Image.new("RGB", (900, 3)).save(path)
    with pytest.raises(ImageError, match=r"strip\.png is 900x3, an aspect ratio of 300:1"):
        load_image(path)


def test_truncated_file_rejected(tmp_path):
    path = tmp_path / "cut.jpg"
    path.write_bytes(encoded(noise(300, 300, seed=4), "JPEG")[:2000])
    with pytest.raises(ImageError, match=r"cut\.jpg is truncated or damaged"):
        load_image(path)


def test_text_file_rejected(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a picture\n")
    with pytest.raises(ImageError, match=r"notes\.txt is not an image .* use a PNG, JPEG"):
        load_image(path)
    with pytest.raises(ImageError, match="cannot read image"):
        load_image(tmp_path / "missing.png")


@pytest.mark.parametrize(
    "width, height, pixels",
    [(10_000, 10_001, "100,010,000 pixels"), (20_000, 20_000, "400000000 pixels")],
)
def test_decompression_bomb_rejected(tmp_path, width, height, pixels):
    """Headers claiming huge sizes are refused before any pixel is decoded."""
    path = tmp_path / "bomb.png"
    path.write_bytes(raw_png(width, height, 8, 2, b""))
    with pytest.raises(ImageError, match=rf"bomb\.png .*{pixels}") as err:
        load_image(path)
    assert "downscale" in str(err.value)
