"""``genenv env check`` and ``genenv env new``: the countdown example passes every contract; an environment with
one contract broken fails with that contract's line (the cross-process determinism one included); the package
``env new`` writes installs, passes ``env check`` and its own tests, and runs a micro session as written; installed
into a fresh virtualenv with no package index it pulls in this project's distribution (``genenv-console``), not the
unrelated ``genenv`` of the package index."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
from pathlib import Path

import pytest

import genenv_engine
import genenv_engine.environments as environments
from genenv_engine.core.errors import ConfigError
from genenv_engine.interfaces.cli import main
from genenv_engine.interfaces.conformance import CONTRACTS, check_environment

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "countdown"

BROKEN = """
import random

from countdown_env import Countdown, solve
from genenv_engine.environments import CheckResult, Validation


class NeedsMore(Countdown):
    name = "needs_more"

    def __init__(self, seed, sizes, data_dir, extra):
        super().__init__(seed, sizes, data_dir)


BUILDS = []


class Drifting(Countdown):
    name = "drifting"

    def splits(self):
        BUILDS.append(1)
        splits = super().splits()
        random.Random(len(BUILDS)).shuffle(splits["train"])
        return splits


class HashSeeded(Countdown):
    name = "hash_seeded"

    def splits(self):
        splits = super().splits()
        random.Random(hash(self.name)).shuffle(splits["train"])
        return splits


class Overlapping(Countdown):
    name = "overlapping"

    def splits(self):
        splits = super().splits()
        splits["heldout"].append(splits["train"][0].with_(id="overlapping/heldout/99999", split="heldout"))
        return splits


class WrongGold(Countdown):
    name = "wrong_gold"

    def splits(self):
        return {k: [t.with_(answer=f"{t.answer} + 1") for t in v] for k, v in super().splits().items()}


class AcceptsAll(Countdown):
    name = "accepts_all"

    def check(self, task, response):
        return CheckResult(True, 1.0)


class ChecksBool(Countdown):
    name = "checks_bool"

    def check(self, task, response):
        return super().check(task, response).success


class RejectsAll(Countdown):
    name = "rejects_all"

    def validate(self, prompt, answer, *, task_id, parent=None, epoch=0, generator=None):
        if parent is None:
            return Validation(False, "nope")
        return super().validate(prompt, answer, task_id=task_id, parent=parent, epoch=epoch, generator=generator)


class EndlessSibling(Countdown):
    name = "endless_sibling"

    def sibling(self, source, rng, task_id):
        while True:
            pass


class TrustsAnswer(Countdown):
    name = "trusts_answer"

    def validate(self, prompt, answer, *, task_id, parent=None, epoch=0, generator=None):
        verdict = super().validate(prompt, answer, task_id=task_id, parent=parent, epoch=epoch, generator=generator)
        return Validation(True, "", verdict.repair) if verdict.repair is not None else verdict


class CopiesSource(Countdown):
    name = "copies_source"

    def sibling(self, source, rng, task_id):
        return source.with_(id=task_id, parent_id=source.id)


class NarrowGrammar(Countdown):
    name = "narrow_grammar"

    def task_grammar(self):
        return 'prompt: "numbers: 1 2 | target: 3"\\nanswer: "1 + 2"'


class LongPrefix(Countdown):
    name = "long_prefix"

    def warm_start_prefixes(self):
        task = self.unseen_tasks(1)[0]
        return [(task, task.answer)]
