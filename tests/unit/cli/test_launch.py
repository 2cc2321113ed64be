"""engine.launch opens a chat the same way for the CLI and the app, wherever the model runs."""

import pytest

from engine.catalog.importer import import_gguf
from engine.chat.options import Options
from engine.errors import RemoteError
from engine.launch import (
    EngineChoices,
    Where,
    load_local,
    open_chat,
    options_for,
    ready_model,
    speculate,
)
from engine.remote.connection import Connection
from engine.remote.records import RemoteModelInfo
from engine.remote.session import RemoteModel, RemoteSession
from engine.runtime.loaded_model import LoadedModel
from engine.runtime.session import LocalSession
from engine.store import Store
from tests.fixtures.synthetic_gguf import TextSpec, write_model


def test_a_local_chat_opens_with_the_users_settings(tmp_path):
    path = write_model(tmp_path / "tiny.gguf", "qwen2", TextSpec(vocab=400), seed=5)
    assert options_for(path, {"top_k": 3}) == Options(top_k=3)  # a bare GGUF has no params
    model = load_local(path, EngineChoices(exact=True), 128)
    assert model.num_ctx == 128 and model.provider == "cpu" and model.row_invariant
    assert model.weights == "exact GGUF weights" and model.requantization is None
    chat = open_chat(model, options_for(model, {"temperature": 0}), system="Be brief.",
                     num_top=3, think=False)
    assert isinstance(chat, LocalSession)
    assert (chat.options.temperature, chat.system, chat.num_top, chat.think) == \
        (0, "Be brief.", 3, False)
    assert speculate(chat, "ngram", None) is None and chat.drafter.name == "ngram"
    assert speculate(chat, "off", None) is None and chat.drafter is None


def test_a_servers_chat_opens_the_same_way_and_never_speculates():
    model = RemoteModel(Connection("http://127.0.0.1:9"), RemoteModelInfo("big"))
    chat = open_chat(model, options_for(model, {"seed": 4}), num_top=7)
    assert isinstance(chat, RemoteSession)
    assert chat.options == Options(seed=4) and chat.num_top == 7
    assert speculate(chat, "ngram", None) is None and not hasattr(chat, "drafter")


def test_ready_model_asks_a_named_server_and_loads_here_when_no_shared_server_answers(
        tmp_path, monkeypatch):
    store = Store.open(tmp_path / "models")
    import_gguf(store, write_model(tmp_path / "tiny.gguf", "qwen2", TextSpec(vocab=400),
                                   seed=5), "tiny")
    monkeypatch.setenv("LANTERN_HOST", "127.0.0.1:9")   # no Lantern server answers there
    model = ready_model(store.get("tiny"), Where(shared=store.root), EngineChoices(),
                        {"num_ctx": 128})
    assert isinstance(model, LoadedModel) and model.num_ctx == 128
    stages = []
    with pytest.raises(RemoteError, match="cannot reach 127.0.0.1:9"):
        ready_model("tiny", Where(server=Connection("http://127.0.0.1:9")), EngineChoices(),
                    {}, progress=lambda stage, fraction: stages.append(stage))
    assert stages == ["Asking 127.0.0.1:9"]          # asked, nothing loaded here
