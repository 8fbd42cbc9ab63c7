"""--log tensorboard|wandb: each epoch's status numbers, histograms and samples, read back from what was written;
a resumed session continues the same run."""

from __future__ import annotations

import json

import pytest

from genenv_engine.cli import main
from genenv_engine.loggers import flatten
from genenv_engine.store import Store

pytest.importorskip("tensorboard")
pytest.importorskip("wandb")


def _scalars(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_run_and_resume_log_the_status_numbers_to_tensorboard_and_wandb(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    folder = tmp_path / "s"
    assert main(["run", "--preset", "micro", "--session", str(folder), "--epochs", "1", "--quiet",
                 "--log", "tensorboard", "--log", "wandb"]) == 0
    with Store(folder / "genenv.db") as store:
        run_id = store.get_meta("wandb_run_id")
    assert run_id
    assert main(["resume", str(folder), "--epochs", "2", "--quiet", "--log", "tensorboard", "--log", "wandb"]) == 0
    capsys.readouterr()
    assert main(["status", str(folder), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)["epochs"]

    acc = _scalars(folder / "logs" / "tensorboard")
    for row in status:  # every numeric status value at its epoch, run and resume in one folder
        for key, value in flatten({k: v for k, v in row.items() if k not in ("epoch", "status")}).items():
            points = {e.step: e.value for e in acc.Scalars(key)}
            assert points[row["epoch"]] == pytest.approx(value, rel=1e-5), key
    assert [e.step for e in acc.Scalars("heldout/bfcl")] == [0, 1, 2]
    with Store(folder / "genenv.db") as store:
        p_hats = [r[0] for r in store.db.execute("SELECT p_hat FROM batches WHERE epoch = 2 AND p_hat IS NOT NULL")]
        assert store.get_meta("wandb_run_id") == run_id  # the resume kept the run
    if p_hats:
        hist = {e.step: e.histogram_value for e in acc.Histograms("p_hat")}
        assert hist[2].num == len(p_hats) and hist[2].sum == pytest.approx(sum(p_hats), rel=1e-5)
    texts = {e.step: e.tensor_proto.string_val[0].decode() for e in acc.Tensors("samples/text_summary")}
    assert set(texts) == {1, 2} and "| benchmark | level | origin |" in texts[2] and "| bfcl |" in texts[2]

    runs = sorted(p.name for p in (folder / "logs" / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and all(name.endswith(run_id) for name in runs)  # one W&B run, resumed
    tables = sorted((folder / "logs" / "wandb").glob("offline-run-*/files/media/table/samples_*.table.json"))
    assert tables  # W&B's own table files: the samples with the columns genenv logs
    table = json.loads(tables[-1].read_text())
    assert table["columns"] == ["benchmark", "level", "origin", "prompt", "response", "reward"]
    assert table["data"] and all(row[0] == "bfcl" for row in table["data"])
    with pytest.raises(SystemExit):  # an unknown logger is refused by the parser, before any session exists
        main(["run", "--preset", "micro", "--session", str(tmp_path / "t"), "--log", "nope"])
    assert not (tmp_path / "t").exists()
