"""The text decoder as an ONNX Runtime session with an in-place KV cache.

Each block's KV cache is one OrtValue [1, kv_heads, max_cache_len, D] bound both as the
graph's past and present (GroupQueryAttention writes the new rows in place), so a step
copies nothing but its own inputs and the logits. ``keys`` is the only cache state: what
each slot holds (a token id, or an image row's key), so keeping a shared prefix is
shortening that list; the rows after it are overwritten by the next step. Token embeddings
are gathered on the host from the GGUF memory map (only the rows asked for are
de-quantized), which is also how image embeddings replace the rows of image-pad tokens.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
from gguf.quants import dequantize

from engine.errors import GenerationError
from engine.gguf import GGUFModel
from engine.gguf.requantize import Requantization
from engine.graph import decoder as graph
from engine.graph.builder import create_session, feed_in_place, in_place_views, mapped_bytes
from engine.graph.kernels import Kernels, kernels_for
from engine.heap import give_back_freed_memory
from engine.modelmath.rope import long_rope, rope_amplitude, text_rope_angles
from engine.modelmath.stats import layer_stats
from engine.native import custom_ops
from engine.runtime.cancel import Cancelled, stop_hook
from engine.runtime.graph_cache import GraphCache, entry_key

PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
}


@dataclass(frozen=True)
class DecoderStep:
    logits: np.ndarray  # float32 [V] (last position), [N, V] (forward rows=N), [S, V] all_logits
    final: np.ndarray   # float32 [H], [N, H] or [S, H] as logits: lm_head's input (after
    #                     output_norm), the state an embedding pools
    hidden: np.ndarray | None = None  # float32 [n_layers + 1, H]: last token, per layer

    @property
    def layer_stats(self) -> np.ndarray | None:
        """mean, std, min, max of the last token's hidden state per layer [n_layers + 1, 4]."""
        return None if self.hidden is None else layer_stats(self.hidden[:, None, :])


def available_provider(requested: str) -> str:
    """``requested`` if this onnxruntime build has it, else "cpu"; "auto" picks the best."""
    have = set(ort.get_available_providers())
    if requested == "auto":
        return next(p for p in ("cuda", "coreml", "cpu") if PROVIDERS[p] in have)
    if requested not in PROVIDERS:
        raise ValueError(f"unknown provider {requested!r}; choose one of {sorted(PROVIDERS)}")
    return requested if PROVIDERS[requested] in have else "cpu"


SPIN_WAIT = "LANTERN_SPIN_WAIT"  # "0": a step's threads sleep between its ops


def spin_wait() -> bool:
    """Do a step's threads spin-wait between its ops? Yes, unless LANTERN_SPIN_WAIT=0: a
    thread that spins is at once ready for the next op, which on a quiet machine makes a
    decode step faster, but where other work holds the cores it spins in the way of the
    thread it waits for, and the step is slower (both measured in
    docs/benchmarks-journal.md, 'Spinning threads again')."""
    return os.environ.get(SPIN_WAIT, "1") != "0"


