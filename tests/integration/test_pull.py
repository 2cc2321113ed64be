"""``lantern pull`` against a real registry (docker-registry on loopback): byte-identical
store, parallel ranges, resume, skip, and every failure leaving the store as it was."""

import errno
import os
import threading
from types import SimpleNamespace

import pytest

from engine.catalog.importer import import_gguf
from engine.cli import main
from engine.errors import (
    Cancelled,
    DigestMismatch,
    DiskFull,
    InvalidName,
    ModelNotFound,
    RegistryError,
    Unauthorized,
)
from engine.gguf import open_model
from engine.store import Store, pull, writer
from engine.store.params import parse_params
from engine.store.pull import pull_model
from tests.fixtures.registry import LocalRegistry, free_port, manifest_digests, store_tree
from tests.fixtures.registry_front import RegistryFront
from tests.fixtures.synthetic_gguf import write_model

KB = 1024


@pytest.fixture(scope="module")
def published(registry, tmp_path_factory) -> str:
    """A tiny qwen2 (GGUF, template, params, config) laid out by `lantern import`, pushed
    as library/tiny:latest; returns the name to pull."""
    scratch = tmp_path_factory.mktemp("publish")
    store = Store.open(scratch / "models")
    gguf = write_model(scratch / "tiny.gguf", "qwen2")
    import_gguf(store, gguf, "tiny", template="{{ .Prompt }}",
                params=parse_params(["temperature=0.5", "stop=<|im_end|>"]))
    registry.push_model(store, "tiny", "library/tiny", "latest")
    return f"{registry.host}/library/tiny:latest"


def _assert_byte_identical(store: Store, registry: LocalRegistry, repository: str) -> None:
    data = registry.manifest_bytes(repository, "latest")
    path = store.manifests_dir / registry.host / repository / "latest"
    assert path.read_bytes() == data == registry.pushed[f"{repository}:latest"]
    for hex_digest in manifest_digests(data):
        assert (store.blobs_dir / f"sha256-{hex_digest}").read_bytes() == \
            registry.blob_data(hex_digest).read_bytes()
    assert [p.name for p in store.blobs_dir.iterdir() if writer.PARTIAL_PREFIX in p.name] == []


