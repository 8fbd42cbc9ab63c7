"""The machine line a warm start records: the CPU's math instruction sets read from a cpuinfo file, and the line
written from them."""

from __future__ import annotations

import torch

from genenv_engine.core.machine import MATH_FLAGS, cpu_math_flags, machine_line
from genenv_engine.training.warmstart.training import built_on

CPUINFO = """processor\t: 0
model name\t: Test CPU
flags\t\t: fpu sse2 avx2 amx_tile avx512f avx512_vnni_x
"""


def test_the_math_flags_are_read_in_their_order_and_only_whole_names(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO)
    assert cpu_math_flags(info) == ["avx2", "avx512f", "amx_tile"]  # not avx512_vnni from avx512_vnni_x
    assert cpu_math_flags(tmp_path / "missing") == []
    info.write_text("processor\t: 0\n")
    assert cpu_math_flags(info) == []


def test_the_line_names_this_machines_cpu_flags_and_torch_kernels():
    line = built_on()
    assert f"torch {torch.__version__}, CPU kernels {torch.backends.cpu.get_cpu_capability()}" in line
    assert line == machine_line(
        line.split(" (")[0], cpu_math_flags(), torch.__version__, torch.backends.cpu.get_cpu_capability()
    )
    assert set(cpu_math_flags()) <= set(MATH_FLAGS)
