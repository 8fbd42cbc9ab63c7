"""What machine and software a run used: CPU, cores, GPU, OS and the versions of genenv, torch, transformers, Python.

The loop records these in a session's meta table when a run starts; reports show them (and fall back to
the reading machine's for sessions made before they were recorded). Nothing here imports torch.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
from pathlib import Path


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def local_versions() -> dict[str, str]:
    """genenv, torch, transformers and Python versions of the running Python environment (read without importing
    torch)."""
    return {"genenv": _version("genenv"), "torch": _version("torch"), "transformers": _version("transformers"),
            "python": platform.python_version()}


def local_machine() -> dict[str, str]:
    """CPU model and cores, GPU name(s) when nvidia-smi sees any, OS of the machine running genenv."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = "none detected"
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=10, check=False).stdout.strip()
            if out:
                gpu = "; ".join(sorted(set(out.splitlines())))
        except (OSError, subprocess.SubprocessError):
            pass
    return {"cpu": cpu, "cores": str(os.cpu_count() or "?"), "gpu": gpu,
            "os": f"{platform.system()} {platform.release()}"}
