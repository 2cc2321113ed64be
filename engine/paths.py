"""Where Lantern keeps its own files (never inside the user's Ollama store).

``LANTERN_CACHE_DIR`` / ``LANTERN_DATA_DIR`` / ``LANTERN_CONFIG_DIR`` override the
platformdirs locations (tests and portable installs use them).
"""

import os
from pathlib import Path

import platformdirs

APP_NAME = "lantern"


def _dir(env: str, default: str) -> Path:
    value = os.environ.get(env, "").strip()
    path = Path(value) if value else Path(default)
    return path


def cache_dir() -> Path:
    """Rebuildable data: serialized tokenizers, repacked weights."""
    return _dir("LANTERN_CACHE_DIR", platformdirs.user_cache_dir(APP_NAME))


def data_dir() -> Path:
    """User data that must survive: conversation history."""
    return _dir("LANTERN_DATA_DIR", platformdirs.user_data_dir(APP_NAME))


def config_dir() -> Path:
    """User settings."""
    return _dir("LANTERN_CONFIG_DIR", platformdirs.user_config_dir(APP_NAME))


def log_dir() -> Path:
    return _dir("LANTERN_LOG_DIR", platformdirs.user_log_dir(APP_NAME))
