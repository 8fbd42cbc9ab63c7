"""``genenv bench reliability`` (`genenv_engine.interfaces.benches.reliability`) on a real micro session whose
batches a scripted simulator wrote: with a test-double agent that solves every task with the same probability, the
batches differ only by sampling noise, so the rounds must not agree on their order."""

from __future__ import annotations

import json
import random

import pytest

from genenv_engine.config import load_config
from genenv_engine.core.estimators import ESTIMATORS
from genenv_engine.environments.bfcl.mini import generate_task
from genenv_engine.interfaces.benches.reliability import markdown, measure
from genenv_engine.method.loop import run
from genenv_engine.storage.session import Session
from genenv_engine.testing import scripted_backends


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Session:
    rng = random.Random(4)
    drafts = [" => ".join(generate_task(level, rng)[:2]) for level in (1, 2, 3, 2, 1, 3, 2, 1) * 8]
    path = tmp_path_factory.mktemp("reliability") / "s"
    made = Session.create(load_config("micro", overrides={"epochs": 1, "simulator.seeds_per_epoch": 12}), path)
    run(made, backend_factory=scripted_backends(drafts))
    made.store.close()
    return Session.open(path)


def test_a_task_blind_agent_gives_a_reward_with_no_reliability(session):
    result = measure(session, 1, rounds=6, ks=(1, 8), attempts=8, backend_factory=scripted_backends(p=0.5))
    assert result["batches"] >= 10 and result["tasks"] >= 20 and result["replayed_tasks"] > 0
    assert result["mean_success"] == pytest.approx(0.5, abs=0.1)
    cells = {(c["tasks_per_batch"], c["k"]): c for c in result["cells"]}
    assert {k for _, k in cells} == {1, 8}
    for cell in cells.values():  # every batch's true rate is 0.5: what the rounds share is chance
        assert cell["p_hat_icc"] is not None and abs(cell["p_hat_icc"]) < 0.3
        assert cell["batches"] == result["batches"]
    one = [c for (b, k), c in cells.items() if k == 1 and b == 1]
    for cell in one:  # a single attempt at a single task: p-hat is 0 or 1, and R_env(0) = R_env(1) at alpha 0.5
        assert cell["reward_sd"] == pytest.approx(0.0, abs=1e-12)
        assert cell["reward_icc"] is None and cell["weights_rank"] is None
    eight = [c for (_, k), c in cells.items() if k == 8]
    assert eight and all(c["weights_rank"] is not None and c["weights_rank"] < 0.3 for c in eight)


def test_each_estimator_is_reported_beside_the_raw_p_hat(session):
    result = measure(session, 1, rounds=3, ks=(4,), attempts=4, backend_factory=scripted_backends(p=0.5))
    for cell in result["cells"]:
        figures = cell["estimators"]
        assert set(figures) == {"p_hat", *ESTIMATORS}
        assert figures["p_hat"]["icc"] == pytest.approx(cell["p_hat_icc"])  # the raw row is the cell's own p-hat
        assert figures["p_hat"]["weights_rank"] == pytest.approx(cell["weights_rank"])
        assert figures["p_hat"]["bias"] == pytest.approx(0.0, abs=1e-12)  # k = all attempts: its own reference
        for name in ESTIMATORS:  # every batch's true rate is 0.5: an estimate may not drift from the mean
            assert abs(figures[name]["bias"]) < 0.05
            assert figures[name]["icc"] is not None and figures[name]["validity"] is not None
    rows = [line for line in markdown(result).splitlines() if line.startswith("| all |") or line.startswith("| 1 |")]
    assert len(rows) == len(result["cells"]) * (2 + len(ESTIMATORS))  # a cell's row, then p̂'s and each estimator's


def test_the_command_writes_its_figures(session, tmp_path, capsys):
    from genenv_engine.interfaces.cli import main

    session.store.close()
    code = main(
        ["bench", "reliability", str(session.path), "--rounds", "2", "--k", "1", "--k", "2", "--out", str(tmp_path)]
    )
    assert code in (0, None)
    result = json.loads((tmp_path / "bench-reliability.json").read_text())
    assert result["rounds"] == 2 and result["attempts"] == 2
    assert sorted({c["k"] for c in result["cells"]}) == [1, 2]
    table = (tmp_path / "bench-reliability.md").read_text()
    cells = table.split("\n\n")[1]  # the cells' table, before the estimates'
    assert cells.count("\n| ") == len(result["cells"]) and "| all | 2 |" in table  # a row each, under the header
    assert "reward reliability" in capsys.readouterr().out


def test_epoch_zero_and_a_single_round_are_refused(session):
    with pytest.raises(SystemExit, match="at least 1"):
        measure(session, 0, rounds=4)
    with pytest.raises(SystemExit, match="at least 2"):
        measure(session, 1, rounds=1)
