"""A GGUF of an architecture Lantern does not run says what it is, from the one registry."""

import pytest

from engine.errors import LanternError, Remedy, UnsupportedModel
from engine.gguf import architectures as registry
from engine.gguf import open_model
from tests.fixtures.synthetic_gguf import write_model, write_other_architecture, write_projector


@pytest.mark.parametrize("arch", ["gemma4", "qwen35", "qwen35moe", "gpt-oss", "qwen3moe",
                                  "qwen3vlmoe", "gemma2"])
def test_an_architecture_not_in_the_registry_is_named_with_those_that_run(tmp_path, arch):
    path = write_other_architecture(tmp_path / "m.gguf", arch)
    with pytest.raises(LanternError) as raised:   # a registered one: its keys are missing
        open_model(path)
    message = str(raised.value)
    if arch in registry.ARCHITECTURES:      # taught to Lantern since: no longer refused
        assert "does not run this architecture" not in message
        return
    assert message.startswith(f"{path}: a GGUF model of architecture {arch!r}: Lantern does "
                              "not run this architecture yet (it runs ")
    assert all(name in message for name in registry.ARCHITECTURES)
    assert raised.value.remedy is Remedy.OLLAMA


def test_the_message_follows_the_registry(tmp_path, monkeypatch):
    path = write_model(tmp_path / "m.gguf", "qwen2")
    monkeypatch.setattr(registry, "ARCHITECTURES",
                        {k: v for k, v in registry.ARCHITECTURES.items() if k != "qwen2"})
    with pytest.raises(UnsupportedModel, match="architecture 'qwen2'") as raised:
        open_model(path)
    assert "qwen2," not in str(raised.value) and "qwen3" in str(raised.value)


def test_an_encoder_naming_a_pooling_is_an_embedding_model(tmp_path):
    path = write_other_architecture(tmp_path / "bert.gguf", "nomic-bert",
                                    {"nomic-bert.pooling_type": 1})
    with pytest.raises(UnsupportedModel) as raised:
        open_model(path)
    assert str(raised.value).startswith(
        f"{path}: an embedding model (GGUF, architecture 'nomic-bert'): Lantern does not run "
        "this encoder; it serves embeddings from the architectures it runs (")


def test_a_text_model_with_a_projector_its_family_does_not_read_says_so(tmp_path):
    # LLaVA as Ollama stores it: llama text, a CLIP mmproj whose projector type is "mlp"
    text = write_model(tmp_path / "t.gguf", "llama")
    mmproj = write_projector(tmp_path / "mmproj.gguf", overrides={"clip.projector_type": "mlp"})
    with pytest.raises(UnsupportedModel) as raised:
        open_model(text, mmproj)
    readers = sorted(a.name for a in registry.ARCHITECTURES.values()
                     if a.vision in ("projector", "either"))
    assert str(raised.value) == (
        f"{text}: a 'llama' model with an image projector of type 'mlp': Lantern reads a "
        f"separate image projector only with the architectures {', '.join(readers)}")
    assert raised.value.remedy is Remedy.OLLAMA
