"""``python -m benchmarks``: the figures BENCHMARKS.md's current table holds, llama-bench
style: the machine and the commit, then per demo model Lantern (fast mode, the weights as
this build reads them) against llama.cpp on the same GGUF and threads, rounds alternating:
load (cold and warm), peak RSS, prefill, decode and the ratios (benchmarks.decode).

    .venv/bin/python -m benchmarks [--model 0.5b 1.5b] [--threads 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version

from benchmarks.decode import chosen_models, compare
from engine import native
from engine.cpu import cpu_info


def package(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def machine_line() -> str:
    """The CPU (model and the features the kernels choose by), cores and software."""

    ops = native.custom_ops()
    kernels = f"GgufMatMul ({ops.isa})" if ops.isa else f"MatMulNBits ({ops.why})"
    return (f"{cpu_info().describe()}, {os.cpu_count()} CPUs, {platform.system()}; "
            f"onnxruntime {package('onnxruntime')}, llama-cpp-python "
            f"{package('llama-cpp-python')}; Lantern's matmul: {kernels}")


def commit() -> str:
    found = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                           text=True, check=False)
    return found.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", default=["0.5b", "1.5b"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(machine_line())
    print(f"commit {commit()}")
    compare(chosen_models(None, args.model), args.threads, args.rounds, [], vs_llama_cpp=True)


if __name__ == "__main__":
    main()