"""

CASES = {
    "NeedsMore": ("construct", "TypeError"),
    "Drifting": ("splits_deterministic", "two builds with seed 0 give different splits"),
    "Overlapping": (
        "splits_disjoint",
        "task overlapping/train/00000 has the prompt or id of overlapping/heldout/99999",
    ),
    "WrongGold": ("gold_passes", "92 of 92 golds fail the checker (wrong_gold/seed/00000: number_not_given)"),
    "AcceptsAll": ("corrupted_fails", "tasks accept both an empty answer and another task's gold"),
    "ChecksBool": ("gold_passes", "check returned bool, not CheckResult (task checks_bool/seed/00000)"),
    "RejectsAll": ("validate_recomputes", "validate rejects the simulator text of rejects_all/seed/00000 (nope)"),
    "TrustsAnswer": ("validate_rejects", "validate accepts the wrong answer"),
    "CopiesSource": ("siblings", "copies its source"),
    "NarrowGrammar": ("grammar", "the task grammar refuses 92 of 92 tasks"),
    "LongPrefix": ("warm_start", "is not a proper prefix of its answer"),
}


@pytest.fixture
def broken(tmp_path, monkeypatch):
    """The countdown example and a module of broken variants of it importable; a fresh record of found names."""
    monkeypatch.setattr(environments, "_FOUND", {})
    (tmp_path / "broken_envs.py").write_text(BROKEN)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for module in ("broken_envs", "countdown_env"):
        sys.modules.pop(module, None)


def test_the_countdown_example_passes_every_contract(broken):
    report = check_environment("countdown_env:Countdown")
    assert report.failures == [] and report.name == "countdown"
    assert report.checked == [c for c in CONTRACTS if c not in ("construct", "grammar", "warm_start")]
    assert report.skipped == {"grammar": "no task grammar", "warm_start": "no warm-start prefixes"}
    assert set(report.seconds) == {"check", "validate"} and 0 < report.seconds["check"] < 0.1


@pytest.mark.parametrize("cls", list(CASES))
def test_a_broken_contract_is_its_line(broken, cls):
    contract, words = CASES[cls]
    report = check_environment(f"broken_envs:{cls}", cross_process=False)
    lines = [failure.line for failure in report.failures]
    assert any(line.startswith(f"{contract}: ") and words in line for line in lines), lines


def test_a_contract_that_does_not_finish_in_time_fails(broken):
    report = check_environment("broken_envs:EndlessSibling", cross_process=False, limit=1)
    loop = BROKEN.splitlines().index("        while True:") + 1  # the line the time ran out on
    assert [failure.line for failure in report.failures] == [
        f"siblings: did not finish in 1 s: in sibling at broken_envs.py:{loop}"
    ]
    assert "warm_start" in report.skipped  # the contracts after it still ran


def test_splits_that_depend_on_the_hash_seed_fail_across_processes(broken):
    report = check_environment("broken_envs:HashSeeded")
    assert [failure.contract for failure in report.failures] == ["splits_cross_process"]
    assert "a process with another PYTHONHASHSEED gives different splits for seed 0" in report.failures[0].line


def test_env_check_prints_one_line_per_failed_contract_and_exits_1(broken, capsys):
    assert main(["env", "check", "broken_envs:CopiesSource", "--sizes", "12,40,20", "--samples", "30"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if line.startswith("FAIL")] == [
        "FAIL siblings: sibling copies_source/sib/00000 copies its source copies_source/seed/00006 or does not name it "
        "as parent"
    ]
    assert out[-1].startswith("copies_source: 1 of 8 contracts broken; check ") and "ms/call" in out[-1]
    assert main(["env", "check", "nope_module:Nope"]) == 2
    assert "is not importable here" in capsys.readouterr().err


def test_env_new_refuses_a_bad_name_or_an_existing_folder(tmp_path, capsys):
    for name, words in (("Bad-Name", "is not a benchmark name"), ("bfcl", "a built-in benchmark's name")):
        assert main(["env", "new", name, "--out", str(tmp_path / "x")]) == 2
        assert words in capsys.readouterr().err
    assert main(["env", "new", "fine", "--out", str(tmp_path)]) == 2
    assert "exists" in capsys.readouterr().err
    with pytest.raises(ConfigError):
        from genenv_engine.interfaces.scaffold import names_of

        names_of("9lives")


def test_env_new_writes_a_package_that_installs_checks_tests_and_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(environments, "_FOUND", {})
    package = tmp_path / "pkg"
    assert main(["env", "new", "word_sums", "--out", str(package)]) == 0
    assert sorted(p.relative_to(package).as_posix() for p in package.rglob("*") if p.is_file()) == [
        "pyproject.toml",
        "tests/test_word_sums_env.py",
        "word_sums_env.py",
    ]
    assert 'word_sums = "word_sums_env:WordSums"' in (package / "pyproject.toml").read_text()
    site = tmp_path / "site"
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
            str(site),
            str(package),
        ],
        check=True,
        env={**os.environ, "PIP_NO_INDEX": "1"},
    )
    monkeypatch.syspath_prepend(str(site))
    try:
        capsys.readouterr()
        assert main(["env", "check", "word_sums"]) == 0  # found by its entry point
        out = capsys.readouterr().out
        assert "FAIL" not in out and "word_sums: 0 of 8 contracts broken" in out
        tests = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
            cwd=package,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
        assert tests.returncode == 0 and "2 passed" in tests.stdout, tests.stdout + tests.stderr
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
                    "word_sums",
                ]
            )
            == 0
        )
        assert "done: 1 epochs" in capsys.readouterr().out
    finally:
        sys.modules.pop("word_sums_env", None)


def test_the_generated_module_reads_as_its_docstring_says(tmp_path):
    from genenv_engine.interfaces.scaffold import write_package

    folder = write_package("adder", tmp_path / "adder")
    text = textwrap.dedent((folder / "adder_env.py").read_text())
    assert 'name = "adder"' in text and "class Adder(LadderEnvironment)" in text
    assert 'PROMPT = re.compile(rf"add: ({NUMBER}(?: {NUMBER}){{1,4}})")' in text


def test_the_scaffold_and_the_example_depend_on_this_distribution(tmp_path):
    assert main(["env", "new", "word_sums", "--out", str(tmp_path / "pkg")]) == 0
    for pyproject in (tmp_path / "pkg" / "pyproject.toml", EXAMPLE / "pyproject.toml"):
        assert tomllib.loads(pyproject.read_text())["project"]["dependencies"] == [genenv_engine.DISTRIBUTION]
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == genenv_engine.DISTRIBUTION
    assert genenv_engine.DISTRIBUTION != "genenv"  # the unrelated project on the package index


def _offline_pip_env() -> dict[str, str]:
    """This environment for a pip that reads no configuration file and no PIP_* setting (no index, no find-links
    but the ones given), and imports nothing from PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return env | {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _third_party(folder: Path) -> Path:
    """``folder`` holding links to everything this interpreter's site-packages holds except this project (its
    modules, its dist-info and its editable-install hooks): the third-party dependencies a fresh venv borrows."""
    folder.mkdir()
    ours = {"genenv_engine", "genenv_console", "genenv"}
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for entry in Path(site).iterdir():
            metadata = entry.suffix in (".dist-info", ".egg-info")
            dist = entry.name.split("-")[0].lower().replace(".", "_") if metadata else ""
            if (
                entry.name in ours
                or dist in ours
                or entry.name.startswith("__editable__")
                or entry.suffix == ".pth"
                or entry.suffix == ".egg-link"
                or (folder / entry.name).exists()
            ):
                continue
            (folder / entry.name).symlink_to(entry)
    return folder


def test_the_scaffold_installs_this_distribution_into_a_fresh_venv_with_no_index(tmp_path):
    env = _offline_pip_env()
    # a wheel of this project, built from a copy of its sources (an in-tree build would write build/ and egg-info)
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for package in ("genenv_engine", "genenv_console"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(source),
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    assert [w.name.split("-")[0] for w in wheels.glob("*.whl")] == [genenv_engine.DISTRIBUTION.replace("-", "_")]
    package = tmp_path / "pkg"
    assert main(["env", "new", "word_sums", "--out", str(package)]) == 0
    # a fresh venv that borrows the third-party packages (and pip, setuptools) but holds no genenv of any kind
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "_third_party.pth").write_text(f"{_third_party(tmp_path / 'third_party')}\n")
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--no-index",
            "--find-links",
            str(wheels),
            "--no-build-isolation",
            str(package),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    probe = (
        "import importlib.metadata as md, json\n"
        "def version(name):\n"
        "    try:\n"
        "        return md.version(name)\n"
        "    except md.PackageNotFoundError:\n"
        "        return None\n"
        f"ours = md.distribution({genenv_engine.DISTRIBUTION!r})\n"
        "print(json.dumps({'name': ours.metadata['Name'], 'version': ours.version,"
        " 'at': str(ours.locate_file('')), 'genenv': version('genenv'),"
        " 'plugin': md.distribution('word-sums-env').requires}))"
    )
    found = json.loads(
        subprocess.run(
            [str(python), "-c", probe], check=True, env=env, capture_output=True, text=True, cwd=tmp_path
        ).stdout
    )
    assert found == {
        "name": genenv_engine.DISTRIBUTION,
        "version": genenv_engine.__version__,
        "at": str(site),
        "genenv": None,
        "plugin": [genenv_engine.DISTRIBUTION],
    }
    listed = subprocess.run(
        [str(python), "-m", "pip", "list"], check=True, env=env, capture_output=True, text=True
    ).stdout.splitlines()
    assert [line.split() for line in listed if line.split()[:1] == ["genenv"]] == []  # no genenv 1.0.2, nor any
    assert [genenv_engine.DISTRIBUTION, genenv_engine.__version__] in [line.split()[:2] for line in listed]
    # the venv's `genenv` command is ours: its help lists our subcommands, and --version names the distribution
    help_text = subprocess.run(
        [str(venv / "bin" / "genenv"), "--help"], check=True, env=env, capture_output=True, text=True, cwd=tmp_path
    ).stdout
    assert "usage: genenv" in help_text and all(sub in help_text for sub in ("run", "resume", "env", "bench"))
    version = subprocess.run(
        [str(venv / "bin" / "genenv"), "--version"], check=True, env=env, capture_output=True, text=True, cwd=tmp_path
    ).stdout
    assert version.startswith(f"{genenv_engine.DISTRIBUTION} {genenv_engine.__version__} (genenv_engine in {site}")
