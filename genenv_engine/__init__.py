"""genenv engine: the headless GenEnv co-evolution of an agent and an environment simulator.

Importing this package loads nothing heavy: submodules are imported where they are used, so
front ends (the console, the CLI) and tests can import it cheaply. It does set one default
before torch loads, unless the user chose an OpenMP wait policy: how long an idle OpenMP worker
thread spins before it sleeps (``GOMP_SPINCOUNT``), chosen by whether other processes are using
the cores as the package is imported (`genenv_engine.backends.cpu_load`, a 0.1 s look on Linux).
A short spin (`OPENMP_SPIN_BUSY`) when they are: on a busy 2-core machine torch's default long
spin made a tiny SFT step 4-5x slower at 2 threads (its threads wait on each other while other
processes hold the cores). A longer one (`OPENMP_SPIN_IDLE`) when they are not: the short spin
puts a thread to sleep between the tiny model's operations, and the tiny epoch on two idle cores
took 17 s with it against 13.2 s. The spin count does not change any result.
"""

import os

__version__ = "0.1.0"

OPENMP_SPIN_BUSY = "2000"
"""Iterations an idle OpenMP thread spins before it sleeps while other processes use the cores (libgomp's
default is 300,000): the tiny epoch beside one busy process took 27 s with it, 45 s with `OPENMP_SPIN_IDLE`."""
OPENMP_SPIN_IDLE = "30000"
"""The spin on otherwise idle cores: the tiny epoch took 13.2 s with it, 12.6 s with libgomp's default, 17 s with
`OPENMP_SPIN_BUSY` (2 cores, median of 3 epochs)."""

if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    from genenv_engine.backends.cpu_load import cores_idle

    os.environ["GOMP_SPINCOUNT"] = OPENMP_SPIN_IDLE if cores_idle() else OPENMP_SPIN_BUSY