def test_pull_is_byte_identical_in_parallel_ranges(tmp_path, registry, published):
    store = Store.open(tmp_path / "models")
    since = registry.access_log_size()
    seen = []
    result = pull_model(store, published, insecure=True, progress=seen.append,
                        part_size=64 * KB, workers=4)
    _assert_byte_identical(store, registry, "library/tiny")
    model = store.get(published)
    assert open_model(model.model_path).config.architecture == "qwen2"
    assert model.template == "{{ .Prompt }}" and model.params["temperature"] == 0.5
    assert len(store.verify(model)) == 4
    gguf_hex = model.model_path.name[7:]
    ranges = [(status, size) for digest, status, size in registry.blob_gets(since)
              if digest == gguf_hex]
    gguf_size = model.model_path.stat().st_size
    assert len(ranges) == -(-gguf_size // (64 * KB)) > 4      # one request per range
    assert all(status == 206 for status, _ in ranges) and sum(s for _, s in ranges) == gguf_size
    assert result.downloaded == result.size == model.size and result.skipped == 0
    assert [p.status for p in seen][0] == "pulling manifest"
    assert seen[-1].status == "success" and seen[-1].completed == seen[-1].total == model.size


def test_cli_pull_list_verify_and_a_second_pull_skips_everything(tmp_path, capsys, registry,
                                                                published):
    models = str(tmp_path / "models")
    assert main(["pull", published, "--insecure", "--models-dir", models]) == 0
    out, err = capsys.readouterr()
    assert "pulling manifest" in err and "verifying sha256 digest" in err
    assert "writing manifest" in err and err.rstrip().endswith("success")
    assert out.startswith(f"pulled {published} (")
    assert main(["list", "--models-dir", models]) == 0
    assert published in capsys.readouterr().out
    assert main(["verify", published, "--models-dir", models]) == 0
    assert "4 blobs match" in capsys.readouterr().out

    since = registry.access_log_size()
    before = store_tree(tmp_path / "models")
    result = pull_model(Store.open(models), published, insecure=True)
    assert result.downloaded == 0 and result.skipped == 4
    assert registry.blob_gets(since) == []
    assert store_tree(tmp_path / "models") == before


def test_interrupted_pull_resumes_with_range_requests(tmp_path, registry, published,
                                                     monkeypatch):
    store = Store.open(tmp_path / "models")
    cancel = threading.Event()
    written = []
    original = writer.ResumableBlob.write

    def write_then_interrupt(self, byte_range, data):
        original(self, byte_range, data)
        written.append(len(data))
        if self.size > 100 * KB and sum(written) > 150 * KB:
            cancel.set()                               # the user pressed Cancel mid-blob

    monkeypatch.setattr(writer.ResumableBlob, "write", write_then_interrupt)
    monkeypatch.setattr(pull, "READ_SIZE", 16 * KB)
    with pytest.raises(Cancelled, match="kept: pull again to resume"):
        pull_model(store, published, insecure=True, cancel=cancel, workers=1)
    tree = store_tree(store.root)
    assert not (store.manifests_dir / registry.host).exists()
    assert all(name.startswith(f"blobs/{writer.PARTIAL_PREFIX}") for name in tree)
    gguf_hex = manifest_digests(registry.pushed["library/tiny:latest"])[1]
    partial = writer.resumable_path(store.blobs_dir, gguf_hex)
    size = registry.blob_data(gguf_hex).stat().st_size
    assert partial.stat().st_size == size                        # sparse, final size
    writer.remove_stale_partials(store.blobs_dir, store.manifests_dir,
                                 now=partial.stat().st_mtime + 3600)
    assert partial.exists()                                      # resumable: not stale

    monkeypatch.setattr(writer.ResumableBlob, "write", original)
    since = registry.access_log_size()
    result = pull_model(store, published, insecure=True)
    fetched = [(status, n) for digest, status, n in registry.blob_gets(since)
               if digest == gguf_hex]
    assert len(fetched) == 1 and fetched[0][0] == 206, fetched
    assert 150 * KB <= size - fetched[0][1] < 200 * KB            # continued, not restarted
    assert result.resumed >= 150 * KB and result.downloaded == result.size - result.resumed
    _assert_byte_identical(store, registry, "library/tiny")


@pytest.fixture
def unique_model(registry, tmp_path) -> tuple[str, list[str]]:
    """A model whose GGUF no other test pushes (so its stored bytes can be corrupted)."""
    scratch = Store.open(tmp_path / "scratch")
    gguf = write_model(tmp_path / f"unique-{tmp_path.name}.gguf", "qwen2",
                       seed=abs(hash(tmp_path.name)) % 10_000)
    import_gguf(scratch, gguf, "unique", template="{{ .Prompt }} unique")
    repository = f"library/unique{free_port()}"
    data = registry.push_model(scratch, "unique", repository, "latest")
    return f"{registry.host}/{repository}:latest", manifest_digests(data)


def test_a_blob_corrupted_in_registry_storage_is_refused(tmp_path, registry, unique_model):
    name, digests = unique_model
    gguf_hex = digests[1]
    data_file = registry.blob_data(gguf_hex)
    content = bytearray(data_file.read_bytes())
    content[len(content) // 2] ^= 0xFF                             # same size, one bit off
    data_file.write_bytes(bytes(content))
    store = Store.open(tmp_path / "models")
    store.blobs_dir.mkdir(parents=True)
    store.manifests_dir.mkdir()
    before = store_tree(store.root)
    with pytest.raises(DigestMismatch, match=f"sha256:{gguf_hex}.*corrupt, nothing was stored"):
        pull_model(store, name, insecure=True)
    assert store_tree(store.root) == before


@pytest.mark.parametrize("case", ["not found", "unreachable", "plain http refused",
                                  "https to an http registry", "disk full at start",
                                  "disk full mid-blob"])
def test_failures_leave_the_store_as_it_was(tmp_path, registry, published, monkeypatch, case):
    store = Store.open(tmp_path / "models")
    store.blobs_dir.mkdir(parents=True)
    store.manifests_dir.mkdir()
    (store.blobs_dir / ("sha256-" + "0" * 64)).write_bytes(b"someone else's blob")
    before = store_tree(store.root)
    name, insecure = published, True
    if case == "not found":
        name, error, message = f"{registry.host}/library/nothing:here", ModelNotFound, \
            "not found in registry 127.0.0.1:.* \\(404\\)"
    elif case == "unreachable":
        name, error, message = f"127.0.0.1:{free_port()}/library/tiny", RegistryError, \
            "cannot reach registry 127.0.0.1:[0-9]+ \\(connection refused\\)"
    elif case == "plain http refused":
        name, insecure = f"http://{published}", False
        error, message = InvalidName, "plain-http registry; allow plain http"
    elif case == "https to an http registry":
        insecure, error, message = False, RegistryError, "allow plain http"
    elif case == "disk full at start":
        monkeypatch.setattr(pull.shutil, "disk_usage", lambda path: SimpleNamespace(free=1000))
        error, message = DiskFull, "not enough space .* free some space and pull again"
    else:
        calls, real_pwrite = [], os.pwrite

        def full_disk(fd, data, offset):
            calls.append(offset)
            if len(calls) > 2:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_pwrite(fd, data, offset)

        monkeypatch.setattr(writer.os, "pwrite", full_disk)
        error, message = DiskFull, "disk full: no space left in .*free some space and pull"
    with pytest.raises(error, match=message):
        pull_model(store, name, insecure=insecure, part_size=64 * KB)
    assert store_tree(store.root) == before


def test_unauthorized_registry_is_one_clear_line(tmp_path, tmp_path_factory, capsys):
    locked = LocalRegistry.start(tmp_path_factory.mktemp("locked"), htpasswd=True)
    try:
        models = tmp_path / "models"
        with pytest.raises(Unauthorized, match="refused access .*401 Unauthorized"):
            pull_model(Store.open(models), f"{locked.host}/library/tiny", insecure=True)
        assert store_tree(models) == {}
        assert main(["pull", f"{locked.host}/library/tiny", "--insecure",
                     "--models-dir", str(models)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("Error: registry 127.0.0.1:") and len(err[-1]) < 200
    finally:
        locked.stop()


def test_stale_cleaning_keeps_resumable_downloads(tmp_path):
    blobs, manifests = tmp_path / "blobs", tmp_path / "manifests"
    blobs.mkdir()
    manifests.mkdir()
    hex_a, hex_b = "a" * 64, "b" * 64
    resumable = writer.resumable_path(blobs, hex_a)
    ranges = resumable.with_name(resumable.name + ".ranges")
    done_already = writer.resumable_path(blobs, hex_b)
    (blobs / f"sha256-{hex_b}").write_bytes(b"b")
    temp = writer.partial_path(blobs)
    for path in (resumable, ranges, done_already, temp):
        path.write_bytes(b"x")
    mtime = resumable.stat().st_mtime
    removed = writer.remove_stale_partials(blobs, manifests, now=mtime + 3600)
    assert sorted(removed) == sorted([done_already, temp])
    removed = writer.remove_stale_partials(blobs, manifests,
                                           now=mtime + writer.RESUMABLE_FOR_S + 1)
    assert sorted(removed) == sorted([resumable, ranges])


@pytest.fixture
def front(registry):
    front = RegistryFront(registry.port)
    yield front
    front.stop()


def test_anonymous_token_flow_and_redirect_to_storage_without_the_token(tmp_path, registry,
                                                                       published, front):
    store = Store.open(tmp_path / "models")
    result = pull_model(store, f"{front.host}/library/tiny", insecure=True)
    data = registry.pushed["library/tiny:latest"]
    manifest = store.manifests_dir / front.host / "library/tiny/latest"   # port in the dir
    assert manifest.read_bytes() == data and result.downloaded == result.size
    for hex_digest in manifest_digests(data):
        assert (store.blobs_dir / f"sha256-{hex_digest}").read_bytes() == \
            registry.blob_data(hex_digest).read_bytes()
    assert front.token_queries == [{"service": ["lantern-test"],
                                    "scope": ["repository:library/tiny:pull"]}]
    authorized = [s for s in front.seen if s.headers.get("Authorization")]
    assert any("/manifests/" in s.path for s in authorized)
    assert len(front.storage_seen) == 4                       # every blob came from storage
    assert all("Authorization" not in s.headers for s in front.storage_seen)


def test_a_refused_token_is_one_unauthorized_line(tmp_path, front):
    front.refuse_token = True
    with pytest.raises(Unauthorized, match="refused an anonymous token .*401"):
        pull_model(Store.open(tmp_path / "models"), f"{front.host}/library/tiny",
                   insecure=True)
    assert store_tree(tmp_path / "models") == {}


def test_a_dropped_connection_continues_with_a_range_request(tmp_path, registry, published,
                                                             front):
    gguf_hex = manifest_digests(registry.pushed["library/tiny:latest"])[1]
    store = Store.open(tmp_path / "models")
    store.blobs_dir.mkdir(parents=True)
    for hex_digest in manifest_digests(registry.pushed["library/tiny:latest"]):
        if hex_digest != gguf_hex:         # only the GGUF is left to fetch
            (store.blobs_dir / f"sha256-{hex_digest}").write_bytes(
                registry.blob_data(hex_digest).read_bytes())
    front.cut_after = 100 * KB
    pull_model(store, f"{front.host}/library/tiny", insecure=True)
    ranges = [s.headers.get("Range") for s in front.storage_seen]
    size = registry.blob_data(gguf_hex).stat().st_size
    assert ranges == [f"bytes=0-{size - 1}", f"bytes={100 * KB}-{size - 1}"]
    assert (store.blobs_dir / f"sha256-{gguf_hex}").read_bytes() == \
        registry.blob_data(gguf_hex).read_bytes()


def test_pulling_an_updated_tag_drops_the_blobs_only_the_old_version_used(
        tmp_path, registry):
    scratch = Store.open(tmp_path / "scratch")
    gguf = write_model(tmp_path / "versioned.gguf", "qwen2", seed=3)
    name = f"{registry.host}/library/versioned:latest"
    store = Store.open(tmp_path / "models")
    old = import_gguf(scratch, gguf, "v1", template="{{ .Prompt }} v1")
    registry.push_model(scratch, "v1", "library/versioned", "latest")
    pull_model(store, name, insecure=True)
    old_template = next(l for l in old.layers if l.media_type.endswith("template"))
    assert (store.blobs_dir / f"sha256-{old_template.hex}").exists()
    import_gguf(scratch, gguf, "v2", template="{{ .Prompt }} v2")
    registry.push_model(scratch, "v2", "library/versioned", "latest")
    result = pull_model(store, name, insecure=True)
    assert result.skipped == 2 and result.downloaded == len("{{ .Prompt }} v2")
    _assert_byte_identical(store, registry, "library/versioned")
    assert not (store.blobs_dir / f"sha256-{old_template.hex}").exists()
    assert len(list(store.blobs_dir.iterdir())) == 3          # GGUF, new template, config


def test_https_is_the_default_and_its_certificate_is_checked(tmp_path, tmp_path_factory,
                                                             monkeypatch):
    secure = LocalRegistry.start(tmp_path_factory.mktemp("secure"), tls=True)
    try:
        scratch = Store.open(tmp_path / "scratch")
        import_gguf(scratch, write_model(tmp_path / "tls.gguf", "qwen2", seed=5), "tls")
        secure.push_model(scratch, "tls", "library/tls", "latest")
        name = f"{secure.host}/library/tls"
        store = Store.open(tmp_path / "models")
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "nothing.pem"))
        with pytest.raises(RegistryError, match="certificate of 127.0.0.1:[0-9]+ is not trusted"):
            pull_model(store, name)
        assert store_tree(store.root) == {}
        monkeypatch.setenv("SSL_CERT_FILE", str(secure.root / "cert.pem"))   # trust it
        result = pull_model(store, name)                       # no --insecure: https
        assert result.downloaded == result.size
        assert store.get(name).manifest_path.read_bytes() == secure.pushed["library/tls:latest"]
    finally:
        secure.stop()
