"""Importing the engine before torch sets a short OpenMP spin, unless the user chose a wait policy."""

from __future__ import annotations

import os
import subprocess
import sys


def _spin(env: dict[str, str]) -> str:
    code = "import genenv_engine, os; print(os.environ.get('GOMP_SPINCOUNT'))"
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_short_spin_by_default_and_user_choices_win():
    assert _spin({}) == "2000"
    assert _spin({"GOMP_SPINCOUNT": "77"}) == "77"
    assert _spin({"OMP_WAIT_POLICY": "ACTIVE"}) == "None"
