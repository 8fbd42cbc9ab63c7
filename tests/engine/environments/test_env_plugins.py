"""Environments from outside genenv: the public API, the four spellings of a benchmark (rg:, module:Class,
built-in, entry point), what a config records of them, the countdown example the guide shows, and a micro run on
it whose session reads, and refuses to resume, where the plugin is not importable."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import genenv_engine.environments as environments
from genenv_engine.config import RunConfig, config_from_file, load_config, saved_config
from genenv_engine.core.errors import ConfigError
from genenv_engine.environments import Source, resolve_benchmarks

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "countdown"
GUIDE = ROOT / "docs" / "guide" / "environments.md"


@pytest.fixture
def plugin(monkeypatch):
    """The countdown example importable, and a fresh record of found benchmarks (restored after the test)."""
    monkeypatch.setattr(environments, "_FOUND", {})
    monkeypatch.syspath_prepend(str(EXAMPLE))
    import countdown_env

    yield countdown_env
    sys.modules.pop("countdown_env", None)


def _absent(monkeypatch):
    """The countdown module no longer importable in this process, and nothing found yet."""
    monkeypatch.setattr(environments, "_FOUND", {})
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p) != EXAMPLE])
    sys.modules.pop("countdown_env", None)


def _dist(tmp_path: Path, name: str = "countdown", value: str = "countdown_env:Countdown") -> Path:
    """A folder holding an installed distribution's metadata with one ``genenv.environments`` entry point."""
    info = tmp_path / "countdown_env_pkg-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: countdown-env-pkg\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[genenv.environments]\n{name} = {value}\n")
    return tmp_path


def test_the_api_is_importable_from_the_package():
    from genenv_engine import environments as api
    from genenv_engine.core.records import CheckResult, Task, Validation
    from genenv_engine.environments import base

    assert (api.Environment, api.LadderEnvironment) == (base.Environment, base.LadderEnvironment)
    assert (api.Task, api.CheckResult, api.Validation) == (Task, CheckResult, Validation)
    assert api.API_VERSION == 1 and set(api.__all__) >= {
        "Environment",
        "LadderEnvironment",
        "Task",
        "CheckResult",
        "Validation",
        "API_VERSION",
    }
    assert {"draft", "sibling"} <= api.LadderEnvironment.__abstractmethods__


def test_every_builtin_writes_the_public_hooks():
    for name in environments.BENCHMARKS:
        cls = environments.environment_class(name)
        assert re.fullmatch(environments.NAME_PATTERN, cls.name) and cls.name == name
        if issubclass(cls, environments.LadderEnvironment):
            assert not hasattr(cls, "_draft") and not hasattr(cls, "_sibling")


def test_builtin_names_resolve_to_themselves_and_record_nothing():
    assert resolve_benchmarks(["bfcl", "chain"], {}) == (("bfcl", "chain"), {})
    assert resolve_benchmarks(["genenv_engine.environments.bfcl:BfclMini"], {}) == (("bfcl",), {})
    assert RunConfig().environments == {}


def test_a_module_class_spelling_becomes_the_class_name_and_is_recorded(plugin):
    config = load_config(
        "micro", overrides={"benchmarks": ["countdown_env:Countdown"], "curriculum.alpha_by_benchmark.countdown": 0.4}
    )
    assert config.benchmarks == ("countdown",)
    assert config.environments == {"countdown": "module countdown_env:Countdown"}
    assert config.curriculum.alpha_for("countdown") == 0.4
    assert environments.get_environment("countdown", 0).name == "countdown"


@pytest.mark.parametrize(
    "spelling, line",
    [
        ("rg:acre", "rg:acre: the reasoning-gym dataset has no curriculum"),
        ("rg.envs:Countdown", "a module named 'rg' is refused"),
        ("no_such_module:Env", "no_such_module:Env is not importable here (No module named 'no_such_module')"),
        ("genenv_engine.core.records:Task", "is not a genenv_engine.environments.Environment subclass"),
        ("genenv_engine.environments:LadderEnvironment", "does not write check, draft, sibling, validate"),
        ("nope", "unknown benchmark 'nope'; known: bfcl,"),
    ],
)
def test_a_bad_spelling_is_one_config_error_line(spelling, line):
    with pytest.raises(ConfigError) as err:
        resolve_benchmarks([spelling], {})
    assert line in str(err.value) and "\n" not in str(err.value) and err.value.field == "benchmarks"


