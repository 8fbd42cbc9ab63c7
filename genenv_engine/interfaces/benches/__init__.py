"""Speed and correctness benchmarks behind ``genenv bench NAME``: one short module per benchmark.

Each module provides ``add_arguments(parser)``, ``run(args) -> dict`` (the JSON result) and
``table(result) -> rich.table.Table``. `genenv_engine.interfaces.benches.common` adds the machine's state to
every result (load average, CPUs, torch threads, versions), prints the table (or the JSON with
``--json``) and writes ``bench-NAME.json`` under ``--out``. Speed goals are reported as met or
not; a benchmark never fails because it is slow.
"""

from __future__ import annotations

BENCHES = {
    "rollouts": "genenv_engine.interfaces.benches.rollouts",
    "epoch": "genenv_engine.interfaces.benches.epoch",
    "warmstart": "genenv_engine.interfaces.benches.warmstart",
    "store": "genenv_engine.interfaces.benches.store",
    "grpo": "genenv_engine.interfaces.benches.grpo",
    "ranking": "genenv_engine.interfaces.benches.ranking",
    "passk": "genenv_engine.interfaces.benches.passk",
    "grammar": "genenv_engine.interfaces.benches.grammar",
    "reliability": "genenv_engine.interfaces.benches.reliability",
    "records-diff": "genenv_engine.ablation.records_diff",  # the ablation bench: reads run records
}
"""Benchmark name -> module implementing it."""
