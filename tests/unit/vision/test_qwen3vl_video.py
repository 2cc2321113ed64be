"""Qwen3-VL video against HF transformers, on the tiny random model of
tests/fixtures/hf_qwen3vl.py: an animated GIF's frames sampled, sized and paired as
Qwen3VLVideoProcessor does, the prompt widened as Qwen3VLProcessor widens
``<|video_pad|>`` (timestamps between vision_start/vision_end groups), positions as
get_rope_index splits video_grid_thw, and the same frames through
Qwen3VLForConditionalGeneration (pixel_values_videos, video_grid_thw): logits within the
image tests' tolerance and greedy tokens equal in exact mode.
"""

from __future__ import annotations

import functools
import io
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import (
    Qwen3VLVideoProcessor,
    smart_resize,
)
from transformers.video_utils import VideoMetadata

from engine.chat.backend import Capability
from engine.chat.events import TokenEvent
from engine.chat.options import Options
from engine.chat.prompt_tokens import PromptTokens
from engine.cli.run_command import attachment_note
from engine.errors import ImageError
from engine.reference import qwen3vl_tower
from engine.reference.text import forward
from engine.runtime.decoder import DecoderSession
from engine.runtime.loader import load_model
from engine.runtime.session import LocalSession
from engine.runtime.vision_encoder import VisionEncoder
from engine.store import Store
from engine.tokenizer import load_tokenizer
from engine.vision.preprocess import MAX_PIXELS, normalise, preprocess_for
from engine.vision.prompt import image_prompt
from engine.vision.video import (
    VideoInput,
    is_animated,
    load_frames,
    prepare_video,
    sample_indices,
    video_smart_resize,
)
from tests.fixtures.hf_qwen3vl import Qwen3VL, qwen3vl
from tests.fixtures.stores import StoreBuilder
from tests.integration.test_engine_vs_hf import EXACT_ATOL

GREEDY = 10
TEMPLATE = Path(__file__).parents[2] / "data" / "templates" / "qwen2.5vl.gotmpl"
FRAME_MS = 100   # 10 frames per second
N_FRAMES = 25    # 2.5 s: HF samples 5 frames, paired into 3 temporal patches


@pytest.fixture(scope="module")
def qwen() -> Qwen3VL:
    return qwen3vl()


def gif(n_frames: int = N_FRAMES, size: tuple[int, int] = (70, 50), ms: int = FRAME_MS) -> bytes:
    rng = np.random.default_rng(n_frames)
    frames = [Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
              for _ in range(n_frames)]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=ms, loop=0)
    return buf.getvalue()


@pytest.fixture(scope="module")
def video(qwen):
    return prepare_video(qwen.paired.config.vision, gif())


@pytest.mark.parametrize("total, fps", [(25, 10.0), (300, 30.0), (3, 10.0), (10, 1.0),
                                        (5000, 2.0)])
def test_frame_sampling_is_hfs(total, fps):
    theirs = Qwen3VLVideoProcessor().sample_frames(VideoMetadata(total_num_frames=total,
                                                                 fps=fps))
    np.testing.assert_array_equal(sample_indices(total, fps), theirs)


@pytest.mark.parametrize("frames, height, width", [(5, 50, 70), (4, 480, 640), (64, 720, 1280),
                                                   (2, 20, 900), (768, 100, 100)])
def test_frame_size_is_hfs(frames, height, width):
    assert video_smart_resize(frames, height, width) == smart_resize(
        frames, height, width, temporal_factor=2, factor=32, min_pixels=128 * 32 * 32,
        max_pixels=768 * 32 * 32)


def test_gif_frames_and_times(video):
    frames = load_frames(gif())
    assert (frames.total, frames.fps, len(frames.images)) == (N_FRAMES, 10.0, 5)
    assert frames.times == [0.0, 0.6, 1.2, 1.8, 2.4]
    assert video.frames == 5 and video.grid == (3, 10, 12) and video.n_tokens == 3 * 30
    assert video.times == pytest.approx((0.3, 1.5, 2.4))


def test_patch_rows_are_hfs_patchify(qwen, video):
    """The sampled frames, resized and normalised, laid out by HF's own patchify."""
    frames = load_frames(gif())
    rgb = np.stack([np.asarray(f.resize((192, 160), Image.Resampling.BICUBIC))
                    for f in frames.images])
    x = torch.tensor(normalise(rgb, (0.5,) * 3, (0.5,) * 3)).permute(0, 3, 1, 2)[None]
    theirs, t, gh, gw = Qwen3VLVideoProcessor().patchify(x, 16, 2, 2)
    assert (t, gh, gw) == video.grid
    ours = np.concatenate([patch.pixel_values for patch in video.patches])
    np.testing.assert_array_equal(ours, theirs[0].numpy())


