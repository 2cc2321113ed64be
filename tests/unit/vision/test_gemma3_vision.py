"""Gemma 3 images against HF transformers: a random-weight Gemma3ForConditionalGeneration (2
text layers; a SigLIP tower of 2 blocks on 56-pixel images in 14-pixel patches, pooled to
4 tokens), saved, its vision tensors renamed to the published layout (DESIGN fact: the
converter does not map transformers 5's names), converted by llama.cpp's own converter
into a text GGUF and an mmproj, and merged into one file under Ollama's names and keys
(the inline layout).

Preprocessing, the tower and projector, the prompt's soft tokens with their two-way
attention, the reference logits and the engine's greedy tokens in exact mode equal HF's.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gguf
import numpy as np
import pytest
import sentencepiece as spm
import torch
from gguf import GGUFValueType
from PIL import Image
from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig

from engine.chat.messages import Message
from engine.cli import main
from engine.gguf import GGUFModel, open_model
from engine.inspect.inspection import image_embeds, inspect_context
from engine.inspect.occlusion import occlusion
from engine.reference import siglip_tower
from engine.reference.text import AttentionProbe, forward
from engine.reference.weights import ReferenceWeights
from engine.runtime.check import check_against_reference
from engine.runtime.decoder import DecoderSession
from engine.runtime.loader import load_model
from engine.runtime.vision_encoder import VisionEncoder
from engine.store import Store
from engine.vision.gemma3 import preprocess_square, soft_token_prompt
from engine.vision.preprocess import pixels
from tests.fixtures.llama_converter import convert, published_vision_names
from tests.fixtures.sentencepiece_models import CONTROLS, train
from tests.integration.test_engine_vs_hf import EXACT_ATOL

TEMPLATES = Path(__file__).parents[2] / "data" / "templates"
IMAGE_TOKENS = ("<start_of_image>", "<end_of_image>", "<image_soft_token>")
SIZE, PATCH, TOKENS = 56, 14, 4
GREEDY = 8
LAYOUTS = ("projector", "inline")


@dataclasses.dataclass
class Gemma:
    hf: Gemma3ForConditionalGeneration
    models: dict[str, GGUFModel]
    sp: spm.SentencePieceProcessor
    picture: Image.Image


def _ollama_names(name: str) -> str:
    """llama.cpp's mmproj names -> Ollama's inline names (convert_gemma3.go)."""
    for ours, theirs in (("v.patch_embd.", "v.patch_embedding."),
                         ("v.position_embd.", "v.position_embedding."),
                         ("v.post_ln.", "v.post_layernorm."), (".ln1.", ".layer_norm1."),
                         (".ln2.", ".layer_norm2."), (".attn_out.", ".attn_output."),
                         (".ffn_up.", ".mlp.fc1."), (".ffn_down.", ".mlp.fc2."),
                         ("mm.input_projection.", "mm.mm_input_projection."),
                         ("mm.soft_emb_norm.", "mm.mm_soft_emb_norm.")):
        name = name.replace(ours, theirs)
    return name


def _inline(text: Path, mmproj: Path, out: Path) -> Path:
    """One gemma3 GGUF with the tower inline, as Ollama's converter writes it."""
    writer = gguf.GGUFWriter(str(out), arch="gemma3")
    reader = gguf.GGUFReader(str(text))
    for field in reader.fields.values():
        if not field.name.startswith("GGUF.") and field.name != "general.architecture":
            writer.add_key_value(field.name, field.contents(), field.types[0],
                                 field.types[-1] if field.types[0] == GGUFValueType.ARRAY
                                 else None)
    projector = gguf.GGUFReader(str(mmproj))
    keys = {f.name: f.contents() for f in projector.fields.values()}
    for key in ("block_count", "embedding_length", "feed_forward_length", "image_size",
                "patch_size", "attention.head_count", "attention.layer_norm_epsilon"):
        value = keys[f"clip.vision.{key}"]
        if isinstance(value, float):
            writer.add_float32(f"gemma3.vision.{key}", value)
        else:
            writer.add_uint32(f"gemma3.vision.{key}", int(value))
    writer.add_uint32("gemma3.mm.tokens_per_image", TOKENS)
    for tensor in reader.tensors:  # F32 and F16 only
        writer.add_tensor(tensor.name, np.array(tensor.data))
    for tensor in projector.tensors:
        writer.add_tensor(_ollama_names(tensor.name), np.array(tensor.data))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def build_gemma(folder: Path) -> Gemma:
    """The ``gemma`` fixture's model (tests/unit/conftest.py: built once per run)."""
    tokenizer_model = train(folder / "sp", "bpe", add_dummy_prefix=False,
                            controls=CONTROLS + IMAGE_TOKENS)
    sp = spm.SentencePieceProcessor(model_file=str(tokenizer_model))
    boi, eoi, soft = (sp.piece_to_id(t) for t in IMAGE_TOKENS)
    text = Gemma3TextConfig(
        vocab_size=sp.get_piece_size(), hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        sliding_window=8, query_pre_attn_scalar=16, max_position_embeddings=512,
        rope_theta=1_000_000.0, rope_local_base_freq=10_000.0, initializer_range=0.1,
        pad_token_id=0, eos_token_id=1, bos_token_id=2)
    config = Gemma3Config(
        text_config=text.to_dict(),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, image_size=SIZE, patch_size=PATCH,
                           layer_norm_eps=1e-6),
        mm_tokens_per_image=TOKENS, boi_token_index=boi, eoi_token_index=eoi,
        image_token_index=soft, initializer_range=0.1)
    torch.manual_seed(0)
    hf = Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():  # norms away from their start, weights big enough to matter
        for name, weight in hf.named_parameters():
            if "norm" in name:
                weight.add_(torch.randn_like(weight) * 0.3)
            elif "vision_tower" in name or "projector" in name:
                weight.normal_(0.0, 0.2)
    hf_dir = folder / "hf"
    hf.save_pretrained(hf_dir)
    published_vision_names(hf_dir)
    (hf_dir / "tokenizer.model").write_bytes(tokenizer_model.read_bytes())
    (hf_dir / "preprocessor_config.json").write_text(json.dumps(
        {"image_mean": [0.5] * 3, "image_std": [0.5] * 3, "image_seq_length": TOKENS}))
    text_path = convert(hf_dir, folder / "gemma3.gguf")
    mmproj = convert(hf_dir, folder / "mmproj.gguf", mmproj=True)
    models = {"projector": open_model(text_path, mmproj),
              "inline": open_model(_inline(text_path, mmproj, folder / "inline.gguf"))}
    with torch.no_grad():  # the converter stores the input projection as F16: HF takes it back
        stored = models["inline"].tensors["mm.mm_input_projection.weight"].dequantize()
        hf.model.multi_modal_projector.mm_input_projection_weight.copy_(torch.from_numpy(
            np.array(stored, np.float32)))
    rng = np.random.default_rng(0)
    picture = Image.fromarray(rng.integers(0, 255, (70, 90, 3), dtype=np.uint8))
    return Gemma(hf, models, sp, picture)


