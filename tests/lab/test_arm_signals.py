"""The grounded study's table of arms: one row per arm × seed from its run record, per-epoch means over the training
epochs only, counts from the store shown as one figure when every epoch agrees, "—" for what a record lacks."""

from __future__ import annotations

import json
from pathlib import Path

from genenv_lab import arm_signals, figures, reading

ROOT = Path(__file__).resolve().parents[2]


def _epoch(epoch: int, **fields) -> dict:
    return {"epoch": epoch, "status": "done", **fields}


def _write(path: Path, epochs: list[dict], e0: str = "0011", e8: str = "0111") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"epochs": epochs, "rescored": {"400": {"0": {"bfcl": e0}, "8": {"bfcl": e8}}}}))
    return path


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip("|").split("|")]


def test_a_row_averages_the_training_epochs_and_ignores_epoch0():
    data = {
        "epochs": [
            _epoch(0, agent_steps=None, train_rollouts=0, eval_generations=0, zero_advantage_share=None),
            _epoch(
                1,
                agent_steps=4.0,
                train_rollouts=320,
                valid_fraction=0.5,
                task_band_fraction=0.1,
                band_fraction=0.25,
                zero_advantage_share=0.8,
                fresh_tasks=40,
                simulator_examples=200,
                weight_min=0.9,
                weight_max=1.3,
                weight_sd=0.1,
                drift=0.05,
                eval_generations=300,
            ),
            _epoch(
                2,
                agent_steps=4.0,
                train_rollouts=320,
                valid_fraction=0.75,
                task_band_fraction=0.2,
                band_fraction=0.5,
                zero_advantage_share=0.6,
                fresh_tasks=45,
                simulator_examples=210,
                weight_min=0.7,
                weight_max=1.1,
                weight_sd=0.2,
                drift=0.12,
                eval_generations=340,
            ),
        ],
        "rescored": {"400": {"0": {"bfcl": "0011"}, "2": {"bfcl": "0111"}}},
    }
    cells = _cells(arm_signals.row("grounded", 0, data))
    assert cells == [
        "`grounded`",
        "0",
        "0.500 → 0.750",
        "+0.250 (.250)",
        "4 / 320",
        ".625",
        ".150 / .375",
        ".300",
        "42.5",
        "205.0",
        "0.70–1.30 (.150)",
        ".120",
        "320",
    ]


def test_unequal_budgets_show_their_range_and_a_wrong_count_is_not_hidden():
    epochs = [_epoch(1, agent_steps=4.0, train_rollouts=320), _epoch(2, agent_steps=3.0, train_rollouts=300)]
    assert _cells(arm_signals.row("frozen", 1, {"epochs": epochs}))[4] == "3–4 / 300–320"
    epochs[1]["train_rollouts"] = None  # an epoch the store did not count is not passed off as the others' figure
    assert _cells(arm_signals.row("frozen", 1, {"epochs": epochs}))[4] == "3–4 / —"


def test_a_record_without_a_figure_or_a_rescore_says_so():
    data = {
        "epochs": [_epoch(1, agent_steps=4.0, in_band_fraction=0.25, zero_advantage_share=0.75)],
        "correct": {"0": {"bfcl": "01"}, "1": {"bfcl": "11"}},
    }
    cells = _cells(arm_signals.row("off", 0, data))
    assert cells[0] == "`off(20)`" and cells[2:4] == ["waiting for the re-score", "—"]
    # the band filter's share stands for the batch share in a record that predates it; no task share
    assert cells[5:8] == ["—", "— / .250", ".250"]
    assert cells[8:] == ["—"] * 5


def test_the_table_lists_every_arm_and_seed_in_order_and_seed2_only_where_run(tmp_path):
    base = tmp_path / "docs/results/smol-l34/grounded/records"
    _write(base / "grounded-s0.json", [_epoch(1, agent_steps=4.0)])
    _write(base / "controller-s2.json", [_epoch(1, agent_steps=4.0)])
    _write(tmp_path / "docs/results/smol-l34/genenv20/records/trained-s1.json", [_epoch(1, agent_steps=4.0)])
    lines = arm_signals.arms_table(tmp_path).splitlines()
    assert lines[0] == arm_signals.HEADER and len(_cells(lines[1])) == len(_cells(lines[0])) == 13
    listed = [tuple(_cells(line)[:2]) for line in lines[2:]]
    assert listed[:4] == [("`grounded`", "0"), ("`grounded`", "1"), ("`controller`", "0"), ("`controller`", "1")]
    assert listed[4] == ("`controller`", "2") and ("`frozen`", "2") not in listed
    assert len(listed) == 2 * len(arm_signals.ARMS) + 1
    assert _cells(lines[3])[2] == "no record yet" and all(len(_cells(line)) == 13 for line in lines)
    # a committed record read in place of a run of the study's own is named by its study
    assert ("`trained`", "1 (genenv20)") in listed and ("`trained`", "0") in listed


def test_a_run_from_genenv20s_start_follows_its_arm_and_seed(tmp_path):
    _write(tmp_path / reading.STUDY_RECORDS / "controller-s1.json", [_epoch(1, fresh_tasks=80)])
    _write(tmp_path / reading.SAME_START / "controller-s1.json", [_epoch(1, fresh_tasks=79)], e8="1111")
    lines = arm_signals.arms_table(tmp_path).splitlines()[2:]
    at = [tuple(_cells(line)[:2]) for line in lines].index(("`controller`", "1"))
    assert _cells(lines[at + 1])[:4] == ["`controller`", "1 (genenv20 start)", "0.500 → 1.000", "+0.500 (.289)"]
    assert _cells(lines[at + 1])[8] == "79.0" and _cells(lines[at])[8] == "80.0"


def test_the_committed_table_reads_the_records():
    rows = {tuple(_cells(line)[:2]): _cells(line) for line in arm_signals.arms_table(ROOT).splitlines()[2:]}
    assert rows[("`grounded`", "0")][2:4] == ["0.635 → 0.715", "+0.080 (.018)"]  # 254/400 → 286/400
    assert rows[("`off(20)`", "1")][4] == "4 / 320" and rows[("`controller`", "0")][8] == "80.0"
    assert f"{reading.GROUNDED_PAGE}#arms" not in figures.stale(ROOT)
