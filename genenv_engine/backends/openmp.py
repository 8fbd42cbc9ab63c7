"""The OpenMP spin of torch's threads, chosen by the machine's load: `choose_spin`, called by every entry point.

libgomp reads ``GOMP_SPINCOUNT`` (how many iterations an idle worker thread spins before it sleeps) once, when torch
loads it, so each command, benchmark child, console and Ray worker calls `choose_spin` first, before torch loads. It
sets `OPENMP_SPIN_IDLE` when other processes leave the cores free over a short look at Linux's ``/proc``
(`genenv_engine.backends.cpu_load.cores_idle`, which also primes the load reading that decoding looks at later) and
`OPENMP_SPIN_BUSY` otherwise or where ``/proc`` cannot be read, unless the user chose: a set ``GOMP_SPINCOUNT`` or
``OMP_WAIT_POLICY`` is left alone. Child processes inherit the value, so they keep the parent's choice. The spin
changes how fast a run is, never what it computes; the measurements behind the two values are in the repository's
performance results (the OpenMP spin page). Nothing here imports torch, and importing this module does nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

OPENMP_SPIN_BUSY = "2000"
"""The spin while other processes use the cores (libgomp's default is 300,000): short, so that a waiting thread
yields its core instead of holding it against the processes that need it."""
OPENMP_SPIN_IDLE = "30000"
"""The spin on otherwise idle cores: long enough that a thread does not fall asleep between a small model's
operations."""
USER_SETTINGS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
"""The variables by which the user chooses the wait policy; `choose_spin` changes nothing when one is set."""
SETUP_HOOK = "genenv_engine.backends.openmp.choose_spin"
"""`choose_spin` by its import path, for process starters that take one (Ray's ``worker_process_setup_hook``)."""


def user_chose(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` already names an OpenMP wait policy or spin.

    >>> user_chose({"GOMP_SPINCOUNT": "77"}), user_chose({"OMP_WAIT_POLICY": "PASSIVE"}), user_chose({"PATH": "/"})
    (True, True, False)
    """
    return any(name in environ for name in USER_SETTINGS)


def spin_for(idle: bool) -> str:
    """The spin for cores that are (``idle``) or are not free of other processes' work.

    >>> spin_for(True), spin_for(False)
    ('30000', '2000')
    """
    return OPENMP_SPIN_IDLE if idle else OPENMP_SPIN_BUSY


def choose_spin(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Set ``GOMP_SPINCOUNT`` in ``environ`` (default: this process's environment) by the cores' load (a 0.1 s
    look) and return it; None, changing nothing and without looking, when the user chose (`user_chose`).

    Call it before torch is imported: libgomp reads the variable when it loads.
    """
    env = os.environ if environ is None else environ
    if user_chose(env):
        return None
    from genenv_engine.backends.cpu_load import cores_idle

    env["GOMP_SPINCOUNT"] = spin = spin_for(cores_idle())
    return spin
