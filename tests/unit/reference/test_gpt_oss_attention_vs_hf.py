"""gpt-oss's attention in the numpy reference against HF transformers' GptOss (fp32, eager):
each layer's attention output, caught at HF's own inputs, for a random-weight model whose
layers alternate sliding (window of 4) and full attention, with sinks, q/k/v and output
biases and YaRN rotary, on a prompt longer than both the window and the original context.
The MoE layers are HF's; only the attention is compared (Lantern's MoE comes separately).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from transformers import GptOssConfig, GptOssForCausalLM

from engine.gguf.config import TextConfig, YarnScaling
from engine.modelmath.rope import text_rope_angles
from engine.reference.text import attention
from engine.reference.weights import LayerWeights

WINDOW, ORIGINAL, FACTOR, THETA = 4, 16, 8.0, 150_000.0
LENGTH = 24


@pytest.fixture(scope="module")
def hf() -> GptOssForCausalLM:
    config = GptOssConfig(
        vocab_size=300, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=2,
        num_experts_per_tok=1, sliding_window=WINDOW, max_position_embeddings=512,
        rope_parameters={"rope_type": "yarn", "factor": FACTOR, "beta_fast": 32.0,
                         "beta_slow": 1.0, "truncate": True, "rope_theta": THETA,
                         "original_max_position_embeddings": ORIGINAL},
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    model = GptOssForCausalLM(config).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.copy_(2 * torch.randn(config.num_attention_heads))
            for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
                getattr(layer.self_attn, proj).bias.normal_(0, 0.5)
    return model


def text_config(hf: GptOssForCausalLM) -> TextConfig:
    c = hf.config
    return TextConfig(
        architecture="gpt-oss", n_layers=c.num_hidden_layers, hidden_size=c.hidden_size,
        intermediate_size=c.intermediate_size, n_heads=c.num_attention_heads,
        n_kv_heads=c.num_key_value_heads, head_dim=c.head_dim, vocab_size=c.vocab_size,
        context_length=c.max_position_embeddings, rms_eps=c.rms_norm_eps, rope_theta=THETA,
        tie_embeddings=False, qkv_bias=True, qk_norm=False, rope_interleaved=False,
        sliding_window=WINDOW,
        sliding_layers=tuple(kind == "sliding_attention" for kind in c.layer_types),
        attention_sinks=True, output_bias=True,
        rope_yarn=YarnScaling(factor=FACTOR, original_context=ORIGINAL),
        rope_attention_factor=float(hf.model.rotary_emb.attention_scaling),
    )


def layer_weights(hf: GptOssForCausalLM, i: int) -> LayerWeights:
    a = hf.model.layers[i].self_attn

    def value(t: torch.Tensor) -> np.ndarray:
        return t.detach().numpy()

    unused = np.zeros(1, np.float32)  # the MLP's and norms' weights: not read by attention
    return LayerWeights(
        attn_norm=unused, ffn_norm=unused, ffn_gate=unused, ffn_up=unused, ffn_down=unused,
        attn_q=value(a.q_proj.weight), attn_k=value(a.k_proj.weight),
        attn_v=value(a.v_proj.weight), attn_output=value(a.o_proj.weight),
        attn_q_bias=value(a.q_proj.bias), attn_k_bias=value(a.k_proj.bias),
        attn_v_bias=value(a.v_proj.bias), attn_output_bias=value(a.o_proj.bias),
        attn_sinks=value(a.sinks),
    )


def test_each_layers_attention_equals_hfs(hf):
    assert hf.config.layer_types == ["sliding_attention", "full_attention"]
    caught: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def catch(i):
        def hook(module, args, kwargs, output):
            x = kwargs.get("hidden_states", args[0] if args else None)
            caught[i] = (x[0].detach().numpy(), output[0][0].detach().numpy())
        return hook

    handles = [layer.self_attn.register_forward_hook(catch(i), with_kwargs=True)
               for i, layer in enumerate(hf.model.layers)]
    ids = torch.tensor([np.random.default_rng(1).integers(0, 300, LENGTH).tolist()])
    with torch.no_grad():
        hf(ids)
    for handle in handles:
        handle.remove()
    cfg = text_config(hf)
    angles = text_rope_angles(np.arange(LENGTH), cfg)
    for i, (x, expected) in caught.items():
        ours = attention(x, layer_weights(hf, i), cfg, angles, layer=i)
        np.testing.assert_allclose(ours, expected, atol=2e-5, rtol=0, err_msg=f"layer {i}")
        no_sinks = dataclasses.replace(layer_weights(hf, i), attn_sinks=None)
        assert np.abs(attention(x, no_sinks, cfg, angles, layer=i) - expected).max() > 1e-3
        if i == 0:  # the sliding layer, seen as a full one
            full = attention(x, layer_weights(hf, i), cfg, angles, layer=1)
            assert np.abs(full - expected).max() > 1e-3