def hf_expansion(video) -> str:
    """What Qwen3VLProcessor puts in place of one <|video_pad|>."""
    processor = SimpleNamespace(
        video_processor=SimpleNamespace(merge_size=2, temporal_patch_size=2),
        video_token="<|video_pad|>", vision_start_token="<|vision_start|>",
        vision_end_token="<|vision_end|>",
        _calculate_timestamps=functools.partial(Qwen3VLProcessor._calculate_timestamps, None))
    indices = sample_indices(N_FRAMES, 10.0).tolist()
    inputs = {"video_grid_thw": torch.tensor([video.grid]), "video_metadata": [
        VideoMetadata(total_num_frames=N_FRAMES, fps=10.0, frames_indices=indices)]}
    return Qwen3VLProcessor.replace_video_token(processor, inputs, 0)


@pytest.fixture(scope="module")
def prompt(qwen, video):
    return video_prompt(qwen, video)


def video_prompt(qwen: Qwen3VL, video: VideoInput) -> PromptTokens:
    """Text, the chat template's one placeholder (here carrying the video), text."""
    start, end = qwen.token("<|vision_start|>"), qwen.token("<|vision_end|>")
    ids = qwen.prompt[:6] + [start, qwen.token("<|image_pad|>"), end] + qwen.prompt[6:14]
    tokenizer = load_tokenizer(qwen.paired.path)
    return image_prompt(ids, [video], qwen.paired.config,
                        VisionEncoder(qwen.paired, threads=1).encode, tokenizer.encode)


def test_prompt_ids_are_hfs_text_expansion(qwen, video, prompt):
    expansion = hf_expansion(video)
    assert expansion.startswith("<0.3 seconds><|vision_start|><|video_pad|>")
    assert expansion.count("<|video_pad|>") == video.n_tokens
    widened = load_tokenizer(qwen.paired.path).encode(expansion, parse_special=True)
    start, end = qwen.token("<|vision_start|>"), qwen.token("<|vision_end|>")
    assert prompt.ids.tolist() == (qwen.prompt[:6] + [start] + widened + [end]
                                   + qwen.prompt[6:14])


def hf_inputs(qwen: Qwen3VL, prompt, video) -> dict:
    input_ids = torch.tensor([prompt.ids.tolist()])
    return {"input_ids": input_ids,
            "mm_token_type_ids": 2 * (input_ids == qwen.token("<|video_pad|>")).int(),
            "pixel_values_videos": torch.tensor(np.concatenate(
                [patch.pixel_values for patch in video.patches])),
            "video_grid_thw": torch.tensor([video.grid])}


def test_positions_are_hfs_rope_index(qwen, video, prompt):
    inputs = hf_inputs(qwen, prompt, video)
    positions, delta = qwen.hf.model.get_rope_index(
        inputs["input_ids"], inputs["mm_token_type_ids"], video_grid_thw=inputs["video_grid_thw"])
    np.testing.assert_array_equal(prompt.positions, positions[:, 0].numpy())
    assert prompt.next_position == len(prompt) + int(delta) < len(prompt)


@torch.no_grad()
def test_tower_over_each_temporal_patch_is_hfs_over_the_video(qwen, video, prompt):
    """HF runs its tower once over the whole video (attention within each temporal patch);
    Lantern's graph and numpy reference per temporal patch give the same features."""
    inputs = hf_inputs(qwen, prompt, video)
    out = qwen.hf.model.visual(inputs["pixel_values_videos"], grid_thw=inputs["video_grid_thw"])
    np.testing.assert_allclose(prompt.image_embeds, out.pooler_output.numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(prompt.image_deepstack,
                               np.stack([d.numpy() for d in out.deepstack_features]),
                               atol=1e-5, rtol=0)
    reference = [qwen3vl_tower.forward(qwen.paired, p.pixel_values, p.grid).embeds
                 for p in video.patches]
    np.testing.assert_allclose(np.concatenate(reference), out.pooler_output.numpy(),
                               atol=1e-5, rtol=0)


def test_video_prompt_logits_and_greedy_tokens_are_hfs(qwen, video, prompt):
    video_prompt_is_hfs(qwen, video, prompt)


def video_prompt_is_hfs(qwen: Qwen3VL, video: VideoInput, prompt: PromptTokens) -> None:
    """A video prompt through the exact engine: HF's logits and greedy tokens (also run on
    the MoE model)."""
    with torch.no_grad():
        expected = qwen.hf(**hf_inputs(qwen, prompt, video)).logits[0].numpy()
        hf_tokens = qwen.hf.generate(**hf_inputs(qwen, prompt, video), max_new_tokens=GREEDY,
                                     min_new_tokens=GREEDY, do_sample=False)[0, len(prompt):]
    session = DecoderSession(qwen.paired, exact=True, max_cache_len=192, all_logits=True)
    embeds = session.embed(prompt.ids)
    embeds[prompt.image_rows] = prompt.image_embeds
    logits = session.forward(inputs_embeds=embeds, positions=prompt.positions,
                             deepstack=prompt.deepstack()).logits
    assert float(np.abs(logits - expected).max()) < EXACT_ATOL
    reference = forward(qwen.paired, inputs_embeds=embeds, positions=prompt.positions,
                        deepstack=prompt.deepstack()).logits
    np.testing.assert_allclose(reference, expected, atol=1e-4, rtol=0)

    tokens, step = [], logits[-1]
    for k in range(GREEDY):
        tokens.append(int(step.argmax()))
        step = session.forward([tokens[-1]], positions=[prompt.next_position + k]).logits[-1]
    assert tokens == hf_tokens.tolist()


def test_other_video_formats_name_the_accepted_ones(qwen, tmp_path):
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"\x00\x00\x00\x18ftypmp42")
    with pytest.raises(ImageError, match="animated GIF, WebP or PNG.*ffmpeg -i clip.mp4 clip.gif"):
        prepare_video(qwen.paired.config.vision, clip)
    assert not is_animated(clip)


