"""``lantern --install-desktop-entry``: make Lantern a launcher-menu application for the
current user — the .desktop entry, the icon in every hicolor size and the GGUF mime type,
under ``$XDG_DATA_HOME`` (default ``~/.local/share``), with an Exec line that starts this
very install (the bundle's executable, or this interpreter with ``-m app``).

No Qt here: it runs from the command line before any window exists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from app.desktop.resources import resources_dir

APP_ID = "lantern"
MIME_XML = "lantern-gguf.xml"
# Characters the Desktop Entry spec reserves: an argument holding one must be quoted.
_RESERVED = re.compile(r"[\s\"'\\><~|&;$*?#()`]")


@dataclass(frozen=True)
class InstalledEntry:
    """What ``install`` wrote and which cache refreshers ran."""

    desktop_file: Path
    icons: tuple[Path, ...]
    mime_file: Path
    exec_line: str
    refreshed: tuple[str, ...]       # e.g. ("update-desktop-database", "update-mime-database")


def data_home() -> Path:
    value = os.environ.get("XDG_DATA_HOME", "").strip()
    return Path(value) if value else Path.home() / ".local" / "share"


def launch_command() -> list[str]:
    """How a launcher starts this install: an AppImage or frozen bundle runs itself; from
    source or a wheel, this interpreter runs the app package (as ``lantern-gui`` does)."""
    if getattr(sys, "frozen", False):
        return [os.environ.get("APPIMAGE") or sys.executable]
    return [sys.executable, "-m", "app"]


def quote_exec_arg(arg: str) -> str:
    """One Exec argument, double-quoted (with \\ " ` $ escaped) when the spec requires it."""
    if not _RESERVED.search(arg):
        return arg.replace("%", "%%")
    escaped = re.sub(r'([\\"`$])', r"\\\1", arg).replace("%", "%%")
    return f'"{escaped}"'


def exec_line(command: list[str]) -> str:
    """The Exec value as written in the file: the string-level escape (a backslash doubled)
    applies on top of the argument quoting."""
    return (" ".join(quote_exec_arg(arg) for arg in command) + " %f").replace("\\", "\\\\")


def desktop_entry_text(template: str, command: list[str]) -> str:
    """The shipped entry with its Exec line (and a TryExec for an absolute program)."""
    lines = [line for line in template.splitlines() if not line.startswith("TryExec=")]
    out = []
    for line in lines:
        if line.startswith("Exec="):
            out.append(f"TryExec={command[0]}")
            line = f"Exec={exec_line(command)}"
        out.append(line)
    return "\n".join(out) + "\n"


def _icon_files(source: Path) -> list[tuple[Path, str]]:
    """(shipped icon, hicolor sub-path) for every PNG size and the SVG."""
    found = []
    for png in sorted(source.glob(f"{APP_ID}-*.png")):
        size = png.stem.rsplit("-", 1)[1]
        if size.isdigit():
            found.append((png, f"{size}x{size}/apps/{APP_ID}.png"))
    svg = source / f"{APP_ID}.svg"
    if svg.is_file():
        found.append((svg, f"scalable/apps/{APP_ID}.svg"))
    return found


def _refresh(tool: str, *args: str) -> bool:
    """Run a cache refresher if this system has it; a failing one only costs freshness."""
    program = shutil.which(tool)
    if program is None:
        return False
    try:
        return subprocess.run([program, *args], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def install(target: Path | None = None, command: list[str] | None = None,
            resources: Path | None = None) -> InstalledEntry:
    """Write the entry, icons and mime type under ``target`` (default: XDG data home)."""
    target = target or data_home()
    command = command or launch_command()
    resources = resources or resources_dir()
    applications = target / "applications"
    mime_root = target / "mime"
    applications.mkdir(parents=True, exist_ok=True)
    (mime_root / "packages").mkdir(parents=True, exist_ok=True)

    desktop_file = applications / f"{APP_ID}.desktop"
    template = (resources / f"{APP_ID}.desktop").read_text(encoding="utf-8")
    desktop_file.write_text(desktop_entry_text(template, command), encoding="utf-8")
    mime_file = mime_root / "packages" / MIME_XML
    shutil.copyfile(resources / MIME_XML, mime_file)
    icons = []
    for source, sub_path in _icon_files(resources / "icons"):
        icon = target / "icons" / "hicolor" / sub_path
        icon.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, icon)
        icons.append(icon)

    refreshers = (("update-mime-database", str(mime_root)),
                  ("update-desktop-database", str(applications)),
                  ("gtk-update-icon-cache", "-f", "-t", str(target / "icons" / "hicolor")))
    refreshed = tuple(tool for tool, *args in refreshers if _refresh(tool, *args))
    return InstalledEntry(desktop_file, tuple(icons), mime_file, exec_line(command), refreshed)


def main() -> int:
    """The CLI's ``--install-desktop-entry``: install and say what was written."""
    entry = install()
    print(f"Installed {entry.desktop_file}")
    print(f"  Exec={entry.exec_line}")
    print(f"  {len(entry.icons)} icons under {entry.icons[0].parents[2] if entry.icons else '-'}")
    print(f"  mime type application/x-gguf: {entry.mime_file}")
    print(f"  refreshed: {', '.join(entry.refreshed) or 'nothing (no refresher found)'}")
    return 0
