"""Fast CPU mode's kernel choices: the one place they are made, and why.

They are MatMulNBits' (the fallback of ARCHITECTURE.md §3: no custom-op library, a
requantization, CUDA/CoreML); Lantern's own GgufMatMul has none of these choices to make.

The choices are kept per CPU class in TABLE (keyed by engine.cpu's features).
``python -m benchmarks.kernels`` measures them on the machine at hand, prints the row it
derives and exits 1 where TABLE says otherwise; BENCHMARKS.md ("fast mode's kernel
choices, measured per CPU class") has the figures of each CPU class measured. Exact mode
takes none of them: float activations and the GGUF's weights as they are.

1. Activation precision per weight class. Every MatMulNBits (4-bit: Q4_K, Q4_0, Q4_1;
   8-bit: Q5_0, Q5_K, Q6_K, Q8_0 widened) gets int8 activations (accuracy level 4), the
   4-bit ffn_down included. ONNX Runtime's float kernel for 4-bit weights is more faithful
   on ffn_down (silu(gate) * up has a few huge channels that int8 blocks flatten), but it
   multiplies one row with a kernel of its own that rounds unlike its many-row one, so row
   invariance (3.) needed it one row at a time, prefill included; and on every CPU class
   measured that one-row kernel is slower than the int8 one (much slower with AVX2 only).
   8-bit weights have no float kernel (they would become dense fp32, 4 bytes a weight).
   Dense weights (F16, F32, formats without an exact mapping) run a plain float MatMul.
   Fast mode's teacher-forced top-1 agreement with exact mode must stay >= 98.5% on the
   demo models (benchmarks/agreement.py; tests/integration/test_engine_vs_hf.py holds the floor).
2. Zero points of the 4-bit formats with an offset (Q4_K: d*sc*q - dmin*m, Q4_1: d*q + m,
   so zero point 0): FOLDED drops the zero-point input (MatMulNBits then subtracts its
   default 8) and adds 8 * scale to the offset of the same block, which the offset term
   adds anyway. The same weights up to one float32 rounding of each offset. Its kernel
   is faster where only AVX2 is present and as fast with AVX-512; with int8 activations
   it is also the closer to exact mode (the 8 * scale share meets the float activations'
   block sums, not the int8 ones), so it wins a tie. EXPLICIT keeps zero point 0.
3. Row invariance (speculative decoding's contract: a verify step computes each drafted
   row to the same bits as a one-token step). With int8 activations a MatMulNBits of
   several rows gives each row the same bits whatever the others are, and so does a dense
   MatMul, so prefill runs at full speed. Two kernels take one row their own way:
   GroupQueryAttention's probabilities x V on every CPU, so every attention gets one spare
   row (engine.graph.attention.with_spare_row), which costs a one-token step the packing
   of V and a prefill one row; and, where only AVX2 is present, the int8 MatMulNBits of
   4-bit weights (its one-row kernel rounds unlike its many-row one). A one-token step
   must take the kernel a verify row takes, and that kernel is the fast one-row kernel, so
   a verify step runs the matmuls of the widths in ``rows_apart_bits`` one row at a time
   (engine.graph.linear, a Scan that a prefill passes in one piece): only verify steps pay,
   and there the one-row kernel costs about what the many-row one does per row. The
   runtime builds the row-invariant graph on the CPU provider only (CUDA's and CoreML's
   kernels are others).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from engine.cpu import CpuInfo, cpu_info
from engine.gguf.repack import PackedWeight


@dataclass(frozen=True)
class Kernels:
    fold_zero_points: bool = True   # 2.: FOLDED (True) or EXPLICIT
    rows_apart_bits: tuple[int, ...] = ()  # 3.: MatMulNBits widths a verify runs row by row

    def describe(self) -> str:
        zero_points = "folded into the offsets" if self.fold_zero_points else "explicit"
        apart = "".join(f", {bits}-bit matmuls of a verify step one row at a time"
                        for bits in self.rows_apart_bits)
        return (f"int8 activations into every quantized matmul, 4-bit zero points {zero_points}, "
                f"row-invariant attention (spare row){apart}")


# CPU class -> the choices measured best there (benchmarks/kernels.py derives each row)
TABLE: dict[str, Kernels] = {
    "avx512-vnni": Kernels(fold_zero_points=True),                        # AMD Zen 4/5
    "avx2": Kernels(fold_zero_points=True, rows_apart_bits=(4,)),         # AMD Zen 3
}
# other classes (ARM, older x86): not measured, so every quantized width of a verify step
# runs row by row, which keeps the contract whatever the one-row kernels do
UNMEASURED = Kernels(fold_zero_points=True, rows_apart_bits=(4, 8))


def cpu_class(cpu: CpuInfo) -> str:
    """TABLE's key for ``cpu``: its widest integer dot-product instructions."""
    flags = cpu.flags or frozenset()
    if {"avx512f", "avx512_vnni"} <= flags:
        return "avx512-vnni"
    if "avx2" in flags:
        return "avx2"
    return "unknown" if cpu.flags is None else "other"


def kernels_for(cpu: CpuInfo | None = None) -> Kernels:
    """The choices for ``cpu`` (default: this machine's)."""
    return TABLE.get(cpu_class(cpu or cpu_info()), UNMEASURED)


def describe(kernels: Kernels | None, cpu: CpuInfo | None = None) -> str:
    """One line for `lantern run --verbose` and the About dialog; ``kernels`` None: exact
    mode or another provider, where these choices do not apply."""
    cpu = cpu or cpu_info()
    if kernels is None:
        return f"CPU {cpu.describe()}; kernels: float activations (exact mode) or not the CPU's"
    measured = "measured for" if cpu_class(cpu) in TABLE else "NOT measured on"
    return f"CPU {cpu.describe()}; kernels: {kernels.describe()} ({measured} this CPU class)"


def fold_zero_points(weight: PackedWeight) -> PackedWeight:
    """``weight`` without its zero-point input (choice 2.), where that is the same weights:
    4-bit, zero point 0 in every block and one offset per block."""
    if (weight.bits != 4 or weight.zero_points is None or weight.offsets is None
            or weight.offset_block != weight.block_size or weight.zero_points.any()):
        return weight
    scales = weight.scales.reshape(weight.offsets.shape)
    offsets = weight.offsets + np.float32(weight.default_zero_point) * scales
    return dataclasses.replace(weight, zero_points=None, offsets=offsets.astype(np.float32))
