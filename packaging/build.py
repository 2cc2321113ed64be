"""Build Lantern's double-clickable bundle for the platform this runs on.

    python packaging/build.py [--appdir]

Runs PyInstaller on packaging/lantern.spec (work files in build/pyinstaller, output in
dist/), then packs the result for download and prints its size:
  Linux    dist/lantern/ -> dist/lantern-<version>-linux-<arch>.tar.gz
           --appdir: also dist/Lantern.AppDir (AppImage layout; packed into an AppImage
           when appimagetool is on PATH)
  macOS    dist/Lantern.app -> dist/Lantern-<version>-macos-<arch>.zip (ditto keeps links)
  Windows  dist/lantern/ -> dist/Lantern-<version>-windows-<arch>.zip
Needs the packaging extra: pip install -e '.[packaging]'.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
sys.path.insert(0, str(ROOT))
from engine import __version__  # noqa: E402


def tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def run_pyinstaller() -> None:
    subprocess.run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean",
                    "--workpath", str(ROOT / "build" / "pyinstaller"), "--distpath", str(DIST),
                    str(ROOT / "packaging" / "lantern.spec")], check=True, cwd=ROOT)


def archive(bundle: Path, system: str) -> Path:
    stem = f"{'lantern' if system == 'linux' else 'Lantern'}-{__version__}-{system}-" \
           f"{platform.machine().lower()}"
    if system == "macos":
        target = DIST / f"{stem}.zip"
        subprocess.run(["ditto", "-c", "-k", "--sequesterRsrc", "--keepParent",
                        str(bundle), str(target)], check=True)
        return target
    kind = "gztar" if system == "linux" else "zip"
    return Path(shutil.make_archive(str(DIST / stem), kind, root_dir=DIST, base_dir=bundle.name))


def appdir(bundle: Path) -> Path:
    """The AppImage layout: AppRun starts the bundle; the entry and icon sit at the top."""
    target = DIST / "Lantern.AppDir"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(bundle, target / "usr" / "lib" / "lantern", symlinks=True)
    resources = ROOT / "resources"
    shutil.copyfile(resources / "lantern.desktop", target / "lantern.desktop")
    shutil.copyfile(resources / "icons" / "lantern-256.png", target / "lantern.png")
    run = target / "AppRun"
    run.write_text('#!/bin/sh\nexec "$(dirname "$(readlink -f "$0")")/usr/lib/lantern/lantern"'
                   ' "$@"\n')
    run.chmod(0o755)
    tool = shutil.which("appimagetool")
    if tool:
        image = DIST / f"Lantern-{__version__}-{platform.machine()}.AppImage"
        subprocess.run([tool, str(target), str(image)], check=True,
                       env={**os.environ, "ARCH": platform.machine()})
        print(f"AppImage: {image} ({image.stat().st_size / 1e6:.0f} MB)")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appdir", action="store_true",
                        help="Linux: also lay out an AppImage AppDir")
    args = parser.parse_args()
    system = {"darwin": "macos", "win32": "windows"}.get(sys.platform, "linux")
    run_pyinstaller()
    bundle = DIST / ("Lantern.app" if system == "macos" else "lantern")
    packed = archive(bundle, system)
    print(f"bundle:  {bundle} ({tree_size(bundle) / 1e6:.0f} MB)")
    print(f"archive: {packed} ({packed.stat().st_size / 1e6:.0f} MB)")
    if args.appdir and system == "linux":
        print(f"AppDir:  {appdir(bundle)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
