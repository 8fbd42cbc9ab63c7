"""The trainers study's page: its table is what the committed records give, a changed record makes it stale, and
the verdict's differences are paired on the held-out tasks and on the epochs."""

from __future__ import annotations

import json
import math
from pathlib import Path

from genenv_lab import figures, trainers

ROOT = Path(__file__).resolve().parents[2]


def _record(arm: str, seed: int, p_hats: list[float], last: str) -> dict:
    epochs = [{"epoch": 0, "p_hat": None, "heldout": {"bfcl": 0.5}, "heldout_correct": {"bfcl": "1100"}}]
    for k, p in enumerate(p_hats, start=1):
        correct = last if k == len(p_hats) else "1100"
        epochs.append(
            {
                "epoch": k,
                "p_hat": p,
                "band_share": 0.5,
                "valid_fraction": 0.25,
                "heldout": {"bfcl": correct.count("1") / len(correct)},
                "heldout_correct": {"bfcl": correct},
                "seconds": 10.0 + k,
            }
        )
    return {"arm": arm, "seed": seed, "wall_seconds": 99.0, "threads": 2, "machine": {"cpu": "cpu"}, "epochs": epochs}


def _root(tmp_path: Path, *recs: dict) -> Path:
    folder = tmp_path / trainers.RECORDS
    folder.mkdir(parents=True)
    for r in recs:
        (folder / f"{r['arm']}-s{r['seed']}.json").write_text(json.dumps(r))
    page = tmp_path / trainers.TRAINERS_PAGE
    page.write_text(f"# t\n{figures.begin_marker('table')}\n{figures.end_marker('table')}\n")
    return tmp_path


def test_the_committed_table_is_what_the_records_give():
    text = (ROOT / trainers.TRAINERS_PAGE).read_text()
    assert figures.splice(text, "table", trainers.trainers_table(ROOT)) == text, "run `make figures`"


def test_a_changed_record_makes_the_table_stale(tmp_path):
    root = _root(tmp_path, _record("native", 0, [0.5, 0.5], "1100"), _record("trl", 0, [0.4, 0.6], "1110"))
    page = root / trainers.TRAINERS_PAGE
    page.write_text(figures.splice(page.read_text(), "table", trainers.trainers_table(root)))
    assert "| 0 | 1 | .500 / .400 | .50 / .50 | .25 / .25 | .5000 / .5000 | 11 / 11 |" in page.read_text()
    path = root / trainers.RECORDS / "trl-s0.json"
    data = json.loads(path.read_text())
    data["epochs"][1]["p_hat"] = 0.45
    path.write_text(json.dumps(data))
    assert figures.splice(page.read_text(), "table", trainers.trainers_table(root)) != page.read_text()


def test_the_verdict_pairs_held_out_on_tasks_and_p_hat_on_epochs():
    base = _record("native", 0, [0.5, 0.5, 0.5], "1100")
    other = _record("trl", 0, [0.4, 0.6, 0.2], "1110")
    p = trainers.pair(base, other)
    assert p["epoch"] == 3 and p["heldout"] == (0.25, 0.25) and p["heldout_agrees"]
    mean, se, n = p["p_hat"]
    assert n == 3 and math.isclose(mean, -0.1) and math.isclose(se, math.sqrt(0.08 / 2 / 3))
    assert p["p_hat_agrees"]  # |−0.1| <= 2 × 0.115
    far = trainers.pair(base, _record("trl", 0, [0.2, 0.21, 0.2], "1100"))
    assert not far["p_hat_agrees"] and far["heldout"] == (0.0, 0.0) and far["heldout_agrees"]
