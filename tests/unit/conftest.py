"""Fixtures the tests of several packages share, built once per run: each costs seconds of
HF model building and conversion."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def gemma(tmp_path_factory):
    """A tiny random-weight Gemma 3 with its vision tower, its HF twin and both GGUF
    layouts (tests/unit/vision/test_gemma3_vision.py)."""
    from tests.unit.vision.test_gemma3_vision import build_gemma

    return build_gemma(tmp_path_factory.mktemp("gemma3-vision"))
