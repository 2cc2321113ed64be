"""gpt-oss as llama.cpp's converter writes it (tests/fixtures/gpt_oss.py) against HF
transformers' GptOss (fp32, eager): the file's keys read as HF's config says (alternating
sliding and full layers, sinks, biases, YaRN, the experts), and each layer's attention in the
numpy reference, from the file's weights, equal to HF's at HF's own inputs on a prompt longer
than the window and the original context. The whole model: test_gpt_oss_vs_hf.py.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from engine.gguf import GGUFModel, open_model
from engine.gguf.config import YarnScaling
from engine.modelmath.rope import text_rope_angles
from engine.reference.text import attention
from engine.reference.weights import LayerWeights
from tests.fixtures.gpt_oss import convert_gpt_oss

LENGTH = 24


@dataclasses.dataclass
class GptOss:
    hf: torch.nn.Module
    model: GGUFModel


@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory) -> GptOss:
    hf, path = convert_gpt_oss(tmp_path_factory.mktemp("gpt-oss"))
    return GptOss(hf, open_model(path))


def test_the_files_keys_read_as_hfs_config(gpt_oss):
    c, text = gpt_oss.hf.config, gpt_oss.model.config.text
    assert text.architecture == "gpt-oss" and text.head_dim == c.head_dim
    assert text.sliding_window == c.sliding_window
    assert text.sliding_layers == tuple(kind == "sliding_attention" for kind in c.layer_types)
    assert text.sliding_layers == (True, False)
    assert text.attention_sinks and text.output_bias and text.qkv_bias
    assert (text.experts, text.experts_used, text.expert_intermediate_size) == (
        c.num_local_experts, c.num_experts_per_tok, c.intermediate_size)
    assert text.expert_gating == "top_k_softmax" and text.expert_biases
    rope = c.rope_parameters
    assert text.rope_yarn == YarnScaling(factor=rope["factor"],
                                         original_context=rope["original_max_position_embeddings"])
    assert text.rope_attention_factor == pytest.approx(
        gpt_oss.hf.model.rotary_emb.attention_scaling)
    assert text.rope_attention_factor == pytest.approx(0.1 * math.log(rope["factor"]) + 1)
    assert not text.rope_interleaved and text.ffn_norm_tensor == "post_attention_norm"


def file_attention(model: GGUFModel, i: int) -> LayerWeights:
    """Layer i's attention weights as the file stores them (the MLP's are not read)."""
    def tensor(name: str) -> np.ndarray:
        return model.tensors[f"blk.{i}.{name}"].dequantize().astype(np.float32)

    unused = np.zeros(1, np.float32)
    return LayerWeights(
        attn_norm=unused, ffn_norm=unused, ffn_gate=unused, ffn_up=unused, ffn_down=unused,
        attn_q=tensor("attn_q.weight"), attn_k=tensor("attn_k.weight"),
        attn_v=tensor("attn_v.weight"), attn_output=tensor("attn_output.weight"),
        attn_q_bias=tensor("attn_q.bias"), attn_k_bias=tensor("attn_k.bias"),
        attn_v_bias=tensor("attn_v.bias"), attn_output_bias=tensor("attn_output.bias"),
        attn_sinks=tensor("attn_sinks.weight"),
    )


def test_each_layers_attention_equals_hfs(gpt_oss):
    hf, model = gpt_oss.hf, gpt_oss.model
    caught: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def catch(i):
        def hook(module, args, kwargs, output):
            x = kwargs.get("hidden_states", args[0] if args else None)
            caught[i] = (x[0].detach().numpy(), output[0][0].detach().numpy())
        return hook

    handles = [layer.self_attn.register_forward_hook(catch(i), with_kwargs=True)
               for i, layer in enumerate(hf.model.layers)]
    ids = np.random.default_rng(1).integers(10, hf.config.vocab_size, LENGTH).tolist()
    with torch.no_grad():
        hf(torch.tensor([ids]))
    for handle in handles:
        handle.remove()
    cfg = model.config.text
    angles = text_rope_angles(np.arange(LENGTH), cfg)
    for i, (x, expected) in caught.items():
        w = file_attention(model, i)
        np.testing.assert_allclose(attention(x, w, cfg, angles, layer=i), expected,
                                   atol=2e-5, rtol=0, err_msg=f"layer {i}")
        no_sinks = dataclasses.replace(w, attn_sinks=None)
        assert np.abs(attention(x, no_sinks, cfg, angles, layer=i) - expected).max() > 1e-3
        if cfg.slides(i):  # the sliding layer, seen as a full one
            full = dataclasses.replace(cfg, sliding_layers=())
            assert np.abs(attention(x, w, full, angles, layer=i) - expected).max() > 1e-3
    assert len(caught) == cfg.n_layers

