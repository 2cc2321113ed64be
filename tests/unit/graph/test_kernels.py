"""Fast mode's kernel choices follow the CPU class (engine.graph.kernels), and what runs is
named: CPU features from /proc/cpuinfo, or "unknown" where there is none."""

from engine.cpu import CpuInfo, cpu_info
from engine.graph.kernels import TABLE, UNMEASURED, Kernels, cpu_class, describe, kernels_for

ZEN4 = CpuInfo("AMD EPYC 9R14", frozenset({"fma", "avx2", "avx512f", "avx512bw", "avx512_vnni",
                                           "avx_vnni"}))
ZEN3 = CpuInfo("AMD EPYC 7R13", frozenset({"fma", "avx2"}))
MAC = CpuInfo("arm", None)


def test_the_cpu_class_picks_the_table_row():
    assert cpu_class(ZEN4) == "avx512-vnni" and cpu_class(ZEN3) == "avx2"
    assert kernels_for(ZEN4) == TABLE["avx512-vnni"] and kernels_for(ZEN3) == TABLE["avx2"]
    assert cpu_class(MAC) == "unknown" and kernels_for(MAC) == UNMEASURED


def test_the_user_is_told_the_features_and_the_choice():
    line = describe(Kernels(), ZEN4)
    assert "AMD EPYC 9R14 (AVX2, AVX-512, AVX-512 VNNI, AVX-VNNI)" in line
    assert "int8 activations" in line and "folded" in line and "measured for" in line
    assert "features unknown" in describe(Kernels(), MAC) and "NOT measured" in describe(
        Kernels(), MAC)
    assert "exact mode" in describe(None, ZEN3)
    assert cpu_info().model
