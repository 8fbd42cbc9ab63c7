"""What machine and software a run used: CPU, cores, GPU, OS and the versions of genenv, torch, transformers, Python.

The loop records these in a session's meta table when a run starts; reports show them (and fall back to
the reading machine's for sessions made before they were recorded). A warm start records the line `machine_line`
writes for the machine that trained it: the same code and seed give slightly different weights on CPUs whose
instruction sets (`MATH_FLAGS`) make torch pick other kernels. Nothing here imports torch.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
from pathlib import Path

from genenv_engine import DISTRIBUTION


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def local_versions() -> dict[str, str]:
    """This project's (under its distribution's name, `genenv_engine.DISTRIBUTION`), torch, transformers and
    Python versions of the running Python environment (read without importing torch). Sessions recorded before the
    rename name this project ``genenv``."""
    return {
        DISTRIBUTION: _version(DISTRIBUTION),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "python": platform.python_version(),
    }


MATH_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
"""The CPU instruction sets (``/proc/cpuinfo`` flags) that decide which matrix kernels torch's CPU math runs."""


def cpu_math_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """Which of `MATH_FLAGS` the CPU offers, in that order; [] where ``cpuinfo`` cannot be read."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return []
    flags = next(
        (set(line.split(":", 1)[1].split()) for line in text.splitlines() if line.startswith("flags") and ":" in line),
        set(),
    )
    return [flag for flag in MATH_FLAGS if flag in flags]


def machine_line(cpu: str, flags: list[str], torch_version: str, kernels: str, gpu: str | None = None) -> str:
    """One line naming the machine and the math it ran a computation with.

    >>> machine_line("Intel Xeon", ["avx2", "avx512f"], "2.13.0+cpu", "AVX512")
    'Intel Xeon (avx2 avx512f); torch 2.13.0+cpu, CPU kernels AVX512'
    >>> machine_line("AMD EPYC", [], "2.13.0", "AVX2", "NVIDIA H100")
    'AMD EPYC (no AVX flags read); torch 2.13.0, CPU kernels AVX2; GPU NVIDIA H100'
    """
    line = f"{cpu} ({' '.join(flags) or 'no AVX flags read'}); torch {torch_version}, CPU kernels {kernels}"
    return f"{line}; GPU {gpu}" if gpu else line


def local_cpu() -> str:
    """The CPU model of the machine running genenv (``/proc/cpuinfo``'s model name, else what `platform` says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def local_machine() -> dict[str, str]:
    """CPU model and cores, GPU name(s) when nvidia-smi sees any, OS of the machine running genenv."""
    cpu = local_cpu()
    gpu = "none detected"
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            ).stdout.strip()
            if out:
                gpu = "; ".join(sorted(set(out.splitlines())))
        except (OSError, subprocess.SubprocessError):
            pass
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count() or "?"),
        "gpu": gpu,
        "os": f"{platform.system()} {platform.release()}",
    }