def hf_pixels(gemma: Gemma) -> torch.Tensor:
    from transformers import Gemma3ImageProcessor
    processor = Gemma3ImageProcessor(size={"height": SIZE, "width": SIZE})
    return processor(gemma.picture, return_tensors="pt")["pixel_values"]


def prompt_for(gemma: Gemma, model: GGUFModel, encode):
    """<bos>text<start_of_image>text, expanded as Gemma's processor does."""
    sp = gemma.sp
    boi = sp.piece_to_id("<start_of_image>")
    ids = [sp.bos_id(), *sp.encode("Describe"), boi, *sp.encode(" this picture please")]
    image = preprocess_square(gemma.picture, model.config.vision)
    return soft_token_prompt(ids, [image], model.config, encode, around=sp.encode("\n\n"))


def reference_encode(model: GGUFModel):
    return lambda image: siglip_tower.forward(model, image.pixel_values).embeds


def hf_logits(gemma: Gemma, prompt) -> np.ndarray:
    soft = gemma.sp.piece_to_id("<image_soft_token>")
    ids = torch.from_numpy(prompt.ids)[None]
    with torch.no_grad():
        out = gemma.hf(input_ids=ids, pixel_values=hf_pixels(gemma),
                       token_type_ids=(ids == soft).long())
    return out.logits[0].numpy()


def reference_logits(model: GGUFModel, prompt, groups=True) -> np.ndarray:
    embeds = image_embeds(prompt, len(prompt) - 1, ReferenceWeights(model))
    return forward(model, inputs_embeds=embeds, positions=prompt.positions,
                   image_groups=prompt.image_groups() if groups else None).logits


