#!/usr/bin/env bash
# Build the Linux bundle and prove it works headless (not part of pytest: it takes minutes).
#   packaging/smoke_test.sh [--no-build]
# 1. builds dist/lantern with packaging/build.py (skip with --no-build)
# 2. checks the bundle left out what it must not carry (torch, transformers, pytest, tests)
# 3. makes a store with two tiny synthetic GGUFs through the bundle's own `lantern import`
# 4. starts the window under Xvfb (real X11, xcb plugin) with --self-test three times: it
#    must list both models; the wall time of each start is printed
# 5. starts Lantern, then a second start with a .gguf: the first must receive it
# Needs: the dev venv (.venv, for the GGUF writer), xvfb-run, ImageMagick's `import`.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
BUNDLE="$ROOT/dist/lantern/lantern"

if [[ -z "${DISPLAY:-}" ]]; then        # run the whole script inside one X server
    exec xvfb-run -a -s "-screen 0 1400x900x24" "$0" "$@"
fi
if [[ "${1:-}" != "--no-build" ]]; then
    "$PYTHON" "$ROOT/packaging/build.py"
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LANTERN_CONFIG_DIR="$WORK/config" LANTERN_DATA_DIR="$WORK/data" \
       LANTERN_CACHE_DIR="$WORK/cache" LANTERN_LOG_DIR="$WORK/log"
unset OLLAMA_MODELS QT_QPA_PLATFORM

echo "== bundle: $(du -sh "$ROOT/dist/lantern" | cut -f1), archive: $(du -sh "$ROOT"/dist/lantern-*-linux-*.tar.gz | cut -f1)"
for unwanted in torch transformers accelerate pytest tests onnx/backend/test PySide6/Qt/translations; do
    if [[ -e "$ROOT/dist/lantern/_internal/$unwanted" ]]; then
        echo "FAIL: the bundle carries $unwanted"; exit 1
    fi
done
echo "== left out: torch transformers accelerate pytest tests onnx test data Qt translations"

cd "$ROOT"
"$PYTHON" -c "
from tests.fixtures.synthetic_gguf import write_model
write_model('$WORK/tiny.gguf', 'qwen2')
write_model('$WORK/tiny-vl.gguf', 'qwen25vl')"
cd "$WORK"
"$BUNDLE" --version
"$BUNDLE" import "$WORK/tiny.gguf" tiny-qwen2:smoke --models-dir "$WORK/models"
"$BUNDLE" import "$WORK/tiny-vl.gguf" tiny-vision:smoke --models-dir "$WORK/models"

for run in 1 2 3; do
    start=$(date +%s.%N)
    "$BUNDLE" --models-dir "$WORK/models" --self-test --screenshot "$WORK/window.png" \
        > "$WORK/self-test.txt"
    end=$(date +%s.%N)
    printf '== start %d: process wall time %.2f s\n' "$run" "$(echo "$end - $start" | bc)"
done
cat "$WORK/self-test.txt"
grep -q "^tiny-qwen2:smoke	.*qwen2" "$WORK/self-test.txt"
grep -q "^tiny-vision:smoke	.*qwen25vl" "$WORK/self-test.txt"
grep -q "Qt platform: xcb" "$WORK/self-test.txt"
cp "$WORK/window.png" "$ROOT/dist/smoke-window.png"

"$BUNDLE" --models-dir "$WORK/models" &
first=$!
sleep 5
"$BUNDLE" "$WORK/tiny.gguf"          # a second start: hands the file over and exits 0
sleep 2
import -window root "$ROOT/dist/smoke-handoff.png"
kill "$first"; wait "$first" || true
grep "another start asked to open \['$WORK/tiny.gguf'\]" "$WORK/log/lantern.log"
echo "== screenshots: dist/smoke-window.png (self-test grab), dist/smoke-handoff.png (X screen)"
echo "SMOKE TEST PASSED"
