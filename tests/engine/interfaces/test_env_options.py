"""Constructor options of plugin environments (``environments_options``): they reach the class, are recorded in the
session's config so ``resume`` rebuilds the same environment, join the warm-start cache key, and an option the
class does not accept, or any option on a built-in, fails with one line."""

from __future__ import annotations

import pytest

import genenv_engine.environments as environments
from genenv_engine.config import load_config
from genenv_engine.core.errors import ConfigError
from genenv_engine.storage.session import config_from_file

CAPPED = '''
from countdown_env import Countdown

BUILT = []


class Capped(Countdown):
    """Countdown whose drafted targets stay below ``max_target``."""

    name = "capped"

    def __init__(self, seed=0, sizes=None, data_dir=None, *, max_target=1000):
        super().__init__(seed, sizes, data_dir)
        self.max_target = max_target
        BUILT.append(max_target)

    def draft(self, level, rng):
        while True:
            prompt, build = super().draft(level, rng)
            if int(prompt.rsplit(" ", 1)[1]) < self.max_target:
                return prompt, build
'''


@pytest.fixture
def capped(plugin_module):
    capped_envs = plugin_module("capped_envs", CAPPED)
    capped_envs.BUILT.clear()
    return capped_envs


def test_options_reach_the_instance_and_change_its_tasks(capped):
    environments.resolve_benchmarks(["capped_envs:Capped"], {})
    env = environments.get_environment("capped", 0, options={"max_target": 50})
    assert env.max_target == 50 and capped.BUILT == [50]
    targets = [t.expected["target"] for t in env.splits()["train"]]
    assert targets and max(targets) < 50
    plain = environments.get_environment("capped", 0)
    assert plain.max_target == 1000 and max(t.expected["target"] for t in plain.splits()["train"]) >= 50


def test_an_unknown_option_is_one_line_naming_benchmark_option_and_accepted(capped):
    environments.resolve_benchmarks(["capped_envs:Capped"], {})
    with pytest.raises(ConfigError) as err:
        environments.get_environment("capped", 0, options={"max_coef": 9})
    assert str(err.value) == (
        "config error in 'environments_options.capped.max_coef': benchmark 'capped' "
        "(capped_envs.Capped) takes no option 'max_coef'; it accepts: max_target"
    )
    with pytest.raises(ConfigError, match="'seed' is set by genenv"):
        environments.get_environment("capped", 0, options={"seed": 3})


def test_options_join_the_warm_start_cache_key(capped):
    from genenv_engine.training.warmstart.cache import cache_key

    plain = load_config("micro", overrides={"benchmarks": ["capped_envs:Capped"]})
    with_options = load_config(
        "micro", overrides={"benchmarks": ["capped_envs:Capped"], "environments_options.capped.max_target": 100}
    )
    assert with_options.environments_options == {"capped": {"max_target": 100}}
    assert cache_key(plain) != cache_key(with_options)
    assert cache_key(load_config("micro")) == cache_key(load_config("micro", overrides={"environments_options": {}}))


def test_options_on_a_builtin_or_a_benchmark_not_run_are_refused():
    with pytest.raises(ConfigError) as err:
        load_config("micro", overrides={"benchmarks": ["bfcl"], "environments_options.bfcl.level": 2})
    assert str(err.value) == (
        "config error in 'environments_options.bfcl': 'bfcl' is a built-in benchmark, which "
        "takes no options; options are for plugin environments"
    )
    with pytest.raises(ConfigError, match="unknown benchmark 'lineq'; options go to a plugin benchmark the run"):
        load_config("micro", overrides={"environments_options.lineq.max_coef": 9})
    with pytest.raises(ConfigError, match="must be a table of tables"):
        load_config("micro", overrides={"environments_options.lineq": 9})


def test_a_run_records_its_options_and_resume_rebuilds_with_them(capped, tmp_path, capsys):
    from genenv_engine.interfaces.cli import main

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
                "capped_envs:Capped",
                "--set",
                "environments_options.capped.max_target=100",
            ]
        )
        == 0
    )
    assert "max_target = 100" in (session / "config.toml").read_text()
    config = config_from_file(session / "config.toml")
    assert config.environments_options == {"capped": {"max_target": 100}}
    assert capped.BUILT and set(capped.BUILT) == {100}
    capsys.readouterr()

    capped.BUILT.clear()
    assert main(["resume", str(session), "--epochs", "2", "--quiet"]) == 0
    assert "done: 2 epochs" in capsys.readouterr().out
    assert capped.BUILT and set(capped.BUILT) == {100}  # the resumed run built the environment with its option
    built = environments.environments_of(config_from_file(session / "config.toml"))["capped"]
    assert built.max_target == 100

    from genenv_engine.reports.data import load_session

    capped.BUILT.clear()
    load_session(session)  # the report's task reader builds the environment as the session did
    assert capped.BUILT and set(capped.BUILT) == {100}


def test_a_run_with_an_unknown_option_exits_2_with_one_line(capped, tmp_path, capsys):
    from genenv_engine.interfaces.cli import main

    code = main(
        [
            "run",
            "--preset",
            "micro",
            "--session",
            str(tmp_path / "s"),
            "--epochs",
            "1",
            "--quiet",
            "--benchmarks",
            "capped_envs:Capped",
            "--set",
            "environments_options.capped.max_coef=9",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0] == (
        "genenv: config error in 'environments_options.capped.max_coef': benchmark 'capped' "
        "(capped_envs.Capped) takes no option 'max_coef'; it accepts: max_target"
    )
    assert not (tmp_path / "s" / "config.toml").exists()


def test_options_on_a_builtin_in_a_run_exit_2_with_one_line(tmp_path, capsys):
    from genenv_engine.interfaces.cli import main

    code = main(
        [
            "run",
            "--preset",
            "micro",
            "--session",
            str(tmp_path / "s"),
            "--epochs",
            "1",
            "--quiet",
            "--benchmarks",
            "bfcl",
            "--set",
            "environments_options.bfcl.level=2",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [
        "genenv: config error in 'environments_options.bfcl': 'bfcl' is a built-in "
        "benchmark, which takes no options; options are for plugin environments"
    ]