def test_a_class_must_have_a_usable_name_and_api(plugin, monkeypatch):
    class Clash(plugin.Countdown):
        name = "bfcl"

    class Dotted(plugin.Countdown):
        name = "count.down"

    class Later(plugin.Countdown):
        api_version = environments.API_VERSION + 1

    for cls, words in (
        (Clash, "a built-in benchmark's name"),
        (Dotted, "lowercase letters"),
        (Later, f"needs environment API {environments.API_VERSION + 1}"),
    ):
        monkeypatch.setattr(plugin, cls.__name__, cls, raising=False)
        with pytest.raises(ConfigError, match=re.escape(words)):
            resolve_benchmarks([f"countdown_env:{cls.__name__}"], {})


def test_an_entry_point_is_found_by_name_with_its_package(plugin, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_dist(tmp_path)))
    names, found = resolve_benchmarks(["countdown"], {})
    assert names == ("countdown",)
    assert found == {"countdown": "entry point countdown_env:Countdown from countdown-env-pkg 0.1.0"}
    assert Source.parse(found["countdown"]) == Source(
        "entry point", "countdown_env:Countdown", "countdown-env-pkg", "0.1.0"
    )


def test_genenv_benchmarks_lists_an_installed_entry_point(plugin, tmp_path, monkeypatch, capsys):
    from genenv_engine.interfaces.cli import main

    monkeypatch.syspath_prepend(str(_dist(tmp_path)))
    monkeypatch.setattr(environments, "BENCHMARKS", {})  # the built-ins alone take seconds to build
    assert main(["benchmarks", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {
            "name": "countdown",
            "granularity": "step",
            "source": "countdown example",
            "sizes": {"heldout": 400, "train": 2000, "seed": 200},
        }
    ]


def test_the_example_installs_as_a_package_its_entry_point_names(tmp_path, monkeypatch):
    source = tmp_path / "countdown"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-build-isolation",
            "--no-deps",
            "--target",
            str(tmp_path / "site"),
            str(source),
        ],
        check=True,
        env={**os.environ, "PIP_NO_INDEX": "1"},
    )
    _absent(monkeypatch)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    try:
        assert resolve_benchmarks(["countdown"], {}) == (
            ("countdown",),
            {"countdown": "entry point countdown_env:Countdown from countdown-env 0.1.0"},
        )
        assert environments.environment_class("countdown").__module__ == "countdown_env"
    finally:
        sys.modules.pop("countdown_env", None)


def test_an_entry_point_named_otherwise_than_its_class_is_refused(plugin, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_dist(tmp_path, name="numbers")))
    with pytest.raises(ConfigError, match="loads a class named 'countdown', not 'numbers'"):
        resolve_benchmarks(["numbers"], {})


def test_a_recorded_source_reads_without_the_plugin_and_loading_it_names_what_is_missing(monkeypatch):
    _absent(monkeypatch)
    recorded = {"countdown": "entry point countdown_env:Countdown from countdown-env-pkg 0.1.0"}
    config = RunConfig(benchmarks=("countdown",), environments=recorded, data_dirs={"countdown": "/nowhere"})
    assert config.benchmarks == ("countdown",) and config.environments == recorded
    with pytest.raises(ConfigError) as err:
        environments.require(config.benchmarks)
    assert str(err.value) == (
        "config error in 'benchmarks': benchmark 'countdown' comes from entry point countdown_env:Countdown of group "
        "genenv.environments (package countdown-env-pkg 0.1.0), which is not importable here (No module named "
        "'countdown_env'); install countdown-env-pkg"
    )
    with pytest.raises(ConfigError, match="environments.countdown"):
        RunConfig(benchmarks=("countdown",), environments={"countdown": "somewhere"})


def test_a_worker_process_finds_a_module_class_benchmark_by_the_recorded_source(plugin):
    from genenv_engine.executors.worker import worker_environments

    with pytest.raises(ConfigError, match="unknown benchmark 'countdown'"):  # what the config did not record
        worker_environments(["countdown"], 0, {}, {})
    envs = worker_environments(["bfcl", "countdown"], 0, {}, {"countdown": "module countdown_env:Countdown"})
    assert (envs["bfcl"].name, envs["countdown"].name) == ("bfcl", "countdown")


def test_the_guide_shows_the_example_as_it_is():
    guide = GUIDE.read_text()
    code = re.search(r"```python\n(.*?)```", guide, re.S)
    assert code is not None and code.group(1) == (EXAMPLE / "countdown_env.py").read_text()
    assert "countdown_env:Countdown" in guide and "data_version" in guide and "[environments]" in guide


def test_the_example_doctests_pass(plugin):
    import doctest

    assert doctest.testmod(plugin).failed == 0


