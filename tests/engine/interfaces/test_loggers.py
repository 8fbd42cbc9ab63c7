"""--log tensorboard|wandb|trackio: each epoch's status numbers, histograms and samples, read back from what was
written; a resumed session continues the same run."""

from __future__ import annotations

import json
import socket
import sqlite3
import sys
from types import SimpleNamespace

import pytest

from genenv_engine.interfaces.cli import main
from genenv_engine.interfaces.loggers import TrackioLogger, flatten
from genenv_engine.storage.store import Store


def _scalars(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    return acc


def _wandb_history(run_folder) -> dict[int, dict[str, float]]:
    """The history rows of a W&B offline run, by step: its ``run-*.wandb`` file's records, framed as W&B writes
    them (a 7-byte header, then 32 KiB blocks of records each with a 7-byte header: checksum, length, kind 1 whole
    / 2 first / 3 middle / 4 last) and decoded with W&B's own ``Record`` protobuf."""
    from wandb.proto import wandb_internal_pb2

    (path,) = run_folder.glob("run-*.wandb")
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, chunks, pending = 32768, 7, [], b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            break
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            chunks.append(pending)
    rows: dict[int, dict[str, float]] = {}
    for chunk in chunks:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(chunk)
        if record.WhichOneof("record_type") == "history":
            items = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item}
            rows[record.history.step.num] = {k: v for k, v in items.items() if isinstance(v, (int, float))}
    return rows


def test_run_and_resume_log_the_status_numbers_to_tensorboard_and_wandb(tmp_path, monkeypatch, capsys):
    pytest.importorskip("tensorboard")
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    folder = tmp_path / "s"
    assert (
        main(
            [
                "run",
                "--preset",
                "micro",
                "--session",
                str(folder),
                "--epochs",
                "1",
                "--quiet",
                "--log",
                "tensorboard",
                "--log",
                "wandb",
            ]
        )
        == 0
    )
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
    history: dict[int, dict[str, float]] = {}
    for run in runs:  # the first run's steps, then the resumed run's
        history.update(_wandb_history(folder / "logs" / "wandb" / run))
    assert sorted(history) == [0, 1, 2]
    for row in status:  # every numeric status value at its epoch, read back from W&B's run files
        for key, value in flatten({k: v for k, v in row.items() if k not in ("epoch", "status")}).items():
            assert history[row["epoch"]][key] == pytest.approx(value, rel=1e-5), key
    tables = sorted((folder / "logs" / "wandb").glob("offline-run-*/files/media/table/samples_*.table.json"))
    assert tables  # W&B's own table files: the samples with the columns genenv logs
    table = json.loads(tables[-1].read_text())
    assert table["columns"] == ["benchmark", "level", "origin", "prompt", "response", "reward"]
    assert table["data"] and all(row[0] == "bfcl" for row in table["data"])
    with pytest.raises(SystemExit):  # an unknown logger is refused by the parser, before any session exists
        main(["run", "--preset", "micro", "--session", str(tmp_path / "t"), "--log", "nope"])
    assert not (tmp_path / "t").exists()


