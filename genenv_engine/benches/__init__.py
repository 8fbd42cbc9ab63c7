"""Speed and correctness benchmarks behind ``genenv bench NAME``: one short module per benchmark.

Each module provides ``add_arguments(parser)``, ``run(args) -> dict`` (the JSON result) and
``table(result) -> rich.table.Table``. `genenv_engine.benches.common` adds the machine's state to
every result (load average, CPUs, torch threads, versions), prints the table (or the JSON with
``--json``) and writes ``bench-NAME.json`` under ``--out``. Speed goals are reported as met or
not; a benchmark never fails because it is slow.
"""

from __future__ import annotations

BENCHES = {
    "rollouts": "genenv_engine.benches.rollouts",
    "epoch": "genenv_engine.benches.epoch",
    "warmstart": "genenv_engine.benches.warmstart",
    "store": "genenv_engine.benches.store",
    "grpo": "genenv_engine.benches.grpo",
    "ranking": "genenv_engine.benches.ranking",
    "passk": "genenv_engine.benches.passk",
    "grammar": "genenv_engine.benches.grammar",
    "records-diff": "genenv_engine.experiments.records_diff",  # study tooling: reads run records
}
"""Benchmark name -> module implementing it."""
