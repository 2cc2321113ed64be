"""The user's settings, persisted as JSON under the platformdirs config dir.

Sampling options are stored only when the user set them, under Ollama's names, so the
model's params layer keeps supplying everything the user did not change.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from engine.paths import config_dir


@dataclass
class Settings:
    models_dir: str | None = None          # None: $OLLAMA_MODELS or ~/.ollama/models
    last_model: str | None = None
    options: dict[str, object] = field(default_factory=dict)   # user overrides only
    system: str = ""                        # empty: the model's own system prompt
    num_ctx: int = 4096
    provider: str = "cpu"
    exact: bool = False
    requantize: str = ""                    # "": the GGUF's exact weights; else e.g. "q4/128"
    speculate: str = "auto"                 # auto, off, ngram or a draft model's name
    max_pixels: int = 2_097_152
    layer_stats: bool = False
    color_by_probability: bool = False
    think: bool = True                      # thinking models think (off: Ollama's think=false)
    # remote engines: {"url", "kind", "api_key"} each; the key is kept here only (never in
    # logs or history); mkstemp makes this file readable by its owner alone
    connections: list[dict] = field(default_factory=list)
    builtin_tools: bool = False             # calculator and current time for the model
    # MCP servers: {"name", "target" (a command line or an http(s) URL), "ask"} each
    mcp_servers: list[dict] = field(default_factory=list)
    allowed_tools: list[str] = field(default_factory=list)   # "Always allow" said for these

    @classmethod
    def path(cls) -> Path:
        return config_dir() / "settings.json"

    @classmethod
    def load(cls) -> Settings:
        """Saved settings; unknown keys are ignored and a damaged file gives defaults."""
        try:
            data = json.loads(cls.path().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        if not isinstance(data, dict):
            return cls()
        settings = cls()
        for f in fields(cls):
            value = data.get(f.name)
            default = getattr(settings, f.name)
            if value is None or (default is not None and type(value) is not type(default)):
                continue  # missing, or of the wrong type: keep the default
            setattr(settings, f.name, value)
        return settings

    def save(self) -> None:
        path = self.path()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".settings-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(asdict(self), f, indent=2)
        os.replace(tmp, path)
