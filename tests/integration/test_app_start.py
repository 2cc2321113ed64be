"""A clear start: where Qt would abort (no display, a system library of the xcb plugin
missing) the real entry point prints one line and exits 1. The plugin is made
unloadable by pointing Qt at a copy of it that needs a library no system has."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.desktop import preflight

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the xcb checks are Linux's")


def environment(**env: str) -> dict[str, str]:
    """This environment without any display or Qt platform choice, plus `env`."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM",
                          "QT_QPA_PLATFORM_PLUGIN_PATH")}
    return {**clean, **env}


def start(env: dict[str, str]) -> subprocess.CompletedProcess:
    """`lantern` with no command, as a user starts it."""
    return subprocess.run([sys.executable, "-c", "import sys; from app.launcher import main; "
                           "sys.exit(main([]))"], env=environment(**env), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def fake_x_server() -> tuple[socket.socket, str]:
    """A loopback listener where an X server would be (DISPLAY=127.0.0.1:N, port 6000+N)."""
    for number in range(50, 400):
        listener = socket.socket()
        try:
            listener.bind(("127.0.0.1", 6000 + number))
        except OSError:
            listener.close()
            continue
        listener.listen(4)
        return listener, f"127.0.0.1:{number}"
    pytest.skip("no free port for a fake X server")


def without_xcb_cursor(tmp_path: Path) -> str:
    """LD_LIBRARY_PATH under which libxcb-cursor.so.0 cannot load (an empty file found
    first): Qt then aborts exactly as on a machine without the package."""
    (tmp_path / "libxcb-cursor.so.0").write_bytes(b"")
    return str(tmp_path)


def test_no_display_is_one_line_and_exit_1() -> None:
    result = start({})
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "neither DISPLAY nor WAYLAND_DISPLAY is set" in result.stderr
    assert "lantern run MODEL" in result.stderr


def test_a_display_nobody_answers_is_one_line_and_exit_1() -> None:
    listener, display = fake_x_server()
    listener.close()                                   # nobody there any more
    result = start({"DISPLAY": display})
    assert result.returncode == 1
    assert result.stderr.strip() == (f"Lantern cannot reach the X display {display}: start "
                                     "it from a desktop session, or chat in the terminal "
                                     "with `lantern run MODEL`.")


def test_a_missing_system_library_names_the_package(tmp_path) -> None:
    listener, display = fake_x_server()
    try:
        result = start({"DISPLAY": display, "LD_LIBRARY_PATH": without_xcb_cursor(tmp_path)})
    finally:
        listener.close()
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "needs libxcb-cursor.so.0, which is not installed" in result.stderr
    assert "`sudo apt install libxcb-cursor0` (Debian/Ubuntu)" in result.stderr
    assert "`sudo dnf install xcb-util-cursor` (Fedora)" in result.stderr


def test_on_a_real_display_qt_aborts_where_lantern_says_what_to_install(tmp_path) -> None:
    if shutil.which("Xvfb") is None:
        pytest.fail("Xvfb is not installed: apt-get install xvfb (.ci/run does)")
    number = next(n for n in range(140, 400) if not Path(f"/tmp/.X11-unix/X{n}").exists())
    server = subprocess.Popen(["Xvfb", f":{number}", "-screen", "0", "640x480x24"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not Path(f"/tmp/.X11-unix/X{number}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        env = {"DISPLAY": f":{number}", "LD_LIBRARY_PATH": without_xcb_cursor(tmp_path)}
        plain_qt = subprocess.run(
            [sys.executable, "-c", "from PySide6.QtWidgets import QApplication; "
             "QApplication([])"], env=environment(**env), capture_output=True, timeout=60)
        assert plain_qt.returncode in (134, -6), plain_qt.stderr   # the abort users saw
        result = start(env)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert result.returncode == 1
    assert "`sudo apt install libxcb-cursor0`" in result.stderr


@pytest.mark.timing
def test_a_normal_start_costs_less_than_starting_python() -> None:
    # judged against a yardstick timed here, so a slow or busy machine slows both
    listener, display = fake_x_server()
    try:
        preflight.problem({"DISPLAY": display})       # QtCore import paid once
        began = time.perf_counter()
        assert preflight.problem({"DISPLAY": display}) is None
        took = time.perf_counter() - began
    finally:
        listener.close()
    began = time.perf_counter()
    subprocess.run([sys.executable, "-S", "-c", "pass"], check=True, timeout=60)
    python_start = time.perf_counter() - began
    assert took < python_start, (f"the start-up check took {took * 1000:.0f} ms, more than "
                                 f"starting a bare Python ({python_start * 1000:.0f} ms)")


def test_an_explicit_platform_is_left_alone() -> None:
    assert preflight.problem({"QT_QPA_PLATFORM": "offscreen"}) is None
    assert preflight.problem({}, platform="darwin") is None


@pytest.mark.parametrize("error, debian, fedora", [
    ("libxkbcommon-x11.so.0: cannot open shared object file: No such file or directory",
     "libxkbcommon-x11-0", "libxkbcommon-x11"),
    ("libEGL.so.1: cannot open shared object file: No such file or directory",
     "libegl1", "libglvnd-egl"),
])
def test_loader_errors_map_to_packages(error: str, debian: str, fedora: str) -> None:
    line = preflight.install_line(error)
    assert f"apt install {debian}`" in line and f"dnf install {fedora}`" in line


def fake_wayland(tmp_path: Path) -> tuple[socket.socket, dict[str, str]]:
    """A listening socket where a Wayland compositor would be."""
    runtime = tmp_path / "run"
    runtime.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(runtime / "wayland-9"))
    listener.listen(1)
    return listener, {"XDG_RUNTIME_DIR": str(runtime), "WAYLAND_DISPLAY": "wayland-9"}


def test_wayland_without_its_libraries_names_the_package(tmp_path) -> None:
    listener, env = fake_wayland(tmp_path)
    (tmp_path / "libwayland-client.so.0").write_bytes(b"")
    try:
        result = start({**env, "LD_LIBRARY_PATH": str(tmp_path)})
    finally:
        listener.close()
    assert result.returncode == 1
    assert "Qt's wayland platform plugin needs libwayland-" in result.stderr
    assert "`sudo apt install libwayland-" in result.stderr


def test_a_wayland_session_whose_plugin_fails_falls_back_to_x(tmp_path) -> None:
    listener, env = fake_wayland(tmp_path)
    x_listener, display = fake_x_server()
    (tmp_path / "libwayland-client.so.0").write_bytes(b"")
    try:
        result = subprocess.run(
            [sys.executable, "-c", "import os; from app.desktop import preflight; "
             "print(preflight.problem(os.environ))"],
            env=environment(**env, DISPLAY=display, LD_LIBRARY_PATH=str(tmp_path)), cwd=ROOT,
            capture_output=True, text=True, timeout=60)
    finally:
        listener.close()
        x_listener.close()
    assert result.stdout.strip() == "None", result.stderr


def test_every_missing_library_is_named_at_once() -> None:
    error = "libxcb-icccm.so.4: cannot open shared object file: No such file or directory"
    line = preflight.install_line(error, "xcb", ["libxcb-icccm.so.4", "libxcb-keysyms.so.1",
                                                 "libxcb-cursor.so.0"])
    assert "needs libxcb-icccm.so.4, libxcb-keysyms.so.1, libxcb-cursor.so.0, which are" in line
    assert "`sudo apt install libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0`" in line
    assert "`sudo dnf install xcb-util-wm xcb-util-keysyms xcb-util-cursor`" in line


def test_ldd_lists_the_libraries_a_plugin_misses(tmp_path) -> None:
    # a plugin linked against two libraries no system has: both are named
    source = tmp_path / "p.c"
    source.write_text("void f(void) {}\n")
    for name in ("liblantern-gone-a.so.4", "liblantern-gone-b.so.1"):
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / name), str(source),
                        f"-Wl,-soname,{name}"], check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libqxcb.so"), str(source),
                    "-Wl,--no-as-needed",
                    "-L", str(tmp_path), "-l:liblantern-gone-a.so.4", "-l:liblantern-gone-b.so.1"],
                   check=True)
    for name in ("liblantern-gone-a.so.4", "liblantern-gone-b.so.1"):
        (tmp_path / name).unlink()
    assert preflight.missing_libraries([tmp_path], "libqxcb.so") == [
        "liblantern-gone-a.so.4", "liblantern-gone-b.so.1"]
