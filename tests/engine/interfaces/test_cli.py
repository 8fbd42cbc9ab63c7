"""The headless command line, driven in-process: run, status --json, resume, and clear config errors."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

import genenv_engine
from genenv_engine.interfaces.cli import main


def test_run_status_resume_roundtrip(tmp_path, capsys):
    session = tmp_path / "s"
    assert (
        main(
            [
                "run",
                "--preset",
                "micro",
                "--session",
                str(session),
                "--epochs",
                "1",
                "--seed",
                "3",
                "--set",
                "curriculum.beta=4.0",
                "--quiet",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "epoch 1:" in out and f"done: 1 epochs in {session}" in out
    assert main(["status", str(session), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["preset"] == "micro" and data["target_epochs"] == 1
    assert [(e["epoch"], e["status"]) for e in data["epochs"]] == [(0, "done"), (1, "done")]
    assert set(data["epochs"][1]["phase_seconds"]) == {
        "generate",
        "validate",
        "rollout",
        "agent_update",
        "simulator_update",
        "heldout_eval",
        "checkpoint",
    }
    text = (session / "config.toml").read_text()
    assert "beta = 4.0" in text and "seed = 3" in text
    assert main(["resume", str(session), "--epochs", "2", "--quiet"]) == 0
    capsys.readouterr()
    main(["status", str(session), "--json"])
    assert [e["epoch"] for e in json.loads(capsys.readouterr().out)["epochs"]] == [0, 1, 2]


def test_version_names_the_distribution_and_python_m_runs_this_command_line(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    version = importlib.metadata.version(genenv_engine.DISTRIBUTION)  # installed under its name, not "genenv"
    assert capsys.readouterr().out == (
        f"genenv-console {version} (genenv_engine in {Path(genenv_engine.__file__).parent})\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "genenv_engine", "--help"], check=True, capture_output=True, text=True
    ).stdout  # whatever `genenv` comes first on PATH
    assert out.startswith("usage: genenv [-h] [--version]") and "{run,resume,status," in out


def test_bad_config_values_stop_with_one_message_naming_the_field(tmp_path, capsys):
    assert main(["run", "--preset", "micro", "--session", str(tmp_path / "a"), "--set", "curriculum.alpha=1.5"]) == 2
    err = capsys.readouterr().err
    assert "curriculum.alpha" in err and "(0, 1)" in err
    assert not (tmp_path / "a").exists()  # nothing created for a rejected config
    assert main(["run", "--preset", "micro", "--session", str(tmp_path / "b"), "--benchmarks", "nope"]) == 2
    assert "unknown benchmark 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[agent]\nrollout = 3\n")
    assert main(["run", "--config", str(bad), "--session", str(tmp_path / "c")]) == 2
    assert "agent.rollout" in capsys.readouterr().err


def test_existing_session_is_not_overwritten_and_missing_one_is_reported(tmp_path, capsys):
    session = tmp_path / "s"
    assert main(["run", "--preset", "micro", "--session", str(session), "--epochs", "0", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["run", "--preset", "micro", "--session", str(session), "--quiet"]) == 2
    assert "already holds a session" in capsys.readouterr().err
    assert main(["resume", str(tmp_path / "nothing")]) == 2
    assert "not a genenv session" in capsys.readouterr().err


def test_benchmarks_lists_every_environment_with_granularity_source_and_sizes(capsys):
    from genenv_engine.environments import BENCHMARKS, PAPER_BENCHMARKS

    assert main(["benchmarks", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert list(rows) == list(BENCHMARKS) and set(PAPER_BENCHMARKS) < set(rows)
    for name in PAPER_BENCHMARKS:
        assert rows[name]["granularity"] == "step" and rows[name]["source"] == "built-in mini"
        assert rows[name]["sizes"] == {"heldout": 400, "train": 2000, "seed": 200}
    assert rows["bfcl_official"]["source"] in ("package", "upstream folder") or rows["bfcl_official"][
        "source"
    ].startswith("unavailable")
    assert main(["benchmarks", "--data-dir", "nope=/x"]) == 2
    assert "data_dirs.nope" in capsys.readouterr().err


def test_all_benchmarks_run_together_and_report_heldout_each(tmp_path, capsys):
    from genenv_engine.environments import PAPER_BENCHMARKS

    session = tmp_path / "all"
    assert (
        main(["run", "--preset", "micro", "--session", str(session), "--epochs", "1", "--benchmarks", "all", "--quiet"])
        == 0
    )
    capsys.readouterr()
    main(["status", str(session), "--json"])
    epochs = json.loads(capsys.readouterr().out)["epochs"]
    assert all(set(e["heldout"]) == set(PAPER_BENCHMARKS) for e in epochs)


def test_warm_start_progress_shows_loss_rate_and_eta():
    import io

    from rich.console import Console

    from genenv_engine.core.events import WarmStartProgressed
    from genenv_engine.storage.progress import ConsoleReporter

    quiet = ConsoleReporter(None, quiet=True)
    quiet.console = Console(file=io.StringIO(), width=200)
    for step in range(1, 101):
        quiet(WarmStartProgressed(0, "agent", step, 100, 2.0 - step / 100, step / 4))
    lines = quiet.console.file.getvalue().splitlines()
    assert len(lines) == 10  # one line per tenth of the role's steps
    assert lines[0] == "warm start agent 10/100: loss 1.900  4.0 steps/s, ETA 22s"
    assert lines[-1].startswith("warm start agent 100/100: loss 1.000")
    from genenv_engine.core.events import WarmStartSample

    quiet(WarmStartSample(0, "agent", 100, 100, "add 2 and 3", "[add(a=2, b=3)]\x1b[2J", True, "gold: x"))
    assert quiet.console.file.getvalue().splitlines()[-1] == (
        "warm start agent 100/100 solved: 'add 2 and 3' -> '[add(a=2, b=3)]\\x1b[2J'"
    )  # escape shown, not sent

    bars = ConsoleReporter(None)
    with bars:
        bars(WarmStartProgressed(0, "simulator", 30, 500, 0.75, 6.0))
        task = bars.progress.tasks[0]
        assert (task.description, task.completed, task.total) == ("warm start simulator", 30, 500)
        assert task.fields["info"] == "loss 0.750  5.0 steps/s"


def test_run_ray_option_sets_the_config():
    """``genenv run --ray ADDRESS`` is the config's ``ray.address`` (the executor); absent, the run stays in-process."""
    from genenv_engine.interfaces.cli import _overrides, build_parser

    assert (
        _overrides(build_parser().parse_args(["run", "--preset", "micro", "--ray", "local"]))["ray.address"] == "local"
    )
    assert "ray.address" not in _overrides(build_parser().parse_args(["run", "--preset", "micro"]))