def test_a_still_picture_is_not_a_video(qwen):
    still = io.BytesIO()
    Image.new("RGB", (40, 40)).save(still, "PNG")
    assert not is_animated(still.getvalue()) and is_animated(gif(3))
    with pytest.raises(ImageError, match="at least 2 frames.*as an image"):
        prepare_video(qwen.paired.config.vision, still.getvalue())


def test_animated_webp_and_png_read_alike(qwen):
    frames = load_frames(gif(6))
    for fmt in ("WEBP", "PNG"):
        buf = io.BytesIO()
        frames.images[0].save(buf, fmt, save_all=True, append_images=frames.images[1:],
                              duration=250, lossless=True)
        again = load_frames(buf.getvalue())
        assert (again.total, again.fps, again.times) == (4, 4.0, [0.0, 0.25, 0.5, 0.75]), fmt
        np.testing.assert_array_equal(np.asarray(again.images[1]), np.asarray(frames.images[1]))


def test_models_without_a_video_tower_say_so(qwen):
    with pytest.raises(ImageError, match="cannot read video"):
        prepare_video(None, gif(4))


def test_a_chat_turn_with_an_animated_gif_answers_as_hf(qwen, tmp_path):
    """From a store: the model reads video, an animated GIF given as an attachment becomes a
    video, the turn answers HF's greedy tokens, the CLI's note says what the model sees of
    it, and an MP4 is refused naming the formats that work."""
    builder = StoreBuilder(tmp_path / "models")
    builder.add("qwen3-vl:tiny", qwen.text.path, projector=qwen.projector,
                template=TEMPLATE.read_text(encoding="utf-8"),
                config={"model_format": "gguf", "model_family": "qwen3vl",
                        "model_type": "1M", "file_type": "F32"})
    [local] = Store.open(tmp_path / "models").list()
    model = load_model(local, exact=True, num_ctx=256)
    assert model.reads_video and Capability.VIDEO in model.capabilities
    clip = tmp_path / "clip.gif"
    clip.write_bytes(gif())
    chat = LocalSession(model, Options(temperature=0, num_predict=GREEDY))
    video = chat.prepare_image(str(clip), MAX_PIXELS)
    assert isinstance(video, VideoInput) and video.grid == (3, 10, 12)
    assert "clip.gif goes as a video: 5 frames sampled, 3 pictures" in attachment_note(
        "qwen3-vl:tiny", str(clip), video)
    events = list(chat.send("what happens?", (video,)))
    answer = [e.id for e in events if isinstance(e, TokenEvent)]
    prompt = chat.last_prompt
    assert (prompt.ids == qwen.token("<|video_pad|>")).sum() == video.n_tokens
    with torch.no_grad():
        expected = qwen.hf.generate(**hf_inputs(qwen, prompt, video), max_new_tokens=GREEDY,
                                    min_new_tokens=GREEDY, do_sample=False)[0, len(prompt):]
    assert answer == expected.tolist()
    with pytest.raises(ImageError, match="clip.mp4 is a video format.*animated GIF, WebP"):
        chat.prepare_image(str(tmp_path / "clip.mp4"), MAX_PIXELS)


def test_a_model_without_video_is_told_it_sees_the_first_frame(tmp_path):
    clip = tmp_path / "clip.gif"
    clip.write_bytes(gif(4))
    first = preprocess_for(None, clip)
    note = attachment_note("qwen2.5vl:3b", str(clip), first)
    assert note.startswith("qwen2.5vl:3b cannot read video: it sees only the first frame")
    still = tmp_path / "still.png"
    Image.new("RGB", (40, 40)).save(still)
    assert attachment_note("qwen2.5vl:3b", str(still), preprocess_for(None, still)) is None
