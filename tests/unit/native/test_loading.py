"""engine.native says why the custom-op library cannot be used, and the engine then runs
MatMulNBits (tests/unit/runtime/test_decoder_native.py runs both paths)."""

from __future__ import annotations

from engine.native import ENV, custom_ops, load


def test_a_missing_library_says_to_build_it(tmp_path):
    ops = load(tmp_path / "_lantern_ops.so")
    assert not ops.available and not ops.reads(8, 32)
    assert "was not built; install a C compiler and run `pip install -e .` again" in ops.why
    assert ops.describe().startswith("ONNX Runtime's MatMulNBits, weights repacked (")


def test_a_library_that_does_not_load_says_why(tmp_path):
    broken = tmp_path / "_lantern_ops.so"
    broken.write_bytes(b"not a shared library")
    ops = load(broken)
    assert not ops.available and ops.why.startswith("_lantern_ops.so does not load: ")


def test_the_environment_turns_it_off(monkeypatch):
    monkeypatch.setenv(ENV, "off")
    assert custom_ops().why == f"turned off by {ENV}"