@pytest.mark.parametrize("layout", LAYOUTS)
def test_both_layouts_read_as_one_vision_model(gemma, layout):
    vision = gemma.models[layout].config.vision
    assert vision is not None and vision.siglip and vision.layout == layout
    assert (vision.image_size, vision.patch_size, vision.tokens_per_image) == (SIZE, PATCH, TOKENS)
    assert (vision.n_layers, vision.hidden_size, vision.spatial_merge_size) == (2, 32, 2)
    special = gemma.models[layout].config.special
    assert special.image_pad == gemma.sp.piece_to_id("<image_soft_token>")
    # both converters store the projector's norm with Gemma's +1
    stored = gemma.models[layout].tensors["mm.mm_soft_emb_norm.weight"].dequantize()
    hf = gemma.hf.model.multi_modal_projector.mm_soft_emb_norm.weight.detach().numpy()
    np.testing.assert_allclose(stored, hf + 1, atol=1e-6)


def test_preprocessing_is_hfs(gemma):
    ours = preprocess_square(gemma.picture, gemma.models["inline"].config.vision)
    theirs = hf_pixels(gemma)[0].numpy()  # [C, H, W]
    g = SIZE // PATCH
    as_rows = theirs.reshape(3, g, PATCH, g, PATCH).transpose(1, 3, 0, 2, 4).reshape(g * g, -1)
    np.testing.assert_allclose(ours.pixel_values, as_rows, atol=1e-6)
    assert ours.n_tokens == TOKENS
    resized = gemma.picture.resize((SIZE, SIZE), Image.Resampling.BILINEAR)
    np.testing.assert_array_equal(pixels(ours), np.asarray(resized))  # what the Inside tab draws


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reference_tower_is_hfs(gemma, layout):
    model = gemma.models[layout]
    image = preprocess_square(gemma.picture, model.config.vision)
    with torch.no_grad():
        features = gemma.hf.model.get_image_features(pixel_values=hf_pixels(gemma))
    expected = getattr(features, "pooler_output", features)
    expected = (expected[0] if isinstance(expected, list | tuple) else expected).numpy()
    ours = siglip_tower.forward(model, image.pixel_values).embeds
    assert np.abs(expected).max() > 0.5
    np.testing.assert_allclose(ours, expected.reshape(ours.shape), atol=1e-4, rtol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_engine_vision_encoder_is_the_reference(gemma, layout):
    model = gemma.models[layout]
    image = preprocess_square(gemma.picture, model.config.vision)
    embeds = VisionEncoder(model).encode(image)
    np.testing.assert_allclose(embeds, siglip_tower.forward(model, image.pixel_values).embeds,
                               atol=1e-4, rtol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reference_logits_with_an_image_are_hfs(gemma, layout):
    model = gemma.models[layout]
    prompt = prompt_for(gemma, model, reference_encode(model))
    assert prompt.image_groups() is not None and len(prompt.image_rows) == TOKENS
    expected = hf_logits(gemma, prompt)
    np.testing.assert_allclose(reference_logits(model, prompt), expected, atol=1e-4, rtol=0)


def test_causal_image_tokens_would_be_caught(gemma):
    """The fact the two-way mask rests on: the same prompt with causal image rows moves
    the image rows' logits past the tolerance."""
    model = gemma.models["inline"]
    prompt = prompt_for(gemma, model, reference_encode(model))
    causal = reference_logits(model, prompt, groups=False)
    assert np.abs(causal - hf_logits(gemma, prompt)).max() > 10 * EXACT_ATOL


@pytest.mark.parametrize("layout", LAYOUTS)
def test_exact_engine_greedy_tokens_are_hfs(gemma, layout):
    model = gemma.models[layout]
    encoder = VisionEncoder(model)
    prompt = prompt_for(gemma, model, encoder.encode)
    soft = gemma.sp.piece_to_id("<image_soft_token>")
    ids = torch.from_numpy(prompt.ids)[None]
    with torch.no_grad():
        hf_tokens = gemma.hf.generate(input_ids=ids, pixel_values=hf_pixels(gemma),
                                      token_type_ids=(ids == soft).long(),
                                      max_new_tokens=GREEDY, min_new_tokens=GREEDY,
                                      do_sample=False)[0, len(prompt.ids):].tolist()
    session = DecoderSession(model, exact=True, max_cache_len=64)
    embeds = session.embed(prompt.ids)
    embeds[prompt.image_rows] = prompt.image_embeds
    step = session.forward(inputs_embeds=embeds, positions=prompt.positions,
                           image_groups=prompt.image_groups())
    delta = float(np.abs(step.logits - hf_logits(gemma, prompt)[-1]).max())
    print(f"\ngemma3 image prompt, exact mode: max |delta logit| vs HF, last row: {delta:.1e}")
    assert delta < EXACT_ATOL
    tokens = []
    for _ in range(GREEDY):
        tokens.append(int(step.logits.argmax()))
        step = session.forward([tokens[-1]])
    assert tokens == hf_tokens


def test_inside_tab_shows_attention_over_the_image(gemma):
    model = gemma.models["inline"]
    prompt = prompt_for(gemma, model, reference_encode(model))
    end = int(prompt.image_rows[-1]) + 1  # <end_of_image>: the image inside its window
    inspection = inspect_context(model, prompt, str, position=end)
    [grid] = inspection.images
    assert (grid.start, grid.height, grid.width) == (int(prompt.image_rows[0]), 2, 2)
    over_image = grid.lay_out(inspection.attention)  # [layers, heads, 2, 2]
    assert np.all(over_image > 0)
    assert inspection.lens[-1].top[0].id == int(hf_logits(gemma, prompt)[end].argmax())


def test_fast_and_exact_engine_pass_the_reference_check_with_an_image(gemma):
    model = gemma.models["projector"]
    prompt = prompt_for(gemma, model, VisionEncoder(model).encode)
    for exact in (True, False):
        report = check_against_reference(model, prompt, str, exact=exact)
        assert report.first_off is None, (exact, [(r.label, r.max_abs_diff) for r in report.rows])


def test_the_store_lists_both_layouts_with_vision_and_runs_an_image(gemma, tmp_path, capsys):
    """Imported as Ollama does (one file; text + projector layer): `show` says vision, the
    model list's check sees a vision model, `run --image` and `inspect --image` work."""
    models = str(tmp_path / "models")
    picture = tmp_path / "p.png"
    gemma.picture.save(picture)
    inline, projector = gemma.models["inline"], gemma.models["projector"]
    assert main(["import", str(inline.path), "g3:inline", "--template",
                 str(TEMPLATES / "gemma3-instruct.gotmpl"), "--models-dir", models]) == 0
    assert main(["import", str(projector.path), "g3:split", "--projector",
                 str(projector.projector_path), "--models-dir", models]) == 0
    capsys.readouterr()
    for name in ("g3:inline", "g3:split"):
        assert main(["show", name, "--json", "--models-dir", models]) == 0
        assert "vision" in json.loads(capsys.readouterr().out)["capabilities"]
        loaded = load_model(Store.open(Path(models)).get(name), exact=True, num_ctx=256)
        assert loaded.has_vision
        image = loaded.prepare_image(str(picture), max_pixels=1)  # one square whatever the cap
        prompt = loaded.tokenize_chat([Message("user", "what is this?", (image,))])
        assert prompt.ids.tolist().count(loaded.gguf.config.special.image_pad) == TOKENS
        assert main(["run", name, "describe", "--image", str(picture), "--num-predict", "3",
                     "--temperature", "0", "--format", "jsonl", "--models-dir", models]) == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert lines[-1]["done"] is True and lines[-1]["prompt_eval_count"] > TOKENS
    assert main(["inspect", "g3:inline", "what is this?", "--image", str(picture), "--json",
                 "--models-dir", models]) == 0
    [grid] = json.loads(capsys.readouterr().out)["images"]
    assert (grid["height"], grid["width"]) == (2, 2)


def test_occlusion_of_an_image_patch_runs_the_image_whole(gemma):
    """Hiding one pooled patch: the attribution (which reuses the keys before each hidden
    unit) equals one plain run with that key hidden and the image's rows seeing each other."""
    model = gemma.models["inline"]
    prompt = prompt_for(gemma, model, reference_encode(model))
    last = len(prompt) - 1
    attribution = occlusion(model, prompt, last)
    weights = ReferenceWeights(model)
    embeds = image_embeds(prompt, last, weights)

    def logprobs(hidden) -> np.ndarray:
        probe = AttentionProbe(np.zeros(0, dtype=np.int64), hidden_keys=hidden)
        logits = forward(model, None, prompt.positions, embeds, weights=weights, probe=probe,
                         image_groups=prompt.image_groups()).logits[-1].astype(np.float64)
        return logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()

    token, clean = attribution.token, logprobs(None)
    for row in prompt.image_rows[[0, -1]]:
        expected = logprobs(np.array([row]))[token] - clean[token]
        assert attribution.delta[row] == pytest.approx(expected, abs=1e-5)
    assert np.abs(attribution.delta[prompt.image_rows]).max() > 1e-4
