"""Models an Ollama store holds in a form Lantern does not read, said in one line each.

Lantern runs GGUF weights. Two kinds of manifest carry none (facts from ollama
manifest/layer.go, x/create and types/model/config.go):
- a model for Ollama's MLX engine: its config blob says ``model_format: safetensors``, its
  weights are ``tensor`` layers (safetensors blobs, one per named tensor group) and its
  Hugging Face files ``json`` layers (``config.json`` names the family);
- a cloud model: its config blob names the ``remote_host`` that runs it, and no layer
  holds weights.
Such a model stays listed with what it is, instead of being reported as damaged.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from engine.store import manifest as mf

HF_CONFIG = "config.json"       # the json layer that names an MLX model's family


def mlx_family(config: dict[str, object], hf_config: dict[str, object] | None) -> str:
    """The family an MLX model names: config.json's model_type, else its first
    architecture, else the config blob's model_family; "" when none does."""
    hf_config = hf_config or {}
    architectures = hf_config.get("architectures")
    first = architectures[0] if isinstance(architectures, list) and architectures else ""
    for value in (hf_config.get("model_type"), first, config.get("model_family")):
        if isinstance(value, str) and value:
            return value
    return ""


def foreign_format(manifest: mf.Manifest, config: dict[str, object],
                   hf_config: dict[str, object] | None) -> str | None:
    """What a manifest without GGUF weights holds, and why Lantern cannot run it; None when
    it is not one of the known kinds (a GGUF model, or a damaged manifest)."""
    kinds = {layer.media_type for layer in manifest.layers}
    if mf.MEDIA_MODEL in kinds:
        return None
    if mf.MEDIA_TENSOR in kinds or config.get("model_format") == "safetensors":
        family = mlx_family(config, hf_config) or "family not recorded"
        quantization = config.get("file_type")
        what = ", ".join(str(part) for part in (family, "safetensors weights", quantization)
                         if part)
        return (f"an MLX model ({what}) that only Ollama's MLX engine runs; Lantern runs "
                f"GGUF weights only")
    url = config.get("remote_host")
    if isinstance(url, str) and url:
        host = urlsplit(url).hostname or url
        remote = config.get("remote_model")
        on = f"{remote} on {host}" if isinstance(remote, str) and remote else host
        return (f"a cloud model ({on}): its weights are not in the store, and Lantern runs "
                f"models from their weights on this computer")
    return None
