"""``lantern list | show | import | verify`` run in-process, plus one real subprocess."""

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.cli import main
from engine.store import Store
from engine.store.humanize import human_bytes, human_time
from tests.fixtures.stores import StoreBuilder
from tests.fixtures.synthetic_gguf import write_model, write_qwen2vl_pair


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def models(tmp_path) -> Path:
    return tmp_path / "models"


@pytest.fixture
def tiny(tmp_path, models, capsys) -> Path:
    """A store holding a tiny qwen2 imported with every optional layer."""
    gguf = write_model(tmp_path / "tiny.gguf", "qwen2")
    template = tmp_path / "template.txt"
    template.write_text("{{ if .System }}{{ .System }}{{ end }}{{ .Prompt }}{{ .Tools }}")
    code = main(["import", str(gguf), "tiny:1", "--template", str(template),
                 "--system", "Be brief.\nReally.\nVery.", "--param", "temperature=0.5",
                 "--param", "stop=<|im_end|>", "--param", "num_ctx=8192",
                 "--models-dir", str(models)])
    assert code == 0
    assert capsys.readouterr().out.startswith("imported tiny:1 (")
    return models


def test_human_formats_follow_ollama():
    assert human_bytes(999) == "999 B"
    assert human_bytes(1_500) == "1.5 KB"
    assert human_bytes(491_400_064) == "491 MB"
    assert human_bytes(4_700_000_000) == "4.7 GB"
    assert human_bytes(2_000_000_000) == "2 GB"
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert human_time(now - timedelta(seconds=30), now) == "30 seconds ago"
    assert human_time(now - timedelta(seconds=90), now) == "About a minute ago"
    assert human_time(now - timedelta(hours=5), now) == "5 hours ago"
    assert human_time(now - timedelta(days=3), now) == "3 days ago"
    assert human_time(now - timedelta(days=40), now) == "5 weeks ago"
    assert human_time(now + timedelta(hours=2), now) == "2 hours from now"


def test_list_table_and_json(capsys, models):
    builder = StoreBuilder(models)
    builder.add("qwen2.5vl:3b", mtime=1_700_000_000)
    builder.add("user/other:q4", model=b"GGUF other", mtime=1_600_000_000)
    broken = builder.write_manifest("broken", b"{")
    code, out, err = run(capsys, "list", "--models-dir", str(models))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "ID", "SIZE", "MODIFIED"]
    first = Store.open(models).get("qwen2.5vl:3b")
    assert lines[1].split()[:4] == ["qwen2.5vl:3b", first.short_id, str(first.size), "B"]
    assert lines[1].endswith("years ago")
    assert lines[2].startswith("user/other:q4 ")
    assert lines[0].index("ID") == lines[1].index(first.short_id)   # aligned columns
    assert f"skipped {broken}" in err and "not valid JSON" in err

    code, out, _ = run(capsys, "list", "--json", "--models-dir", str(models))
    entry = json.loads(out)["models"][0]
    assert entry == {
        "name": "qwen2.5vl:3b", "model": "qwen2.5vl:3b", "modified_at": entry["modified_at"],
        "size": first.size, "digest": first.digest,
        "details": {"parent_model": "model.gguf", "format": "gguf", "family": "qwen2",
                    "families": ["qwen2"], "parameter_size": "494.03M",
                    "quantization_level": "Q4_K_M"},
    }
    assert datetime.fromisoformat(entry["modified_at"]).timestamp() == 1_700_000_000


def test_show_human_summary(capsys, tiny):
    code, out, _ = run(capsys, "show", "tiny:1", "--models-dir", str(tiny))
    assert code == 0
    assert out.startswith("  Model\n    architecture ")
    rows = {line.split("  ")[2].strip(): line.split()[-1] for line in out.splitlines()
            if line.startswith("    ") and len(line.split()) >= 2}
    assert rows["architecture"] == "qwen2" and rows["quantization"] == "F32"
    assert "context length" in out and "embedding length" in out
    assert "  Capabilities\n    completion\n    tools\n" in out
    assert 'stop           "<|im_end|>"' in out
    assert "  System\n    Be brief.\n    Really.\n    ...\n" in out


def test_show_json_mirrors_api_show(capsys, tiny):
    code, out, _ = run(capsys, "show", "tiny:1", "--json", "--models-dir", str(tiny))
    info = json.loads(out)
    assert code == 0
    assert info["template"].startswith("{{ if .System }}")
    assert info["system"] == "Be brief.\nReally.\nVery."
    assert info["parameters"].splitlines() == [
        "num_ctx                        8192",
        'stop                           "<|im_end|>"',
        "temperature                    0.5",
    ]
    assert info["details"]["family"] == "qwen2" and info["details"]["parent_model"] == "tiny.gguf"
    model_info = info["model_info"]
    assert model_info["general.architecture"] == "qwen2"
    assert "general.name" not in model_info and "tokenizer.chat_template" not in model_info
    assert model_info["tokenizer.ggml.tokens"] == []          # arrays > 5 emptied, as Ollama
    assert model_info["general.parameter_count"] > 0
    assert info["capabilities"] == ["completion", "tools"]
    assert "projector_info" not in info
    assert info["modelfile"].splitlines()[3] == ""
    assert "PARAMETER stop <|im_end|>" in info["modelfile"]


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("--system", "Be brief.\nReally.\nVery."),
        ("--template", "{{ if .System }}{{ .System }}{{ end }}{{ .Prompt }}{{ .Tools }}"),
        ("--license", "\n"),
    ],
)
def test_show_single_part(capsys, tiny, flag, expected):
    code, out, _ = run(capsys, "show", "tiny:1", flag, "--models-dir", str(tiny))
    assert code == 0 and out == expected


