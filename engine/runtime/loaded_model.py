"""A loaded model: its GGUF, tokenizer and decoder session, and what its chats ask of
them (the prompt as tokens, images for its vision tower, what it can do). Made by
engine.runtime.loader."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.chat.backend import Capability
from engine.chat.prompt_tokens import PromptTokens
from engine.errors import ImageError
from engine.gguf import GGUFModel
from engine.gguf.requantize import Requantization
from engine.graph.kernels import Kernels
from engine.prompt import QWEN_IMAGE_PLACEHOLDER, ModelPrompt, template_kind
from engine.runtime.decoder import DecoderSession
from engine.runtime.thinking import OPEN_TAG
from engine.runtime.vision_encoder import VisionEncoder
from engine.tokenizer import Tokenizer
from engine.vision.gemma3 import GEMMA3_IMAGE_PLACEHOLDER, preprocess_square, soft_token_prompt
from engine.vision.preprocess import ImageInput, preprocess_for
from engine.vision.prompt import image_prompt
from engine.vision.video import VideoInput, check_format, is_animated, prepare_video


@dataclass
class LoadedModel:
    name: str
    gguf: GGUFModel
    tokenizer: Tokenizer
    decoder: DecoderSession
    template: str | None = None            # Ollama template layer (Go text/template)
    system: str | None = None              # Ollama system layer
    params: dict = field(default_factory=dict)
    preset_messages: list[dict] = field(default_factory=list)
    load_duration: int = 0                 # ns
    exact: bool = False                    # fp32 activations (reference-exact mode)
    _vision: VisionEncoder | None = field(default=None, repr=False)
    _vision_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def tokenize_chat(self, messages: Sequence, system: str | None = None,
                      think: bool | str | None = None,
                      tools: Sequence[dict] | None = None) -> PromptTokens:
        """Messages rendered as the model prompts them (engine.prompt.model_prompt) and
        tokenized, only the template's own markup becoming control tokens; images become
        what the vision tower makes of them. `think` is Ollama's option (None: unset)."""
        rendered = self.chat_prompt().render(messages, system=system, think=think,
                                             tools=tools)
        ids = self.tokenizer.encode_prompt(rendered.segments)
        images = [image for m in messages for image in _images_of(m)]
        if not images:
            return PromptTokens.text(ids)
        config = self.gguf.config
        if config.vision is not None and config.vision.siglip:
            return soft_token_prompt(ids, images, config, self.vision_encoder().encode,
                                     around=self.tokenizer.encode("\n\n"))
        return image_prompt(ids, images, config, self.vision_encoder().encode,
                            self.tokenizer.encode)

    def chat_prompt(self) -> ModelPrompt:
        """The layers this model brings to every prompt it is given."""
        vision = self.gguf.config.vision
        return ModelPrompt(
            template_layer=self.template, chat_template=self.gguf.config.chat_template,
            system=self.system, layer_messages=self.preset_messages,
            special_tokens=self.special_token_strings(),
            image_placeholder=GEMMA3_IMAGE_PLACEHOLDER if vision and vision.siglip
            else QWEN_IMAGE_PLACEHOLDER)

    def prepare_image(self, path: str, max_pixels: int) -> ImageInput | VideoInput:
        """An image file as this model's vision tower takes it (Gemma 3: one fixed square,
        so ``max_pixels`` does not apply; Qwen3-VL: its own processor's sizes, and an
        animated file becomes a video). Other models take an animation's first frame."""
        check_format(path)  # an MP4 is told which formats a video may come in
        vision = self.gguf.config.vision
        if vision is not None and vision.siglip:
            return preprocess_square(path, vision)
        if self.reads_video and is_animated(path):
            return prepare_video(vision, path)
        return preprocess_for(vision, path, max_pixels)

    @property
    def reads_video(self) -> bool:
        """Its tower takes video frames (Qwen3-VL)."""
        vision = self.gguf.config.vision
        return vision is not None and vision.tower == "qwen3vl" and \
            self.gguf.config.special.video_pad is not None

    @property
    def may_think(self) -> bool:
        """Its template knows a thinking section (Qwen3, DeepSeek-R1: ``<think>``)."""
        return OPEN_TAG in (self.template or self.gguf.config.chat_template or "")

    @property
    def completion_only(self) -> bool:
        """It brings no chat template (a base model, or a GGUF imported without one): chats
        render as Ollama's default ``{{ .Prompt }}``: the user's text alone, no turn markup."""
        return template_kind(self.template, self.gguf.config.chat_template) == "default"

    @property
    def has_vision(self) -> bool:
        return self.gguf.config.vision is not None

    @property
    def capabilities(self) -> frozenset[Capability]:
        """Everything: the weights are here (images only for a vision model)."""
        return frozenset(Capability) - (set() if self.has_vision else {Capability.IMAGES}) \
            - (set() if self.reads_video else {Capability.VIDEO})

    @property
    def provider(self) -> str:
        """The ONNX Runtime provider that runs it ("cpu", "cuda", "coreml")."""
        return self.decoder.provider

    @property
    def weights(self) -> str:
        """What weights run, said so that a re-quantization is never mistaken for exact."""
        return self.decoder.weights

    @property
    def requantization(self) -> Requantization | None:
        return self.decoder.requantization

    @property
    def num_ctx(self) -> int:
        """The tokens its KV cache holds."""
        return self.decoder.max_cache_len

    @property
    def row_invariant(self) -> bool:
        """A verify step's rows equal one-token steps' (speculation keeps the answer)."""
        return self.decoder.row_invariant

    @property
    def matmul(self) -> str:
        """What multiplies by the weights: Lantern's GGUF matmul, or MatMulNBits and why."""
        return self.decoder.matmul

    @property
    def kernels(self) -> Kernels | None:
        """Fast CPU mode's MatMulNBits kernel choices; None in exact mode, with Lantern's
        GGUF matmul and off the CPU."""
        return self.decoder.kernels

    def vision_encoder(self) -> VisionEncoder:
        """The vision tower's session, built on first use (one per model, reused)."""
        if not self.has_vision:
            raise ImageError(
                f"{self.name} has no vision: it cannot read images. Send text only, or pick "
                "a vision model such as qwen2.5vl"
            )
        with self._vision_lock:
            if self._vision is None:
                self._vision = VisionEncoder(self.gguf)
            return self._vision

    def tokenize_raw(self, text: str) -> PromptTokens:
        """A raw prompt, sent verbatim: control-token strings in it are parsed, and the BOS
        (EOS) the GGUF asks for is added as for any prompt, as llama.cpp and HF do. Every
        raw caller (run --raw, inspect, trace, compare, debug, the Tracing tab) comes here."""
        return PromptTokens.text(self.tokenizer.encode_prompt([(text, True)]))

    def special_token_strings(self) -> dict[str, str]:
        special = self.gguf.config.special
        strings = {}
        for key, token_id in (("bos_token", special.bos), ("eos_token", special.eos)):
            if token_id is not None:
                strings[key] = self.tokenizer.id_to_piece(token_id)
        return strings


def _images_of(message) -> tuple:
    if isinstance(message, dict):
        return tuple(message.get("images") or ())
    return tuple(message.images)
