"""Ollama's own gpt-oss layout ("gptoss") read under llama.cpp's tensor names, so that one
set of names serves the config, the inventory, the graph and the reference.

Ollama's converter names the attention's output projection attn_out, writes the sinks
without a ``.weight`` suffix and calls the MLP's input norm ffn_norm where llama.cpp's
writes post_attention_norm; its fused ffn_gate_up_exps keeps its name
(TextConfig.fused_gate_up_experts).
"""

from __future__ import annotations

from dataclasses import replace

from engine.gguf.reader import TensorInfo

# a block tensor's name after "blk.N." -> llama.cpp's
GPTOSS_NAMES = {
    "attn_out.weight": "attn_output.weight",
    "attn_out.bias": "attn_output.bias",
    "attn_sinks": "attn_sinks.weight",
    "ffn_norm.weight": "post_attention_norm.weight",
}


def llama_cpp_names(tensors: dict[str, TensorInfo]) -> dict[str, TensorInfo]:
    """The tensors of a "gptoss" file under llama.cpp's names (the same bytes)."""
    out = {}
    for name, tensor in tensors.items():
        block, _, part = name.partition(".")[2].partition(".")
        if name.startswith("blk.") and part in GPTOSS_NAMES:
            name = f"blk.{block}.{GPTOSS_NAMES[part]}"
            tensor = replace(tensor, name=name)
        out[name] = tensor
    return out