def step_options(threads: int | None, spin: bool, native: bool) -> ort.SessionOptions:
    """The decoder session's options: every graph optimisation, ``threads`` (None: ONNX
    Runtime's one per physical core) that spin-wait between a step's ops if ``spin`` and
    stop when the step returns (the window, a tool, the host's Python between steps keep
    the cores), shrinking work blocks (they cost nothing and help a shared machine;
    docs/benchmarks-journal.md, 'Spinning threads again'), Lantern's op library if
    ``native``."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    options.add_session_config_entry("session.force_spinning_stop", "1")
    options.add_session_config_entry("session.dynamic_block_base", "4")
    if native:
        options.register_custom_ops_library(str(custom_ops().path))
    return options


class DecoderSession:
    """Runs the decoder graph of ``model`` step by step (batch 1).

    exact: fp32 activations and float-exact weights (logits within ~1e-3 of the numpy
    reference); otherwise int8 activations on CPU. On CPU, Lantern's GgufMatMul multiplies
    by the GGUF's bytes where they lie (engine.native; ``matmul`` says what runs and, when
    the library is absent, why); without it, or on another provider, MatMulNBits runs with
    the kernel choices of this CPU class (engine.graph.kernels; ``kernels`` says which, None
    in exact mode, with GgufMatMul and off the CPU).
    provider: "cpu", "cuda" (fp16 graph), "coreml" (contrib ops stay on CPU) or "auto";
    an unavailable one falls back to CPU and ``provider`` says which ran.
    requantize: opt-in speed over exactness, e.g. "q4" (engine.gguf.requantize); ``weights``
    names what runs, so every status line can say when it is NOT the GGUF's exact weights.
    row_invariant: False leaves out what makes fast mode's verify rows equal one-token
    steps (engine.graph.kernels, 3.), to measure its cost (benchmarks/batch_invariance.py).
    Not for a run without drafts: that graph rounds differently, so `--speculate off` would
    answer some prompts otherwise than the default (measured, BENCHMARKS.md).
    cache: reuse the built graph from disk (engine.runtime.graph_cache; with GgufMatMul the
    entry holds no weights; without it not in exact mode, whose fp32 weights are 4x the
    GGUF); ``cache_state`` says "hit", "stored" or "off".
    """

    def __init__(self, model: GGUFModel, *, exact: bool = False, provider: str = "cpu",
                 max_cache_len: int = 4096, layer_stats: bool = False,
                 all_logits: bool = False, threads: int | None = None,
                 requantize: str | Requantization | None = None, cache: bool = True,
                 row_invariant: bool = True, kernels: Kernels | None = None):
        started = time.perf_counter()
        self.config = model.config.text
        self.provider = available_provider(provider)
        self.max_cache_len = max_cache_len
        self.keys: list[Hashable] = []  # what each cache slot holds, slot by slot
        self._long_rows = False  # the cached keys turned with LongRoPE's long factors
        if isinstance(requantize, str):
            requantize = Requantization.parse(requantize)
        if requantize is not None and exact:
            raise GenerationError(f"exact mode runs the GGUF's own weights, {requantize.spec} "
                                  "re-quantizes them; choose one of exact and requantize")
        self.requantization = requantize
        self.weights = "exact GGUF weights" if requantize is None else requantize.label
        native, self.matmul = matmul_path(self.provider, requantize)
        # fast CPU mode's kernel choices (None where they do not apply; other providers
        # keep explicit zero points, unmeasured there)
        self.kernels = ((kernels or kernels_for()) if self.provider == "cpu" and not exact
                        and not native else None)
        options = graph.DecoderOptions(exact=exact, float16=self.provider == "cuda",
                                       max_cache_len=max_cache_len, layer_stats=layer_stats,
                                       all_logits=all_logits, requantize=requantize,
                                       row_invariant=row_invariant and self.provider == "cpu",
                                       kernels=self.kernels or Kernels(fold_zero_points=False),
                                       two_way_images=two_way_images(model), native=native)
        self._dtype = np.dtype(options.dtype)
        # a verify step's rows equal one-token steps': to the bit in fast CPU mode, to ~1e-5
        # in exact mode (speculative decoding relies on it; engine.graph.kernels, 3.)
        self.row_invariant = exact or options.row_invariant_graph
        self._two_way = options.two_way_images
        self._token_embd = model.tensors["token_embd.weight"]
        self._deepstack = graph.deepstack_count(model)  # Qwen3-VL: feature maps fed per step

        self.spin_wait = spin_wait()
        session_options = step_options(threads, self.spin_wait, native)
        providers = [PROVIDERS[self.provider]] + (["CPUExecutionProvider"]
                                                  if self.provider != "cpu" else [])
        # without GgufMatMul exact mode's fp32 weights are 4x the GGUF: never cached
        store = GraphCache() if cache and (native or not exact) else None
        self._session = self._open(model, options, store, session_options, providers, started)
        self.load_seconds = time.perf_counter() - started

        device = "cuda" if self.provider == "cuda" else "cpu"
        # one binding for the session's life: every KV buffer is bound once, as its
        # layer's past input and present output; a step rebinds only its inputs and outputs
        self._binding = self._session.io_binding()
        caches = graph.layer_caches(self.config)
        # one slot more than the context: a row-invariant step writes a spare row after
        # the new tokens (engine.graph.kernels, 3.)
        cache_shape = (1, self.config.n_kv_heads, max_cache_len + 1, self.config.head_dim)
        self._kv_buffers = [self._bound_buffer(name, cache_shape, device)
                            for names in caches for name in ((names.past_key, names.present_key),
                                                             (names.past_value,
                                                              names.present_value))]
        half = self.config.rope_dims // 2
        # a verify step's matmuls one row at a time, where this CPU needs it (kernels, 3.)
        self._rows_apart = graph.ROWS_APART in {i.name for i in self._session.get_inputs()}
        # rotary rows per cache slot: the global layers', and the sliding layers' (Gemma 3)
        self._rotary = [_RotaryRows(graph.COS, graph.SIN, False, max_cache_len, half, self._dtype)]
        if self.config.local_rope:
            self._rotary.append(_RotaryRows(graph.COS_LOCAL, graph.SIN_LOCAL, True,
                                            max_cache_len, half, self._dtype))
        self.layer_stats = layer_stats
        self._all_logits = all_logits
        # added to each block's output (engine.gguf.control_vector); zeros: not steered
        self._steering = np.zeros((self.config.n_layers, self.config.hidden_size), self._dtype)

    def __del__(self, give_back: Callable[[], None] = give_back_freed_memory) -> None:
        """The session first, then its memory back to the system off the GIL: left to the
        rest of the teardown, glibc would unmap the emptied heaps inside a later small
        free with the GIL held (docs/benchmarks-journal.md, 'Dropping a session'). (``give_back`` is
        bound here: at the interpreter's exit the module's names may be gone.)"""
        self._binding = self._kv_buffers = self._session = None
        self._in_place = None  # after the session: it reads them to the end
        give_back()

    @property
    def steering(self) -> np.ndarray:
        """What each block's output gets added, [n_layers, H] (zeros: not steered)."""
        return self._steering

    def steer(self, table: np.ndarray | None) -> None:
        """Add ``table`` [n_layers, H] to the blocks' outputs from now on (None: stop).
        The cached keys and values were computed with the old table, so a different table
        empties the cache: the next forward prefills the whole context again."""
        new = np.zeros_like(self._steering) if table is None else np.asarray(table, self._dtype)
        if new.shape != self._steering.shape:
            raise ValueError(f"steering of shape {new.shape} for a model of "
                             f"{self._steering.shape}")
        if not np.array_equal(new, self._steering):
            self._steering = np.ascontiguousarray(new)
            self.reset()

    def _bound_buffer(self, names: tuple[str, str], shape: tuple[int, ...],
                      device: str) -> ort.OrtValue:
        """One KV buffer, bound as its layer's past input and present output."""
        past, present = names
        buffer = ort.OrtValue.ortvalue_from_shape_and_type(shape, self._dtype, device)
        self._binding.bind_ortvalue_input(past, buffer)
        self._binding.bind_ortvalue_output(present, buffer)
        return buffer

    def _open(self, model: GGUFModel, options: graph.DecoderOptions, store: GraphCache | None,
              session_options: ort.SessionOptions, providers: list[str],
              started: float) -> ort.InferenceSession:
        """The session, from the graph cache when it holds this build; sets build_seconds and
        cache_state ("hit", "stored", "off" or "off (why)"), and _in_place: the GGUF's bytes
        that GgufMatMul reads, kept as long as the session."""
        self._in_place: list[ort.OrtValue] = []
        key = None if store is None or not store.enabled else entry_key(
            model.path, options, self._deepstack)
        path = store.lookup(key) if key else None
        self.cache_state = "hit" if path else "off"
        if path is None:
            built = graph.build_decoder(model, options)
            if key:
                try:
                    path = store.store(key, built)
                    self.cache_state = "stored"
                except OSError as error:  # a full or read-only disk only costs load time
                    self.cache_state = f"off ({error})"
            if path is None:
                self.build_seconds = time.perf_counter() - started
                self._in_place = feed_in_place(session_options, built.in_place)
                return create_session(built.model, built.external, session_options, providers)
            del built  # the session maps the stored weights instead
        if options.native:  # the entry says where the GGUF's bytes lie; hand them over
            stored = onnx.load(str(path), load_external_data=False)
            file_bytes, _ = mapped_bytes(self._token_embd.raw)
            self._in_place = feed_in_place(session_options, in_place_views(stored, file_bytes))
        self.build_seconds = time.perf_counter() - started
        return ort.InferenceSession(str(path), session_options, providers=providers)

    def embed(self, ids) -> np.ndarray:
        """Token embeddings of ``ids`` [S] -> float32 [S, H], straight from the GGUF rows."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        vocab, hidden = self.config.vocab_size, self.config.hidden_size
        if ids.size and (ids.min() < 0 or ids.max() >= vocab):
            raise GenerationError(f"token ids must lie in [0, {vocab}), got {ids.tolist()}")
        table = self._token_embd
        rows = custom_ops().gather_rows(int(table.ggml_type), hidden, table.raw, ids)
        if rows is None:
            rows = dequantize(table.raw[ids], table.ggml_type)
        return np.asarray(rows, dtype=np.float32).reshape(len(ids), hidden)

    @property
    def cache_len(self) -> int:
        return len(self.keys)

    def forward(self, input_ids=None, positions=None, inputs_embeds=None,
                rows: int | None = None, keys: Sequence[Hashable] | None = None,
                cancel: threading.Event | None = None,
                image_groups: np.ndarray | None = None,
                deepstack: np.ndarray | None = None) -> DecoderStep:
        """Append S tokens (ids [S] or embeddings [S, H]) at positions [S] or [3, S]
        (default: continuing the cache) and return the logits: of the last position [V],
        or with ``rows`` = N of the last N positions [N, V] (a verify step; the lm_head
        runs on those rows only). ``keys`` say what the new slots hold, for keep_prefix;
        by default the ids fed (embeddings: keys no prompt matches). Setting ``cancel``
        (a CancelEvent) stops the run mid-way (a long prefill is one run) and raises
        Cancelled; the cache is left as it was. ``image_groups`` [S]
        (PromptTokens.image_groups): the rows of one image attend to each other both ways.
        ``deepstack`` [K, S, H]: Qwen3-VL's image features for the first K blocks (zero
        rows for text; default all zero).

        Where a verify step runs its matmuls row by row (engine.graph.kernels, 3.), the last
        position of a many-token forward runs on its own too, so its logits are a one-token
        step's: an answer does not depend on how much of its prompt was cached."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        x = self.embed(input_ids) if inputs_embeds is None else np.asarray(inputs_embeds)
        n, past = len(x), self.cache_len
        total = past + n
        if n == 0:
            raise ValueError("forward needs at least one token")
        if total > self.max_cache_len:
            raise GenerationError(
                f"{total} tokens do not fit the KV cache of {self.max_cache_len}; "
                "shorten the conversation or raise the context size"
            )
        positions = np.arange(past, total) if positions is None else np.asarray(positions)
        if positions.shape[-1] != n:
            raise ValueError(f"positions of shape {positions.shape} do not match {n} tokens")
        if rows is not None and not 1 <= rows <= n:
            raise ValueError(f"rows={rows} asks for logits of more rows than the {n} fed")
        keys = _slot_keys(input_ids, n) if keys is None else list(keys)
        if len(keys) != n:
            raise ValueError(f"{len(keys)} keys for {n} tokens")
        groups = None if image_groups is None else np.asarray(image_groups)
        features = None if deepstack is None else np.asarray(deepstack)
        if features is not None and features.shape[1:2] != (n,):
            raise ValueError(f"deepstack of shape {features.shape} does not match {n} tokens")
        if self._rows_apart and rows is None and n > 1 and not self._all_logits:
            return self._last_row_apart(x, positions, keys, cancel, groups, features)
        return self._run(x, positions, rows, keys, cancel, groups, features)

    def _last_row_apart(self, x: np.ndarray, positions: np.ndarray, keys: list[Hashable],
                        cancel: threading.Event | None, groups: np.ndarray | None,
                        deepstack: np.ndarray | None) -> DecoderStep:
        """All rows but the last, then the last alone (forward's docstring says why)."""
        past = self.cache_len
        head, tail = (None, None) if groups is None else (groups[:-1], groups[-1:])
        first, last = (None, None) if deepstack is None else (deepstack[:, :-1], deepstack[:, -1:])
        self._run(x[:-1], positions[..., :-1], None, keys[:-1], cancel, head, first)
        try:
            return self._run(x[-1:], positions[..., -1:], None, keys[-1:], cancel, tail, last)
        except Cancelled:
            self.truncate(past)
            raise

    def _run(self, x: np.ndarray, positions: np.ndarray, rows: int | None,
             keys: list[Hashable], cancel: threading.Event | None,
             image_groups: np.ndarray | None, deepstack: np.ndarray | None) -> DecoderStep:
        """One session run appending the rows ``x`` (checked by forward)."""
        n, past = len(x), self.cache_len
        total = past + n
        if again := self._turned_again(past, total):
            x = np.concatenate([self.embed(self.keys), x])
            positions = np.concatenate([np.arange(past), positions])
            past = 0
        cfg = self.config
        binding = self._binding
        for rows_of in self._rotary:
            angles = text_rope_angles(positions, cfg, local=rows_of.local)  # [S, R/2]
            amplitude = rope_amplitude(cfg, local=rows_of.local)
            rows_of.cos[past:total] = np.cos(angles) * amplitude
            rows_of.sin[past:total] = np.sin(angles) * amplitude
            binding.bind_cpu_input(rows_of.cos_name, rows_of.cos[:total])
            binding.bind_cpu_input(rows_of.sin_name, rows_of.sin[:total])
        binding.bind_cpu_input(graph.INPUTS_EMBEDS,
                               np.ascontiguousarray(x, dtype=self._dtype).reshape(1, len(x), -1))
        if self._deepstack:  # zero at text rows (and at cached rows run again)
            features = np.zeros((self._deepstack, len(x), cfg.hidden_size), self._dtype)
            if deepstack is not None:
                features[:, len(x) - n:] = deepstack
            binding.bind_cpu_input(graph.DEEPSTACK, features)
        binding.bind_cpu_input(graph.SEQLENS_K, np.array([total - 1], np.int32))
        binding.bind_cpu_input(graph.TOTAL_LEN, np.array(total, np.int32))
        binding.bind_cpu_input(graph.NUM_LOGITS, np.array([rows or 1], np.int64))
        binding.bind_cpu_input(graph.STEERING, self._steering)
        if self._rows_apart:
            binding.bind_cpu_input(graph.ROWS_APART, np.array([rows is not None], np.bool_))
        if self._two_way:
            self._bind_masks(past, n, image_groups)
        elif image_groups is not None and (np.asarray(image_groups) >= 0).any():
            raise ValueError("this decoder was built without two-way image attention")
        binding.bind_output(graph.LOGITS)  # fresh each step: its shape follows S
        binding.bind_output(graph.FINAL_HIDDEN)
        if self.layer_stats:
            binding.bind_output(graph.HIDDEN_STATES)
        run_options = ort.RunOptions()
        with stop_hook(cancel, lambda: setattr(run_options, "terminate", True)):
            try:
                self._session.run_with_iobinding(binding, run_options)
            except Exception as error:
                if again:  # the cached rows are half turned: none of them holds any more
                    self.keys.clear()
                if run_options.terminate:  # ONNX Runtime's "terminate flag" failure
                    raise Cancelled("cancelled") from error
                raise
        self.keys.extend(keys)
        self._long_rows = long_rope(self.config, total)

        outputs = binding.get_outputs()[len(self._kv_buffers):]  # after the KV buffers
        logits, final = outputs[0].numpy(), outputs[1].numpy()  # [1, S or N, V], [.., H]
        if self._all_logits:
            logits, final = ((logits[0, -n:], final[0, -n:]) if rows is None else
                             (logits[0, -rows:], final[0, -rows:]))
        elif rows is not None:
            logits, final = logits[0], final[0]
        else:
            logits, final = logits[0, -1], final[0, -1]
        hidden = outputs[2].numpy() if self.layer_stats else None
        return DecoderStep(logits=logits, final=final, hidden=hidden)

    def _bind_masks(self, past: int, n: int, groups: np.ndarray | None) -> None:
        """Additive masks [S, T]: causal (and windowed for sliding layers), the rows of
        one image seeing each other."""
        total = past + n
        distance = np.arange(past, total)[:, None] - np.arange(total)[None, :]  # [S, T]
        masks = {graph.MASK: distance < 0}
        if self.config.has_sliding_layers:
            masks[graph.MASK_LOCAL] = (distance < 0) | (distance >= self.config.sliding_window)
        if groups is not None:
            keys = np.concatenate([np.full(past, -1), groups])
            same = (groups[:, None] >= 0) & (groups[:, None] == keys[None, :])
            masks = {name: masked & ~same for name, masked in masks.items()}
        for name, masked in masks.items():
            self._binding.bind_cpu_input(name, np.where(masked, -np.inf, 0).astype(self._dtype))
        self._binding.bind_cpu_input(graph.QUERY_SLOTS, np.arange(past, total)[None])

    def _turned_again(self, past: int, total: int) -> int:
        """How many cached slots a call runs again: all of them when the call needs the other
        LongRoPE factor set than the cached keys were turned with (it takes the sequence past
        the original context, as where HF's Phi-3 recomputes its cache, or a shortened cache
        falls back inside it), so every key turns as one run of the whole sequence would."""
        if past == 0 or long_rope(self.config, total) == self._long_rows:
            return 0
        if not all(isinstance(key, int) for key in self.keys):
            raise GenerationError("cached embeddings cannot be turned again with the other "
                                  "rotary factors")
        return past

    def keep_prefix(self, keys: Sequence[Hashable]) -> int:
        """Keep the longest cached prefix that ``keys`` start with (a later turn of the
        same conversation); returns its length, the slots the next forward need not run."""
        n = 0
        for held, wanted in zip(self.keys, keys, strict=False):
            if held != wanted:
                break
            n += 1
        self.truncate(n)
        return n

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` cached tokens (a shared prefix); later rows are overwritten."""
        if not 0 <= n <= self.cache_len:
            raise ValueError(f"cannot truncate a cache of {self.cache_len} tokens to {n}")
        del self.keys[n:]

    def reset(self) -> None:
        self.keys.clear()


class _RotaryRows:
    """One cos/sin pair of graph inputs and the rows computed so far, one per cache slot."""

    def __init__(self, cos_name: str, sin_name: str, local: bool, slots: int, half: int,
                 dtype: np.dtype) -> None:
        self.cos_name, self.sin_name, self.local = cos_name, sin_name, local
        self.cos = np.zeros((slots, half), dtype)
        self.sin = np.zeros((slots, half), dtype)


class _Unmatched:
    """The key of a slot fed as an embedding without keys: equal to nothing but itself."""


def matmul_path(provider: str, requantize: Requantization | None) -> tuple[bool, str]:
    """Whether Lantern's GGUF matmul multiplies by the weights (the CPU, the library loaded,
    the GGUF's own weights), and what does, in words."""
    if provider != "cpu":
        return False, "ONNX Runtime's MatMulNBits (Lantern's GGUF matmul runs on the CPU only)"
    if requantize is not None:
        return False, f"ONNX Runtime's MatMulNBits ({requantize.spec} weights)"
    ops = custom_ops()
    return ops.available, ops.describe()


def two_way_images(model: GGUFModel) -> bool:
    """Does the model's decoder let one image's rows see each other (Gemma 3)?"""
    return model.config.vision is not None and model.config.vision.siglip


def _slot_keys(input_ids, n: int) -> list[Hashable]:
    if input_ids is None:
        return [_Unmatched() for _ in range(n)]
    return [int(i) for i in np.asarray(input_ids).reshape(-1)]
