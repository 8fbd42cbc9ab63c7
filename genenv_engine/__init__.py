"""genenv engine: the headless GenEnv co-evolution of an agent and an environment simulator.

Importing this package loads nothing heavy: submodules are imported where they are used, so
front ends (the console, the CLI) and tests can import it cheaply. It does set one default
before torch loads: OpenMP worker threads spin only briefly (``GOMP_SPINCOUNT``, see
`OPENMP_SPIN`) before sleeping, unless the user chose an OpenMP wait policy. On a busy 2-core
machine torch's default long spin made a tiny SFT step 4-5x slower at 2 threads (its threads wait
on each other while other processes hold the cores); the spin count does not change any result.
"""

import os

__version__ = "0.1.0"

OPENMP_SPIN = "2000"
"""Iterations an idle OpenMP thread spins before it sleeps (libgomp's default is 300,000)."""

if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = OPENMP_SPIN
