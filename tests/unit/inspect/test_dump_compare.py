"""engine.inspect.dump_compare, which `lantern debug --dump / --against` and the app share:
a dump cut short (cancelled, a failed write) never reads as complete; a dump of another
model is refused before the reference runs, naming what differs; the ids note says where
the dump's ids leave the expected ones; the logits alone off point at the head."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engine.chat.prompt_tokens import PromptTokens
from engine.errors import Remedy
from engine.gguf import open_model
from engine.inspect.dump_compare import compare_dump, export_dump, first_difference
from engine.inspect.inspection import InspectionCancelled
from engine.reference import forward
from engine.reference.against import HEAD
from engine.reference.dump import Dump, DumpError, read_dump, write_dump
from tests.fixtures.synthetic_gguf import TextSpec, write_model

IDS = [5, 17, 3, 42, 8, 11]
CONTEXT = PromptTokens.text(IDS)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dumpcompare")
    return open_model(write_model(folder / "qwen2.gguf", "qwen2", TextSpec(layers=3),
                                  std=0.2, seed=4))


def test_an_export_reads_back_as_the_reference_and_compares_clean(model, tmp_path):
    stages = []
    dump = export_dump(model, "tiny", CONTEXT, tmp_path / "d",
                       progress=lambda stage, fraction: stages.append(fraction))
    assert stages == sorted(stages) and stages[-1] == 1.0 and len(stages) == 3 + 3
    back = read_dump(tmp_path / "d")
    reference = forward(model, np.asarray(IDS))
    np.testing.assert_array_equal(back.ids, IDS)
    for state, ref in zip(back.hidden_states, reference.hidden_states, strict=True):
        np.testing.assert_array_equal(state, ref)
    np.testing.assert_array_equal(back.logits, reference.logits)
    assert back.model == dump.model == "tiny"
    comparison = compare_dump(model, "tiny", tmp_path / "d", expected=CONTEXT)
    assert comparison.result.ok and comparison.differ_at is None
    assert comparison.ids_note("the prompt") is None and comparison.model == "tiny"


def test_logits_alone_off_point_at_the_head_and_other_ids_are_noted(model, tmp_path):
    export_dump(model, "tiny", CONTEXT, tmp_path)
    logits = np.load(tmp_path / "logits.npy")
    np.save(tmp_path / "logits.npy", logits * 1.1)
    comparison = compare_dump(model, "tiny", tmp_path, expected=PromptTokens.text(IDS[:3] + [9, 9]))
    result = comparison.result
    assert result.first_off == len(result.rows) and result.suspects == (HEAD,)
    assert result.logits.max_abs == pytest.approx(float(np.abs(0.1 * logits).max()), rel=1e-5)
    assert comparison.differ_at == 3
    assert comparison.ids_note("the prompt").startswith(
        "the dump's ids differ from the prompt from position 3")
    assert first_difference(IDS, IDS[:4]) == 4 and first_difference(IDS, IDS) is None


def test_a_cancelled_or_failed_export_leaves_no_complete_dump(model, tmp_path, monkeypatch):
    cancel = threading.Event()

    def progress(stage: str, fraction: float) -> None:
        if stage.startswith("Reference: block 2"):
            cancel.set()

    with pytest.raises(InspectionCancelled):
        export_dump(model, "tiny", CONTEXT, tmp_path / "new", progress=progress, cancel=cancel)
    assert not (tmp_path / "new").exists()

    export_dump(model, "tiny", CONTEXT, tmp_path / "old")           # then overwritten, failing
    saved = []

    def failing_save(path, array) -> None:
        if len(saved) == 2:
            raise OSError(28, "No space left on device")
        saved.append(path)
        with open(path, "wb") as file:
            np.lib.format.write_array(file, np.asarray(array))

    monkeypatch.setattr("engine.reference.dump.np.save", failing_save)
    with pytest.raises(DumpError, match="could not be written to .*: No space left on device"):
        export_dump(model, "tiny", CONTEXT, tmp_path / "old")
    with pytest.raises(DumpError, match="is not a dump: it has no manifest.json"):
        read_dump(tmp_path / "old")


def test_a_folder_of_other_files_is_refused_untouched(tmp_path):
    (tmp_path / "thesis.tex").write_text("mine")
    dump = Dump("m", np.arange(2), [np.zeros((2, 4), np.float32)], None)
    with pytest.raises(DumpError, match=r"holds files that are not a dump's \(thesis.tex\)"):
        write_dump(tmp_path, dump)
    assert [p.name for p in tmp_path.iterdir()] == ["thesis.tex"]


@pytest.mark.parametrize("edit, message", [
    (lambda d: Dump(d.model, d.ids, d.hidden_states[:-1], d.logits),
     r"holds 3 hidden states of width 64 .*; tiny has 4 .* of width 64: the dump is of "
     r"another model"),
    (lambda d: Dump(d.model, d.ids, [s[:, :32] for s in d.hidden_states], d.logits),
     r"holds 4 hidden states of width 32"),
    (lambda d: Dump(d.model, d.ids + 10**6, d.hidden_states, d.logits),
     r"ids.npy holds token id 1000042, outside tiny's vocabulary of \d+"),
    (lambda d: Dump(d.model, d.ids, d.hidden_states, d.logits[:, :10]),
     r"the logits have shape \(6, 10\); tiny's are \[6, \d+\]"),
])
def test_a_dump_of_another_model_is_refused_before_the_reference_runs(model, tmp_path,
                                                                      monkeypatch, edit,
                                                                      message):
    ours = export_dump(model, "tiny", CONTEXT, tmp_path / "ours")
    write_dump(tmp_path / "theirs", edit(ours))
    monkeypatch.setattr("engine.inspect.dump_compare.forward_context", None)    # never reached
    with pytest.raises(DumpError, match=message) as raised:
        compare_dump(model, "tiny", tmp_path / "theirs")
    assert raised.value.remedy is Remedy.DUMP_MODEL