def test_show_vision_layouts(capsys, tmp_path, models):
    inline = write_model(tmp_path / "inline.gguf", "qwen25vl")
    text, mmproj = write_qwen2vl_pair(tmp_path / "text.gguf", tmp_path / "mmproj.gguf")
    assert main(["import", str(inline), "inline", "--models-dir", str(models)]) == 0
    assert main(["import", str(text), "pair", "--projector", str(mmproj),
                 "--models-dir", str(models)]) == 0
    capsys.readouterr()

    _, out, _ = run(capsys, "show", "inline", "--json", "--models-dir", str(models))
    info = json.loads(out)
    assert "vision" in info["capabilities"] and "projector_info" not in info
    assert info["details"]["family"] == "qwen25vl"

    _, out, _ = run(capsys, "show", "pair", "--json", "--models-dir", str(models))
    info = json.loads(out)
    assert "vision" in info["capabilities"]
    projector = info["projector_info"]
    assert projector["general.architecture"] == "clip"
    assert projector["clip.projector_type"] == "qwen2.5vl_merger"
    assert projector["general.parameter_count"] > 0

    _, out, _ = run(capsys, "show", "pair", "--models-dir", str(models))
    assert "  Projector\n    architecture        clip\n" in out


def test_show_surfaces_a_truncated_gguf_blob(capsys, tiny):
    model = Store.open(tiny).get("tiny:1")
    model.model_path.unlink()                     # break the link, keep the source intact
    model.model_path.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x01" * 20)
    code, out, err = run(capsys, "show", "tiny:1", "--models-dir", str(tiny))
    assert code == 1 and out == ""
    assert err.startswith("Error: ") and err.count("\n") == 1

    code, _, err = run(capsys, "verify", "tiny:1", "--models-dir", str(tiny))
    assert code == 1 and "expected sha256:" in err and model.layers[0].hex in err


def test_verify_ok(capsys, tiny):
    code, out, _ = run(capsys, "verify", "tiny:1", "--models-dir", str(tiny))
    assert code == 0 and "5 blobs match" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["show", "tiny:2"], "did you mean tiny:1"),
        (["show", "bad..name/x:y"], "the namespace 'bad..name'"),
        (["import", "nope.gguf", "x"], "GGUF file nope.gguf does not exist"),
        (["import", "nope.gguf", "x", "--param", "top_k=lots"], "top_k='lots'"),
    ],
)
def test_errors_are_one_line(capsys, tiny, argv, says):
    code, out, err = run(capsys, *argv, "--models-dir", str(tiny))
    assert code == 1 and out == ""
    assert err.startswith("Error: ") and says in err and err.count("\n") == 1


def test_missing_store_explains_how_to_point_at_one(capsys, tmp_path):
    code, _, err = run(capsys, "list", "--models-dir", str(tmp_path / "none"))
    assert code == 1
    assert str(tmp_path / "none") in err and "OLLAMA_MODELS" in err and "--models-dir" in err


def test_subprocess_prints_no_traceback(tmp_path):
    builder = StoreBuilder(tmp_path / "models")
    builder.write_manifest("broken", b"not json")
    result = subprocess.run(
        [sys.executable, "-m", "engine.cli", "show", "broken", "--models-dir",
         str(tmp_path / "models")],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[3],
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("Error: manifest ") and "not valid JSON" in result.stderr


def test_demo_model_imported_and_shown(capsys, tmp_path, demo_05b):
    models = tmp_path / "models"
    assert main(["import", str(demo_05b), "qwen2.5-coder:0.5b", "--models-dir", str(models)]) == 0
    capsys.readouterr()
    _, out, _ = run(capsys, "show", "qwen2.5-coder:0.5b", "--json", "--models-dir", str(models))
    info = json.loads(out)
    details = info["details"]
    assert details["family"] == "qwen2" and details["quantization_level"] == "Q4_K_M"
    # This GGUF stores output.weight separately: Ollama counts it (630.17M, not 494.03M).
    assert details["parameter_size"] == "630.17M"
    assert info["model_info"]["general.parameter_count"] == 630_167_424
    assert info["model_info"]["qwen2.context_length"] == 32768
    # No Go template layer: Ollama reads tools support off the GGUF chat template.
    assert info["capabilities"] == ["tools", "completion"]
    _, out, _ = run(capsys, "list", "--json", "--models-dir", str(models))
    (entry,) = json.loads(out)["models"]
    config_size = Store.open(models).get("qwen2.5-coder:0.5b").manifest.config.size
    assert entry["size"] == demo_05b.stat().st_size + config_size
    assert entry["details"]["parent_model"] == demo_05b.name
