"""The llama.cpp tab on an image chat (a tiny random-weight Qwen2.5-VL imported with its
projector): the second opinion gives a verdict, the picture's positions left out of the
chart and named; every layer is compared, the picture's rows included and named. So is a
Qwen2.5-VL whose tower sits inside its GGUF; another one-file tower (Gemma 3) is refused with
the reason and what to do."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.catalog.importer import import_gguf
from engine.inspect.llama_pictures import INSIDE
from engine.store import Store
from tests.fixtures.hf_vision import tiny_hf_model, write_pair
from tests.unit.app.chat.test_app_images import (
    NAME,
    TEMPLATE,
    TIMEOUT_MS,
    open_window,
    photo,  # noqa: F401 (a fixture)
    send,
)
from tests.unit.app.chat.test_app_images import vision_store as inline_store  # noqa: F401
from tests.unit.vision.test_gemma3_vision import (
    TEMPLATES,
)


@pytest.fixture(scope="module")
def pair_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("llama-vl") / "models"
    text, projector = write_pair(tiny_hf_model(seed=5), root.parent / "t.gguf",
                                 root.parent / "mmproj.gguf")
    import_gguf(Store.open(root), text, NAME, projector=projector,
                template=TEMPLATE.read_text(encoding="utf-8"))
    return root


def test_the_llama_cpp_tab_on_an_image_chat(qtbot, tmp_path, pair_store, photo):  # noqa: F811
    window = open_window(qtbot, tmp_path / "h.sqlite3", pair_store)
    window.chat.input.attach([str(photo)])
    send(qtbot, window, "What is this?")
    page, inspector = window.panel.opinion, window.inspector
    window.panel.tabs.setCurrentWidget(page)
    page.button.click()
    qtbot.waitUntil(lambda: inspector.opinion_job is None, timeout=TIMEOUT_MS)
    rows = inspector.context.image_rows
    first, last = int(rows[0]), int(rows[-1])
    assert page.status.text().startswith("AGREE"), page.status.text()
    assert f"Positions {first}-{last}, the picture's, are not scored" in page.status.text()
    [series] = page.chart.series
    assert all(math.isnan(v) for v in series.values[first - 1:last])
    assert not any(math.isnan(v) for v in series.values[:first - 1] + series.values[last:])

    page.layers.button.click()
    qtbot.waitUntil(lambda: inspector.layers_job is None, timeout=TIMEOUT_MS)
    status = page.layers.status.text()
    assert status.startswith("AGREE: no layer is off"), status
    assert f"Rows {first}-{last} are the picture's" in status
    assert page.layers.marked is None and len(page.layers.rows.records) == 2


def layers_over_a_picture(qtbot, tmp_path, store: Path, picture: Path):
    """A chat about ``picture`` on ``store``'s model, then "Compare every layer"; the window
    and the layer section once it ended."""
    window = open_window(qtbot, tmp_path / "h.sqlite3", store)
    window.chat.input.attach([str(picture)])
    send(qtbot, window, "What is this?")
    section = window.panel.opinion.layers
    section.button.click()
    qtbot.waitUntil(lambda: window.inspector.layers_job is None, timeout=TIMEOUT_MS)
    return window, section


def test_a_one_file_qwen25vl_is_compared(qtbot, tmp_path, inline_store, photo):  # noqa: F811
    window, section = layers_over_a_picture(qtbot, tmp_path, inline_store, photo)
    rows = window.inspector.context.image_rows
    status = section.status.text()
    assert status.startswith("AGREE: no layer is off"), status
    assert f"Rows {int(rows[0])}-{int(rows[-1])} are the picture's" in status


@pytest.fixture(scope="module")
def gemma_store(gemma, tmp_path_factory) -> Path:  # noqa: F811
    root = tmp_path_factory.mktemp("gemma-inline") / "models"
    import_gguf(Store.open(root), gemma.models["inline"].path, NAME,
                template=(TEMPLATES / "gemma3-instruct.gotmpl").read_text(encoding="utf-8"))
    return root


def test_another_tower_inside_the_gguf_is_refused_with_the_reason(qtbot, tmp_path,
                                                                  gemma_store, photo):  # noqa: F811
    _window, section = layers_over_a_picture(qtbot, tmp_path, gemma_store, photo)
    assert INSIDE in section.status.text() and "--projector" in section.status.text()
    assert section.button.isEnabled() and section.rows.records == []
