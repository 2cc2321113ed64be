"""One tiny class per GGUF quant format that maps exactly onto MatMulNBits (FORMATS),
the float types kept dense (DENSE); everything else is de-quantized by ``engine.gguf.repack``.
"""

from engine.gguf.quants import kquants, legacy  # noqa: F401  (fill FORMATS)
from engine.gguf.quants.base import FORMATS, BlockFormat, PackedWeight, pack_bits, unpack_bits
from engine.gguf.quants.dense import DENSE

__all__ = ["DENSE", "FORMATS", "BlockFormat", "PackedWeight", "pack_bits", "unpack_bits"]
