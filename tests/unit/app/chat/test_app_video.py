"""Animations in the window: an animated GIF dropped on a Qwen3-VL chat (the tiny random
model of tests/fixtures/hf_qwen3vl.py) becomes a video attachment with a frame-count
badge and is sent as a video (its frames' pads in the prompt); dropped on a Qwen2.5-VL chat
it goes as its first frame, and the banner says so; an MP4 is refused naming the formats
that are accepted."""

from pathlib import Path

import pytest

from app.conversations.history import History
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.importer import import_gguf
from engine.store import Store
from tests.fixtures.hf_qwen3vl import qwen3vl
from tests.fixtures.stores import StoreBuilder
from tests.fixtures.synthetic_gguf import write_model
from tests.unit.app.chat.test_app_images import TEMPLATE, TIMEOUT_MS, drop, send
from tests.unit.vision.test_qwen3vl_video import gif


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """A Qwen3-VL (video) and a Qwen2.5-VL (images only) in one store."""
    root = tmp_path_factory.mktemp("video") / "models"
    qwen = qwen3vl()
    StoreBuilder(root).add("qwen3-vl:tiny", qwen.text.path, projector=qwen.projector,
                           template=TEMPLATE.read_text(encoding="utf-8"),
                           config={"model_format": "gguf", "model_family": "qwen3vl",
                                   "model_type": "1M", "file_type": "F32"})
    import_gguf(Store.open(root), write_model(root.parent / "vl.gguf", "qwen25vl", seed=7),
                "tiny-vl:latest", template=TEMPLATE.read_text(encoding="utf-8"))
    return root


@pytest.fixture
def clip(tmp_path) -> Path:
    path = tmp_path / "clip.gif"
    path.write_bytes(gif())
    return path


def open_window(qtbot, tmp_path: Path, models: Path, name: str) -> MainWindow:
    settings = Settings(models_dir=str(models), options={"temperature": 0.0, "num_predict": 3})
    window = MainWindow(settings, History(tmp_path / "h.sqlite3"), auto_load=False)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.models.row_of(name) >= 0 and
                    window.models.entry(window.models.row_of(name)).checked, timeout=TIMEOUT_MS)
    window.models_controller.load(window.models.entry(window.models.row_of(name)))
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=TIMEOUT_MS)
    return window


def test_a_gif_on_a_qwen3vl_chat_goes_as_a_video(qtbot, tmp_path, models, clip):
    window = open_window(qtbot, tmp_path, models, "qwen3-vl:tiny")
    assert window.chat.input.video
    drop(window, clip)
    [thumb] = window.chat.input.thumbnails()
    assert thumb.animated
    qtbot.waitUntil(lambda: thumb.video is not None, timeout=TIMEOUT_MS)  # read off the GUI
    assert not thumb.badge.isHidden() and thumb.badge.text() == "▶ 5 frames"
    assert "25 frames over 2.5 s; the model sees 5" in thumb.toolTip()
    assert window.banner.level != "warning"
    send(qtbot, window, "What happens?")
    session = window.controller.session
    [video] = session.messages[0].images
    assert video.grid == (3, 10, 12)
    pads = [r for r in window.panel.prompt.prompt_model.records if r.image]
    assert len(pads) == video.n_tokens and {r.piece for r in pads} == {"<|video_pad|>"}
    assert "<0.3 seconds>" in "".join(r.piece for r in window.panel.prompt.prompt_model.records)


def test_a_gif_on_a_model_without_video_goes_as_its_first_frame(qtbot, tmp_path, models, clip):
    window = open_window(qtbot, tmp_path, models, "tiny-vl:latest")
    assert window.controller.vision and not window.chat.input.video
    drop(window, clip)
    [thumb] = window.chat.input.thumbnails()
    qtbot.waitUntil(lambda: thumb.video is not None, timeout=TIMEOUT_MS)
    assert thumb.animated and thumb.badge.isHidden()
    assert window.banner.level == "warning"
    assert "cannot read video: it sees only the first frame of clip.gif" in \
        window.banner.text.text()
    window.chat.input.remove_image(str(clip))
    assert window.banner.level != "warning"     # the warning leaves with the animation


def test_an_mp4_is_refused_naming_the_accepted_formats(qtbot, tmp_path, models):
    window = open_window(qtbot, tmp_path, models, "qwen3-vl:tiny")
    movie = tmp_path / "holiday.mp4"
    movie.write_bytes(b"\x00\x00\x00\x18ftypmp42")
    window.chat.input.attach([str(movie)])
    assert window.chat.input.images == []
    assert window.banner.level == "error"
    assert "animated GIF, WebP or PNG" in window.banner.text.text()
