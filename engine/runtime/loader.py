"""Load a model from the store (or a bare GGUF) into everything a chat needs.

The pieces come in flow order: GGUF description, then the tokenizer and the decoder session
side by side. Loading reports progress by stage and can be cancelled between stages.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from engine.errors import LanternError
from engine.gguf import open_model
from engine.gguf.requantize import SPECS
from engine.prompt import prepare_template
from engine.runtime.decoder import DecoderSession
from engine.runtime.loaded_model import LoadedModel
from engine.store import LocalModel
from engine.tokenizer import load_tokenizer

Progress = Callable[[str, float], None]   # (stage description, fraction done 0..1)

REQUANTIZATIONS = SPECS  # the opt-in re-quantizations offered to users (CLI, app)


class LoadCancelled(LanternError):
    """The user cancelled loading."""


def load_model(
    source: LocalModel | str | Path,
    *,
    exact: bool = False,
    provider: str = "cpu",
    num_ctx: int = 4096,
    layer_stats: bool = False,
    requantize: str | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> LoadedModel:
    """Open the GGUF, build its tokenizer and decoder; raises LanternError subclasses.

    requantize: opt-in 4-bit weights (one of REQUANTIZATIONS), NOT the GGUF's exact ones;
    ``decoder.weights`` says which ran."""
    start = time.perf_counter_ns()
    report = progress or (lambda stage, fraction: None)

    def checkpoint(stage: str, fraction: float) -> None:
        if cancel is not None and cancel.is_set():
            raise LoadCancelled("loading was cancelled")
        report(stage, fraction)

    if isinstance(source, LocalModel):
        name, path, projector = source.name.display, source.model_path, source.projector_path
        layers = {"template": source.template, "system": source.system,
                  "params": dict(source.params), "preset_messages": list(source.messages)}
    else:
        path = Path(source)
        name, projector, layers = path.name, None, {}
    checkpoint("Reading the GGUF description", 0.0)
    gguf = open_model(path, projector)
    checkpoint("Building the tokenizer", 0.1)
    # ONNX Runtime packs the weights without holding the GIL, so the session is made on a
    # second thread while this one builds the tokenizer (measured: the tokenizer's time
    # disappears into the session's when a core is free;
    # docs/benchmarks-journal.md, 'Where a warm load').
    with ThreadPoolExecutor(1, thread_name_prefix="lantern-session") as pool:
        session = pool.submit(
            DecoderSession, gguf, exact=exact, provider=provider, max_cache_len=num_ctx,
            layer_stats=layer_stats, requantize=requantize,
        )
        try:
            tokenizer = load_tokenizer(path)
            prepare_template(layers.get("template"), gguf.config.chat_template)
            checkpoint("Building the ONNX graph and session", 0.25)
        except BaseException:
            session.cancel()  # a session already being made is finished, then dropped
            raise
        decoder = session.result()
    checkpoint("Ready", 1.0)
    return LoadedModel(
        name=name, gguf=gguf, tokenizer=tokenizer, decoder=decoder, exact=exact,
        load_duration=time.perf_counter_ns() - start, **layers,
    )
