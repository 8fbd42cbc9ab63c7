"""`choose_spin` sets the OpenMP spin by the cores' load, unless the user chose a wait policy."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from genenv_engine.backends import cpu_load
from genenv_engine.backends.openmp import OPENMP_SPIN_BUSY, OPENMP_SPIN_IDLE, choose_spin


def _spin(env: dict[str, str]) -> str:
    code = (
        "import os; from genenv_engine.backends.openmp import choose_spin; chosen = choose_spin(); "
        "print(os.environ.get('GOMP_SPINCOUNT') if chosen is None or chosen == os.environ['GOMP_SPINCOUNT'] "
        "else 'mismatch')"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    return subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_user_choices_win_and_the_default_is_one_of_the_two():
    assert _spin({"GOMP_SPINCOUNT": "77"}) == "77"
    assert _spin({"OMP_WAIT_POLICY": "ACTIVE"}) == "None"
    assert _spin({}) in (OPENMP_SPIN_BUSY, OPENMP_SPIN_IDLE)


def test_the_choice_writes_only_the_environment_it_is_given(monkeypatch):
    monkeypatch.setattr(cpu_load, "cores_idle", lambda: True)
    env: dict[str, str] = {}
    assert choose_spin(env) == OPENMP_SPIN_IDLE and env == {"GOMP_SPINCOUNT": OPENMP_SPIN_IDLE}
    monkeypatch.setattr(cpu_load, "cores_idle", lambda: False)
    env = {"PATH": "/bin"}
    assert choose_spin(env) == OPENMP_SPIN_BUSY and env == {"PATH": "/bin", "GOMP_SPINCOUNT": OPENMP_SPIN_BUSY}
    env = {"OMP_WAIT_POLICY": "PASSIVE"}
    assert choose_spin(env) is None and env == {"OMP_WAIT_POLICY": "PASSIVE"}


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux's /proc")
def test_a_busy_process_on_every_core_makes_the_cores_busy():
    """Real processes spinning on every core: the look sees them, and decoding keeps one thread."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.3)
        assert not cpu_load.cores_idle(0.3)
        time.sleep(0.3)
        others = cpu_load.others_cores()
        assert others is not None and others > 0.5
        assert _spin({}) == OPENMP_SPIN_BUSY
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def test_threads_follow_the_others_load(monkeypatch):
    monkeypatch.setattr(cpu_load, "others_cores", lambda: 0.05)
    assert cpu_load.decode_threads(2) == 2
    monkeypatch.setattr(cpu_load, "others_cores", lambda: 1.2)
    assert cpu_load.decode_threads(2) == 1
    monkeypatch.setattr(cpu_load, "others_cores", lambda: None)  # /proc unreadable: one thread
    assert cpu_load.decode_threads(2) == 1
    assert cpu_load.decode_threads(1) == 1