def test_countdown_keeps_the_contract(plugin, monkeypatch):
    from genenv_engine.environments import base

    env = plugin.Countdown(seed=3)
    splits = env.splits()
    monkeypatch.setattr(base, "_GENERATED_SPLITS", {})  # made again, not read from this process's memo
    assert [t.prompt for t in plugin.Countdown(seed=3).splits()["train"]] == [t.prompt for t in splits["train"]]
    assert [t.prompt for t in plugin.Countdown(seed=4).splits()["train"]] != [t.prompt for t in splits["train"]]
    prompts = [t.prompt for tasks in splits.values() for t in tasks]
    assert len(prompts) == len(set(prompts)) == 2600
    assert {t.level for t in splits["heldout"]} == {1, 2, 3, 4} and {t.level for t in splits["seed"]} == {2, 3, 4}
    for task in splits["train"][:400] + splits["heldout"][:100]:
        assert env.check(task, task.answer).success, task
        assert len(task.expected["numbers"]) == task.level + 1 and task.id.startswith("countdown/")
    task = splits["seed"][0]
    for bad, kind in (
        ("__import__('os').system('true')", "not_allowed"),
        ("1/0", "division_by_zero"),
        ("99 * 99 * 99", "number_not_given"),
        ("1 +", "unparsable"),
        ("1" * 81, "too_long"),
    ):
        assert env.check(task, bad).error_type == kind
    rng = random.Random(0)
    for source, sibling in env.sibling_pairs(splits["seed"], rng, 20):
        assert sibling.parent_id == source.id and env.check(sibling, sibling.answer).success


def test_countdown_validate_recomputes_the_gold_from_the_prompt(plugin):
    env = plugin.Countdown()
    ok = env.validate("numbers: 3 5 8 | target: 64", "8 * (3 + 5)", task_id="gen/1", epoch=2, generator="sim@e1")
    assert ok.ok and ok.task.answer == plugin.solve([3, 5, 8], 64) and ok.task.split == "generated"
    assert (ok.task.epoch, ok.task.generator, ok.task.level) == (2, "sim@e1", 2)
    wrong = env.validate("numbers: 3 5 8 | target: 64", "3 + 5 + 8", task_id="gen/2")
    assert not wrong.ok and wrong.reason == "answer_mismatch: wrong_value" and wrong.repair.expected["target"] == 64
    assert env.validate("numbers: 2 2 | target: 7", "2 + 2", task_id="gen/3").reason == "unreachable"
    assert env.validate("numbers: 2 | target: 2", "2", task_id="gen/4").reason == "bad_prompt"


def test_a_micro_run_on_a_module_class_then_read_and_refused_without_it(plugin, tmp_path, monkeypatch, capsys):
    from genenv_engine.interfaces.cli import main
    from genenv_engine.storage.session import Session

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
                "--quiet",
                "--benchmarks",
                "countdown_env:Countdown",
            ]
        )
        == 0
    )
    capsys.readouterr()
    opened = Session.open(session)
    tasks = [opened.store.get_task(i) for i in sorted(opened.store.task_ids())]
    env = plugin.Countdown(seed=0)
    made = [t for t in tasks if t.split in ("seed", "train", "heldout")]
    assert len(made) == 2600 and all(t.benchmark == "countdown" and t.valid for t in tasks if t.origin == "seed")
    assert all(t.id.startswith("countdown/") and env.check(t, t.answer).success for t in made)
    assert any(t.split == "generated" for t in tasks)  # the simulator's drafts, each validated by the plugin
    assert len(opened.store.heldout_answers(1)) == 24
    opened.store.close()

    _absent(monkeypatch)
    with pytest.raises(ImportError):
        __import__("countdown_env")
    assert config_from_file(session / "config.toml").environments == {"countdown": "module countdown_env:Countdown"}
    assert saved_config(session / "config.toml")[0].benchmarks == ("countdown",)
    assert main(["status", str(session), "--json"]) == 0
    assert [e["epoch"] for e in json.loads(capsys.readouterr().out)["epochs"]] == [0, 1]
    assert main(["tasks", "export", str(session), "--out", str(tmp_path / "tasks.jsonl")]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["report", str(session), "--format", "md", "--out", str(tmp_path / "report")]) == 0
    assert "countdown" in next((tmp_path / "report").rglob("*.md")).read_text()
    from genenv_console.compare import read_runs
    from genenv_console.data import session_info

    assert session_info(session).benchmarks == "countdown"  # the console's session list and reopen
    assert [run.path for run in read_runs([session])] == [session]  # its compare
    assert main(["resume", str(session), "--epochs", "2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "benchmark 'countdown' comes from module countdown_env:Countdown" in err
    assert "No module named 'countdown_env'" in err
