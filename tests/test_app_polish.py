"""Small things a user notices: titles never end in ".…", Send waits for a message, an
info banner goes by itself, a warning about images goes with the images."""

from app.chat import banner as banner_module
from app.chat.banner import Banner
from app.chat.conversation import title_of
from app.chat.input_box import InputBox


def test_a_cut_title_does_not_end_in_punctuation_and_an_ellipsis():
    title = title_of("Explain this. " * 10, ())
    assert title.endswith("…") and not title.endswith(".…") and len(title) <= 48


def test_send_waits_for_something_to_send(qtbot):
    box = InputBox()
    qtbot.addWidget(box)
    box.set_ready(True)
    assert not box.send_button.isEnabled()
    box.editor.setPlainText("hi")
    assert box.send_button.isEnabled()
    box.editor.setPlainText("   ")
    assert not box.send_button.isEnabled()
    box.set_busy(True)
    assert box.send_button.isEnabled()                  # Stop


def test_an_info_goes_by_itself_an_error_stays(qtbot, monkeypatch):
    monkeypatch.setattr(banner_module, "INFO_SECONDS", 0.05)
    banner = Banner()
    qtbot.addWidget(banner)
    banner.show_message("info", "Imported.")
    qtbot.waitUntil(lambda: banner.isHidden(), timeout=2000)
    banner.show_message("error", "Broken.")
    qtbot.wait(200)
    assert banner.isVisible() and banner.level == "error"
