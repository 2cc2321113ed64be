"""Images in the window with a tiny random-weight Qwen2.5-VL: an image dropped on the window
becomes a thumbnail, is sent with the message (its rows in the prompt, marked in the
panel's Prompt tab, sized by the max_pixels setting), shows in the sent message, and is
read again from its path after a restart. A file gone by send time is a clear error."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QLabel

from app.conversations.history import History
from app.settings.store import Settings
from app.window import MainWindow
from engine.catalog.importer import import_gguf
from engine.store import Store
from engine.vision.preprocess import preprocess
from tests.fixtures.synthetic_gguf import write_model

TIMEOUT_MS = 60_000
NAME = "tiny-vl:latest"
TEMPLATE = Path(__file__).parents[3] / "data" / "templates" / "qwen2.5vl.gotmpl"
MAX_PIXELS = 100_000            # below the default, so the setting visibly matters


@pytest.fixture(scope="module")
def vision_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("vision") / "models"
    gguf = write_model(root.parent / "vl.gguf", "qwen25vl", seed=7)
    import_gguf(Store.open(root), gguf, NAME, template=TEMPLATE.read_text(encoding="utf-8"))
    return root


@pytest.fixture
def photo(tmp_path) -> Path:
    path = tmp_path / "photo.png"
    pixels = np.random.default_rng(0).integers(0, 255, (300, 420, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


def open_window(qtbot, history: Path, models_dir: Path) -> MainWindow:
    settings = Settings(models_dir=str(models_dir), max_pixels=MAX_PIXELS,
                        options={"temperature": 0.0, "num_predict": 4})
    window = MainWindow(settings, History(history), auto_load=False)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.models.row_of(NAME) >= 0 and
                    window.models.entry(window.models.row_of(NAME)).checked, timeout=TIMEOUT_MS)
    window.models_controller.load(window.models.entry(window.models.row_of(NAME)))
    qtbot.waitUntil(lambda: window.controller.model is not None, timeout=TIMEOUT_MS)
    assert window.controller.vision
    return window


def drop(window: MainWindow, path: Path) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    window.dropEvent(QDropEvent(QPointF(500, 400), Qt.CopyAction, mime, Qt.LeftButton,
                                Qt.NoModifier))


def send(qtbot, window: MainWindow, text: str):
    with qtbot.waitSignal(window.controller.answerDone, timeout=TIMEOUT_MS) as done:
        window.chat.input.editor.setPlainText(text)
        window.chat.input.submit()
    return done.args[0]


def shown_images(widget) -> list[QLabel]:
    return [label for label in widget.findChildren(QLabel, "messageImage")
            if label.pixmap() is not None and not label.pixmap().isNull()]


def test_dropped_image_is_sent_shown_and_marked_in_the_prompt(qtbot, tmp_path, vision_store,
                                                               photo):
    window = open_window(qtbot, tmp_path / "h.sqlite3", vision_store)
    drop(window, photo)
    assert window.chat.input.images == [str(photo)] and len(window.chat.input.thumbnails()) == 1

    done = send(qtbot, window, "What is in this picture?")
    assert done.eval_count == 4
    user, answer = window.chat.view.messages
    assert user.images == (str(photo),) and len(shown_images(user)) == 1
    assert answer.text == done.text and not window.chat.input.images   # input cleared

    expected = preprocess(photo, max_pixels=MAX_PIXELS).n_tokens
    assert expected < preprocess(photo).n_tokens          # the setting was applied
    prompt = window.controller.session.last_prompt
    assert prompt.image_rows is not None and len(prompt.image_rows) == expected
    rows = [r for r in window.panel.prompt.prompt_model.records if r.image]
    assert [r.position for r in rows] == [int(i) for i in prompt.image_rows]
    assert {r.piece for r in rows} == {"<|image_pad|>"}
    assert len({r.rope for r in rows}) == expected           # one (t, h, w) per merged patch
    assert not window.panel.prompt.prompt_table.isColumnHidden(3)
    assert f"{expected} of them carry image embeddings" in window.panel.prompt.prompt_label.text()
    stored = window.history.messages(window.controller.conversation_id)
    assert stored[0].images == (str(photo),)


def test_image_survives_a_restart_and_is_read_again(qtbot, tmp_path, vision_store, photo):
    history = tmp_path / "h.sqlite3"
    first = open_window(qtbot, history, vision_store)
    first.chat.input.attach([str(photo)])
    send(qtbot, first, "Describe it.")
    first.close()

    second = open_window(qtbot, history, vision_store)
    second.open_conversation(second.conversations.conversations[0].id)
    user, _answer = second.chat.view.messages
    assert user.images == (str(photo),) and len(shown_images(user)) == 1
    send(qtbot, second, "And the colours?")
    session = second.controller.session
    [restored] = session.messages[0].images
    assert restored.digest == preprocess(photo, max_pixels=MAX_PIXELS).digest
    assert len(session.last_prompt.image_rows) == restored.n_tokens


def test_an_image_gone_by_send_time_is_reported_in_the_banner(qtbot, tmp_path, vision_store,
                                                             photo):
    window = open_window(qtbot, tmp_path / "h.sqlite3", vision_store)
    window.chat.input.attach([str(photo)])
    photo.unlink()
    with qtbot.waitSignal(window.controller.answerFailed, timeout=TIMEOUT_MS):
        window.chat.input.editor.setPlainText("What is this?")
        window.chat.input.submit()
    assert window.banner.level == "error" and "photo.png" in window.banner.text.text()
    # a message that got no answer returns to the input (to send again without the image)
    assert window.chat.view.messages == []
    assert window.chat.input.editor.toPlainText() == "What is this?"
    assert not window.controller.busy and window.chat.input.send_button.text() == "Send"


def test_reference_check_on_an_image_prompt(qtbot, tmp_path, vision_store, photo):
    window = open_window(qtbot, tmp_path / "h.sqlite3", vision_store)
    window.chat.input.attach([str(photo)])
    send(qtbot, window, "What is this?")
    with qtbot.waitSignal(window.checks.checkDone, timeout=TIMEOUT_MS) as checked:
        window.panel.reference.check_button.click()
    report = checked.args[0]
    assert report.n_tokens == len(window.controller.session.last_prompt)
    assert report.ok and window.panel.reference.verdict.property("ok") == "yes"
    send(qtbot, window, "Thanks.")                    # the image rows are prefilled again
    assert len(window.controller.session.last_prompt.image_rows) == \
        preprocess(photo, max_pixels=MAX_PIXELS).n_tokens