def _trackio_rows(db):
    """(run_id, run_name, step, metrics) of every logged step, read from trackio's own SQLite database."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT run_id, run_name, step, metrics FROM metrics ORDER BY step").fetchall()
    return [(run_id, name, step, json.loads(metrics)) for run_id, name, step, metrics in rows]


def test_run_and_resume_log_the_status_numbers_to_trackio_locally(tmp_path, monkeypatch, capsys):
    trackio = pytest.importorskip("trackio")
    monkeypatch.setenv("TRACKIO_SPACE_ID", "someone/somewhere")  # ignored: the logger never leaves the session
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")  # would make trackio ask the Hub who the user is
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # as outside the tests
    looked_up = []
    real_getaddrinfo = socket.getaddrinfo
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda host, *a, **k: (looked_up.append(host), real_getaddrinfo(host, *a, **k))[1]
    )
    before = trackio.utils.TRACKIO_DIR
    folder = tmp_path / "s"
    assert (
        main(["run", "--preset", "micro", "--session", str(folder), "--epochs", "1", "--quiet", "--log", "trackio"])
        == 0
    )
    assert trackio.utils.TRACKIO_DIR == before  # trackio's storage folder is the session's only while logging
    with Store(folder / "genenv.db") as store:
        name = store.get_meta("trackio_run_name")
    assert name
    db = folder / "logs" / "trackio" / "s.db"  # project: the session folder's name
    ((run_id, *_),) = {(r[0], r[1]) for r in _trackio_rows(db)}
    assert main(["resume", str(folder), "--epochs", "2", "--quiet", "--log", "trackio"]) == 0
    capsys.readouterr()
    assert main(["status", str(folder), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)["epochs"]

    rows = _trackio_rows(db)
    assert {(r[0], r[1]) for r in rows} == {(run_id, name)}  # one run, resumed under the name the session kept
    assert [r[2] for r in rows] == [0, 1, 2] == [row["epoch"] for row in status]
    logged = {step: metrics for _, _, step, metrics in rows}
    for row in status:  # every numeric status value at its epoch
        expected = flatten({k: v for k, v in row.items() if k not in ("epoch", "status")})
        assert expected and {k: logged[row["epoch"]][k] for k in expected} == pytest.approx(expected, rel=1e-9)
    table = logged[2]["samples"]
    assert table["_type"] == "trackio.table" and table["_value"]
    assert list(table["_value"][0]) == ["benchmark", "level", "origin", "prompt", "response", "reward"]
    assert all(r["benchmark"] == "bfcl" for r in table["_value"])
    with Store(folder / "genenv.db") as store:
        assert store.get_meta("trackio_run_name") == name
        p_hats = [r[0] for r in store.db.execute("SELECT p_hat FROM batches WHERE epoch = 2 AND p_hat IS NOT NULL")]
    if p_hats:
        assert sum(logged[2]["p_hat"]["values"]) == len(p_hats)
    assert not [h for h in looked_up if h not in ("localhost", "127.0.0.1", "::1")]  # no network, not even DNS
    assert not (tmp_path / "cache" / "trackio").exists()


def test_trackio_logs_histograms_and_a_resumed_logger_continues_the_run(tmp_path):
    pytest.importorskip("trackio")
    meta = {}
    store = SimpleNamespace(get_meta=meta.get, set_meta=meta.__setitem__)
    session = SimpleNamespace(path=tmp_path / "h", store=store, config=SimpleNamespace(to_dict=lambda: {"seed": 3}))
    record = {
        "epoch": 1,
        "metrics": {"heldout": {"bfcl": 0.25}},
        "p_hat": [0.1, 0.5, 0.5, 0.9],
        "r_env": [0.2],
        "samples": [],
    }
    for epoch in (1, 2):  # the second logger is a resume: same session, same stored run name
        logger = TrackioLogger(session)
        logger.log({**record, "epoch": epoch})
        logger.close()
    rows = _trackio_rows(tmp_path / "h" / "logs" / "trackio" / "h.db")
    assert [r[2] for r in rows] == [1, 2] and len({(r[0], r[1]) for r in rows}) == 1
    assert rows[0][1] == meta["trackio_run_name"]
    hist = rows[1][3]["p_hat"]
    assert hist["_type"] == "trackio.histogram" and sum(hist["values"]) == 4
    assert hist["bins"][0] == pytest.approx(0.1) and hist["bins"][-1] == pytest.approx(0.9)
    assert rows[1][3]["heldout/bfcl"] == 0.25 and sum(rows[1][3]["r_env"]["values"]) == 1


def test_log_trackio_without_trackio_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "trackio", None)  # `import trackio` raises ImportError
    folder = tmp_path / "s"
    assert (
        main(["run", "--preset", "micro", "--session", str(folder), "--epochs", "1", "--quiet", "--log", "trackio"])
        == 2
    )
    assert "genenv: --log trackio needs trackio: pip install 'genenv-console[log]'" in capsys.readouterr().err
    assert not (folder / "logs" / "trackio").exists()
    with Store(folder / "genenv.db") as store:
        assert store.get_meta("trackio_run_name") is None and store.epoch_metrics() == []
