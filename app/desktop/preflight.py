"""What must hold before Qt may start, checked in milliseconds so that a fresh machine gets
one line instead of Qt's abort: a display to draw on (Wayland or X), and the system
libraries of the platform plugin that would draw on it (Qt aborts inside the
QApplication constructor when either is missing). Linux only; an explicit
QT_QPA_PLATFORM (offscreen, wayland, ...) is the user's choice and is left alone.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

TERMINAL_HINT = "or chat in the terminal with `lantern run MODEL`"

PLUGINS = {"wayland": "libqwayland.so", "xcb": "libqxcb.so"}

# the platform plugins' system libraries: soname stem -> (Debian/Ubuntu, Fedora) package
PACKAGES = {
    "libwayland-client": ("libwayland-client0", "libwayland-client"),
    "libwayland-cursor": ("libwayland-cursor0", "libwayland-cursor"),
    "libwayland-egl": ("libwayland-egl1", "libwayland-egl"),
    "libxcb-cursor": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxkbcommon-x11": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libxkbcommon": ("libxkbcommon0", "libxkbcommon"),
    "libxcb-icccm": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-image": ("libxcb-image0", "xcb-util-image"),
    "libxcb-keysyms": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-render-util": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-util": ("libxcb-util1", "xcb-util"),
    "libxcb-randr": ("libxcb-randr0", "libxcb"),
    "libxcb-render": ("libxcb-render0", "libxcb"),
    "libxcb-shape": ("libxcb-shape0", "libxcb"),
    "libxcb-shm": ("libxcb-shm0", "libxcb"),
    "libxcb-sync": ("libxcb-sync1", "libxcb"),
    "libxcb-xfixes": ("libxcb-xfixes0", "libxcb"),
    "libxcb-xinerama": ("libxcb-xinerama0", "libxcb"),
    "libxcb-xinput": ("libxcb-xinput0", "libxcb"),
    "libxcb-xkb": ("libxcb-xkb1", "libxcb"),
    "libxcb": ("libxcb1", "libxcb"),
    "libX11-xcb": ("libx11-xcb1", "libX11-xcb"),
    "libX11": ("libx11-6", "libX11"),
    "libEGL": ("libegl1", "libglvnd-egl"),
    "libGL": ("libgl1", "libglvnd-glx"),
    "libGLX": ("libglx0", "libglvnd-glx"),
    "libOpenGL": ("libopengl0", "libglvnd-opengl"),
    "libfontconfig": ("libfontconfig1", "fontconfig"),
    "libfreetype": ("libfreetype6", "freetype"),
    "libdbus-1": ("libdbus-1-3", "dbus-libs"),
    "libglib-2.0": ("libglib2.0-0", "glib2"),
    "libgthread-2.0": ("libglib2.0-0", "glib2"),
    "libSM": ("libsm6", "libSM"),
    "libICE": ("libice6", "libICE"),
}


def problem(env: Mapping[str, str] = os.environ, platform: str = sys.platform) -> str | None:
    """One line saying why the window cannot open here, or None when it can."""
    if not platform.startswith("linux") or env.get("QT_QPA_PLATFORM"):
        return None
    display, wayland = env.get("DISPLAY", ""), env.get("WAYLAND_DISPLAY", "")
    reachable = [name for name, up in (("wayland", _wayland_reachable(env)),
                                       ("xcb", bool(display) and _x_reachable(display))) if up]
    if not reachable:
        if not display and not wayland:
            return ("Lantern needs a desktop to show its window, and there is none here "
                    "(neither DISPLAY nor WAYLAND_DISPLAY is set): start it from a desktop "
                    f"session, {TERMINAL_HINT}.")
        shown = f"X display {display}" if display else f"Wayland display {wayland}"
        return (f"Lantern cannot reach the {shown}: start it from a desktop session, "
                f"{TERMINAL_HINT}.")
    errors = [(name, load_error(plugin_dirs(env), PLUGINS[name])) for name in reachable]
    failed = [(name, error) for name, error in errors if error is not None]
    if len(failed) < len(errors):
        return None                    # a platform Qt can use (it tries them in turn)
    name, error = failed[-1]
    return install_line(error, name, missing_libraries(plugin_dirs(env), PLUGINS[name]))


def plugin_dirs(env: Mapping[str, str]) -> list[Path]:
    """Where Qt looks for its platform plugins, in its order."""
    from PySide6.QtCore import QLibraryInfo  # a few ms; the plugin needs QtCore loaded

    extra = [Path(p) for p in env.get("QT_QPA_PLATFORM_PLUGIN_PATH", "").split(os.pathsep) if p]
    return [*extra, Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms"]


def load_error(platforms: list[Path], plugin: str) -> str | None:
    """Load a platform plugin the way Qt will (the first copy that loads wins); the loader's
    error of the first copy when none loads, None when one does (or none is there)."""
    errors = []
    for path in (d / plugin for d in platforms):
        if not path.is_file():
            continue
        try:
            ctypes.CDLL(str(path))
        except OSError as error:
            errors.append(str(error))
            continue
        return None
    return errors[0] if errors else None


def missing_libraries(platforms: list[Path], plugin: str) -> list[str]:
    """Every library the plugin's loader would not find (the loader's own error names
    only the first), as ``ldd`` lists them; empty where ldd is not there."""
    path = next((d / plugin for d in platforms if (d / plugin).is_file()), None)
    ldd = shutil.which("ldd")
    if path is None or ldd is None:
        return []
    try:
        listing = subprocess.run([ldd, str(path)], capture_output=True, text=True,
                                 timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return re.findall(r"^\s*(\S+) => not found", listing, re.MULTILINE)


def install_line(loader_error: str, platform: str = "xcb", missing: list[str] = ()) -> str:
    """`apt install …` / `dnf install …` for the library a loader error names and every
    other one ``missing``, at once (one start, not one per library)."""
    plugin = PLUGINS[platform].split(".so", 1)[0]
    found = [n.rstrip(".") for n in re.findall(r"lib[\w.+-]+?\.so[\w.]*", loader_error)
             if not n.startswith(plugin + ".")]
    libraries = list(dict.fromkeys(found[:1] + list(missing)))
    known = [lib for lib in libraries if lib.split(".so", 1)[0] in PACKAGES]
    if known and len(known) == len(libraries):
        debian = " ".join(dict.fromkeys(PACKAGES[lib.split(".so", 1)[0]][0] for lib in known))
        fedora = " ".join(dict.fromkeys(PACKAGES[lib.split(".so", 1)[0]][1] for lib in known))
        needs = ", ".join(known)
        verb = "is" if len(known) == 1 else "are"
        return (f"Lantern cannot open its window: Qt's {platform} platform plugin needs "
                f"{needs}, which {verb} not installed. Install "
                f"{'it' if len(known) == 1 else 'them'} with `sudo apt install {debian}` "
                f"(Debian/Ubuntu) or `sudo dnf install {fedora}` (Fedora), then start "
                f"Lantern again.")
    unknown = ", ".join(libraries) or "the library named"
    return (f"Lantern cannot open its window: Qt's {platform} platform plugin does not load "
            f"({' '.join(loader_error.split())}). Install the packages that provide "
            f"{unknown} (`apt-file search` / `dnf provides`).")


def _wayland_reachable(env: Mapping[str, str]) -> bool:
    name = env.get("WAYLAND_DISPLAY")
    if not name:
        return False
    path = Path(name) if name.startswith("/") else Path(env.get("XDG_RUNTIME_DIR", "")) / name
    return path.is_socket()


def _x_reachable(display: str, timeout: float = 1.0) -> bool:
    """Connect to the X server the way Xlib would: a local socket, else TCP 6000 + N."""
    match = re.fullmatch(r"(?:[^:/]*/)?(?P<host>[^:]*):(?P<number>\d+)(?:\.\d+)?",
                         display)
    if match is None:
        return Path(display).is_socket()   # launchd-style path
    host, number = match["host"], int(match["number"])
    if host in ("", "unix"):
        for address in (f"\0/tmp/.X11-unix/X{number}", f"/tmp/.X11-unix/X{number}"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as local:
                local.settimeout(timeout)
                try:
                    local.connect(address)
                    return True
                except OSError:
                    continue
        return False
    try:
        socket.create_connection((host, 6000 + number), timeout=timeout).close()
    except OSError:
        return False
    return True
