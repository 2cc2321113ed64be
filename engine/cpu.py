"""What the processor offers, as far as the kernel choices care (engine.graph.kernels).

Linux names its features in /proc/cpuinfo; elsewhere they are "unknown" (no dependency
is worth four flags). Read once per process.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from functools import cache
from pathlib import Path

# /proc/cpuinfo flag -> the name users know it by, in the order they are shown
FEATURES = {
    "avx2": "AVX2",
    "avx512f": "AVX-512",
    "avx512_vnni": "AVX-512 VNNI",
    "avx_vnni": "AVX-VNNI",
    "amx_int8": "AMX",
}


@dataclass(frozen=True)
class CpuInfo:
    model: str                     # "AMD EPYC", "Apple M2", ... or the machine type
    flags: frozenset[str] | None   # /proc/cpuinfo flags; None: not known on this OS

    @property
    def features(self) -> list[str]:
        """The known names of FEATURES this CPU has ([] when unknown)."""
        return [name for flag, name in FEATURES.items() if self.flags and flag in self.flags]

    def describe(self) -> str:
        if self.flags is None:
            return f"{self.model} (features unknown)"
        return f"{self.model} ({', '.join(self.features) or 'no AVX2'})"


@cache
def cpu_info() -> CpuInfo:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return CpuInfo(model=platform.processor() or platform.machine() or "unknown", flags=None)
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model = fields.get("model name") or fields.get("Model") or platform.machine()
    return CpuInfo(model=model or "unknown",
                   flags=frozenset(fields.get("flags", fields.get("Features", "")).split()))
