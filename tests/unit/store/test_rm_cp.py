"""``lantern rm`` (blob garbage collection that never touches a blob in use) and ``lantern cp``."""

import pytest

from engine.cli import main
from engine.errors import LanternError, ModelNotFound
from engine.store import Store
from engine.store.copy_remove import copy_model, plan_removal, remove_model
from tests.fixtures.registry import store_tree
from tests.fixtures.stores import StoreBuilder


@pytest.fixture
def shared(tmp_path) -> StoreBuilder:
    """Two models sharing one GGUF, each with its own template; plus a broken manifest."""
    builder = StoreBuilder(tmp_path / "models")
    builder.add("a:1", model=b"GGUF shared weights", template="A {{ .Prompt }}")
    builder.add("b:1", model=b"GGUF shared weights", template="B {{ .Prompt }}",
                system="only b")
    return builder


def test_rm_keeps_blobs_other_models_use(shared, capsys):
    store = Store.open(shared.root)
    a, b = store.get("a:1"), store.get("b:1")
    plan = plan_removal(store, "a:1")
    own_template = next(l for l in a.layers if l.media_type.endswith("template"))
    assert [p.name for p in plan.blobs] == [f"sha256-{own_template.hex}"]
    assert plan.freed == own_template.size and plan.shared == 2     # GGUF and config
    assert main(["rm", "a:1", "--models-dir", str(shared.root)]) == 0
    assert capsys.readouterr().out == \
        f"deleted 'a:1' (freed {own_template.size} B, 2 blobs kept for other models)\n"
    assert not a.manifest_path.exists()
    assert not (shared.root / "manifests/registry.ollama.ai/library/a").exists()
    assert b.model_path.exists() and store.verify(store.get("b:1"))
    assert not (store.blobs_dir / f"sha256-{own_template.hex}").exists()

    removal = remove_model(store, "b:1")
    assert removal.shared == 0 and removal.freed == b.size
    assert store_tree(shared.root) == {}                  # every blob gone, no empty dirs
    assert (shared.root / "manifests").is_dir() and (shared.root / "blobs").is_dir()


def test_rm_never_deletes_a_blob_an_unreadable_manifest_mentions(shared):
    store = Store.open(shared.root)
    b = store.get("b:1")
    broken = store.manifests_dir / "registry.ollama.ai/library/broken/1"
    broken.parent.mkdir(parents=True)
    broken.write_text(f"not json, but mentions {b.model_path.name[7:]}")
    remove_model(store, "b:1")
    remove_model(store, "a:1")
    assert b.model_path.exists()


def test_cp_shares_blobs_and_is_byte_identical(shared, capsys):
    store = Store.open(shared.root)
    before = store_tree(shared.root)
    assert main(["cp", "a:1", "me/copy:v2", "--models-dir", str(shared.root)]) == 0
    assert capsys.readouterr().out == "copied 'a:1' to 'me/copy:v2'\n"
    copy = store.get("me/copy:v2")
    assert copy.manifest_path.read_bytes() == store.get("a:1").manifest_path.read_bytes()
    after = store_tree(shared.root)
    assert set(after) - set(before) == {"manifests/registry.ollama.ai/me/copy/v2"}
    assert plan_removal(store, "a:1").freed == 0          # the copy uses every blob
    with pytest.raises(ModelNotFound, match="did you mean"):
        copy_model(store, "a:2", "c")
    assert main(["rm", "nothing", "--models-dir", str(shared.root)]) == 1
    assert capsys.readouterr().err.startswith("Error: model 'nothing:latest' not found")


def test_a_blob_that_cannot_be_deleted_is_named(shared, monkeypatch):
    store = Store.open(shared.root)
    remove_model(store, "a:1")
    gguf = store.get("b:1").model_path
    real_unlink = type(gguf).unlink

    def in_use(path, missing_ok=False):
        if path == gguf:
            raise PermissionError(13, "Permission denied")
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(type(gguf), "unlink", in_use)
    with pytest.raises(LanternError, match=f"deleted 'b:1', but 1 of its files could not be "
                                           f"removed: {gguf.name} \\(Permission denied\\)"):
        remove_model(store, "b:1")
    assert store.list() == [] and gguf.exists()
