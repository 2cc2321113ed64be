"""Launcher integration without a desktop: the .desktop entry, icons and GGUF mime type
installed into a temp XDG data dir, the Exec line's quoting, where resources/ is found
(checkout, bundle, wheel), and how ``lantern`` routes a .gguf or window options to the app."""

import configparser
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from app import launcher
from app.desktop import desktop_entry
from app.desktop.desktop_entry import exec_line, install, quote_exec_arg
from app.desktop.resources import resources_dir

ROOT = Path(__file__).resolve().parents[4]
MIME_NS = "{http://www.freedesktop.org/standards/shared-mime-info}"


def read_entry(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(path, encoding="utf-8")
    return dict(parser["Desktop Entry"])


def test_install_writes_entry_icons_and_mime_type(tmp_path):
    program = "/opt/My Apps/lantern"
    entry = install(tmp_path, [program, "--theme", "dark"])

    fields = read_entry(entry.desktop_file)
    assert entry.desktop_file == tmp_path / "applications" / "lantern.desktop"
    assert fields["Exec"] == '"/opt/My Apps/lantern" --theme dark %f'
    assert fields["TryExec"] == program
    assert fields["Icon"] == "lantern"
    assert fields["MimeType"] == "application/x-gguf;"
    assert fields["Type"] == "Application" and fields["Terminal"] == "false"

    hicolor = tmp_path / "icons" / "hicolor"
    for size in (16, 32, 48, 128, 256, 512):
        assert (hicolor / f"{size}x{size}" / "apps" / "lantern.png").is_file()
    assert (hicolor / "scalable" / "apps" / "lantern.svg").is_file()
    assert len(entry.icons) == len(list((ROOT / "resources" / "icons").glob("lantern*.png"))) + 1

    mime = ET.parse(entry.mime_file).getroot().find(f"{MIME_NS}mime-type")
    assert mime.get("type") == "application/x-gguf"
    assert mime.find(f"{MIME_NS}glob").get("pattern") == "*.gguf"
    assert mime.find(f"{MIME_NS}magic/{MIME_NS}match").get("value") == "GGUF"


def test_install_refreshes_the_mime_database(tmp_path):
    if shutil.which("update-mime-database") is None:
        pytest.fail("update-mime-database is not installed: apt-get install shared-mime-info")
    entry = install(tmp_path, ["/usr/bin/lantern"])
    assert "update-mime-database" in entry.refreshed
    assert "application/x-gguf:*.gguf" in (tmp_path / "mime" / "globs2").read_text()


def test_the_installed_entry_is_valid(tmp_path):
    if shutil.which("desktop-file-validate") is None:
        pytest.fail("desktop-file-validate is not installed: apt-get install desktop-file-utils")
    entry = install(tmp_path, ["/opt/My Apps/lantern"])
    result = subprocess.run(["desktop-file-validate", str(entry.desktop_file)],
                            capture_output=True, text=True)
    assert result.returncode == 0 and "error" not in result.stdout, result.stdout


@pytest.mark.parametrize(("arg", "quoted"), [
    ("/usr/bin/lantern", "/usr/bin/lantern"),
    ("/home/a b/lantern", '"/home/a b/lantern"'),
    ("/x/100%", "/x/100%%"),
    ("/x/$HOME`q`", r'"/x/\$HOME\`q\`"'),
    ('/x/say "hi"', r'"/x/say \"hi\""'),
])
def test_exec_arguments_are_quoted_as_the_spec_requires(arg, quoted):
    assert quote_exec_arg(arg) == quoted


def test_a_backslash_is_escaped_twice_in_the_file():
    # quoting makes \ into \\, the file's string escaping doubles that again
    assert exec_line(["C:\\Lantern dir\\lantern"]) == '"C:\\\\\\\\Lantern dir\\\\\\\\lantern" %f'


def test_cli_flag_installs_for_this_interpreter(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert launcher.main(["--install-desktop-entry"]) == 0
    fields = read_entry(tmp_path / "applications" / "lantern.desktop")
    assert fields["Exec"] == f"{quote_exec_arg(sys.executable)} -m app %f"
    assert "Exec=" in capsys.readouterr().out


def test_a_frozen_bundle_launches_itself(monkeypatch):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setenv("APPIMAGE", "/apps/Lantern.AppImage")
    assert desktop_entry.launch_command() == ["/apps/Lantern.AppImage"]
    monkeypatch.delenv("APPIMAGE")
    assert desktop_entry.launch_command() == [sys.executable]


def test_resources_are_found_in_the_checkout_and_in_a_bundle(tmp_path, monkeypatch):
    assert resources_dir() == ROOT / "resources"
    (tmp_path / "resources").mkdir()
    (tmp_path / "resources" / "style.qss").write_text("")
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert resources_dir() == tmp_path / "resources"


@pytest.mark.parametrize(("argv", "desktop"), [
    ([], True),
    (["model.GGUF"], True),
    (["--models-dir", "/m", "--self-test"], True),
    (["list"], False),
    (["--version"], False),
    (["--install-desktop-entry"], False),
    (["import", "x.gguf", "name"], False),
])
def test_lantern_routes_files_and_window_options_to_the_app(argv, desktop):
    assert launcher.wants_desktop(argv) is desktop
