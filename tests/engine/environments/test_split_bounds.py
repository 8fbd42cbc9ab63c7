"""A ladder family whose level runs out of new prompts stops with one line instead of redrawing forever: from
``splits()``, ``genenv run``, ``genenv benchmarks`` and ``genenv env check --sizes run``; a subclass that bounds its
draws itself still leaves tasks out; a family with enough prompts gets the same splits as before the bound; a
contract out of time says which split and level it was building."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import genenv_engine.environments as environments
from genenv_engine.core.errors import ConfigError, SplitsExhausted
from genenv_engine.environments import SplitSizes, get_environment, resolve_benchmarks
from genenv_engine.interfaces.cli import main
from genenv_engine.interfaces.conformance import CHECK_SIZES, check_environment, splits_digest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "countdown"

FAMILY = textwrap.dedent('''
    from genenv_engine.environments import CheckResult, LadderEnvironment, Task, Validation


    class Lineq(LadderEnvironment):
        """Level 1 has 378 distinct prompts; the default sizes ask 600 of it (train 500 + heldout 100)."""

        name = "lineq"
        WIDTH = {1: 378}

        def draft(self, level, rng):
            a = rng.randrange(self.WIDTH.get(level, 10**6))
            prompt = f"L{level}: x - {a} = {level}"

            def build(task_id, **fields):
                return Task(id=task_id, benchmark=self.name, prompt=prompt, answer=str(a + level),
                            difficulty={"level": level}, checker="exact", **fields)
            return prompt, build

        def check(self, task, response):
            ok = response.strip() == task.answer
            return CheckResult(ok, float(ok), None if ok else "wrong")

        def validate(self, prompt, answer, *, task_id, parent=None, epoch=0, generator=None):
            return Validation(False, "not_supported")

        def sibling(self, source, rng, task_id):
            raise NotImplementedError


    class BoundedLineq(Lineq):
        """Bounds its own draws (as the reasoning-gym adapter does): a task out of prompts is left out."""

        name = "bounded_lineq"

        def _make_split(self, split, n, levels, rng, seen, tries=None):
            return super()._make_split(split, n, levels, rng, seen, 50 if tries is None else tries)


    class StallingLineq(Lineq):
        """Its fifth draft at level 1 never returns."""

        name = "stalling_lineq"
        calls = 0

        def draft(self, level, rng):
            self.calls += level == 1
            while self.calls == 5:
                pass
            return super().draft(level, rng)
''')

LINE = (
    "benchmark 'lineq': level 1 gave 378 distinct prompts in 3,042 draws; the splits need 600 (train 500 + "
    "heldout 100 at level 1): lower Lineq.DEFAULT_SIZES (now seed=200, train=2000, heldout=400, the sizes a run "
    "builds it at) or widen level 1 of its draft"
)
"""The one line of the 378-prompt family at its own (the run's) sizes, seed 0."""


@pytest.fixture
def family(tmp_path, monkeypatch):
    """The module ``lineq_env`` importable (and registered as the ``lineq`` entry point), nothing found yet."""
    monkeypatch.setattr(environments, "_FOUND", {})
    (tmp_path / "lineq_env.py").write_text(FAMILY)
    info = tmp_path / "lineq_pkg-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lineq-pkg\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[genenv.environments]\nlineq = lineq_env:Lineq\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("lineq_env", None)


def _env(spelling: str, sizes: SplitSizes | None = None):
    (name,), _ = resolve_benchmarks([spelling], {})
    return get_environment(name, 0, sizes)


def test_a_level_out_of_prompts_stops_the_splits_with_one_line(family):
    with pytest.raises(SplitsExhausted) as caught:
        _env("lineq_env:Lineq").splits()
    assert str(caught.value) == LINE
    assert isinstance(caught.value, ConfigError) and caught.value.field == "benchmarks"


def test_sizes_given_are_named_as_given(family):
    with pytest.raises(SplitsExhausted) as caught:
        _env("lineq_env:Lineq", SplitSizes(seed=30, train=1600, heldout=40)).splits()
    assert str(caught.value).endswith(
        "the splits need 410 (train 400 + heldout 10 at level 1): lower the split "
        "sizes asked for (seed=30, train=1600, heldout=40) or widen level 1 of its draft"
    )


def test_small_sizes_fit(family):
    splits = _env("lineq_env:Lineq", CHECK_SIZES).splits()
    assert {k: len(v) for k, v in splits.items()} == {"heldout": 40, "train": 80, "seed": 24}


def test_a_subclass_that_bounds_its_draws_leaves_tasks_out(family):
    splits = _env("lineq_env:BoundedLineq").splits()
    level_one = sum(t.level == 1 for tasks in splits.values() for t in tasks)
    assert (len(splits["heldout"]), len(splits["train"]), len(splits["seed"]), level_one) == (400, 1778, 200, 378)


def test_genenv_run_ends_with_the_line(family, tmp_path, capsys):
    code = main(
        [
            "run",
            "--preset",
            "micro",
            "--seed",
            "0",
            "--benchmarks",
            "lineq_env:Lineq",
            "--session",
            str(tmp_path / "s"),
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert (code, err.splitlines()) == (2, [f"genenv: {LINE}"])


def test_genenv_benchmarks_ends_with_the_line(family, monkeypatch, capsys):
    monkeypatch.setattr(environments, "BENCHMARKS", {})  # the built-ins left out: only the installed family listed
    code = main(["benchmarks"])
    out, err = capsys.readouterr()
    assert (code, out, err.splitlines()) == (2, "", [f"genenv: {LINE}"])


def test_env_check_at_the_run_sizes_reports_the_line(family, capsys):
    assert main(["env", "check", "lineq_env:Lineq", "--sizes", "run"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"FAIL splits_deterministic: {LINE}" in lines
    assert "--   splits_disjoint: skipped (a level ran out of new prompts)" in lines
    assert lines[-1] == "lineq: 1 of 1 contracts broken"


def test_env_check_at_its_own_sizes_passes_the_split_contracts(family):
    report = check_environment("lineq_env:Lineq", cross_process=False)
    assert {"splits_deterministic", "splits_disjoint"} <= set(report.checked)


def test_a_contract_out_of_time_names_the_split_and_level(family):
    report = check_environment("lineq_env:StallingLineq", cross_process=False, limit=1)
    loop = next(i for i, line in enumerate(FAMILY.splitlines(), 1) if "while self.calls" in line)
    assert report.failures[0].line == (
        "splits_deterministic: did not finish in 1 s: building the heldout split (8 of 40 tasks made, drawing at "
        f"level 1: 4 distinct prompts in 4 draws); in draft at lineq_env.py:{loop}"
    )


DIGESTS = {
    None: "790ce41e40b3e6429a44d25d9f563f15a36ba32f47c524e7d3c2e875bb09c69d",
    CHECK_SIZES: "b7a8adb4b8a1360904016f24b233e4a7930207866d1bd13f08c6aed8e532d758",
}
"""The countdown example's splits digests (seed 0) as the code made them before levels were bounded."""


@pytest.mark.parametrize("sizes", list(DIGESTS))
def test_a_family_with_enough_prompts_keeps_its_splits(monkeypatch, sizes):
    monkeypatch.setattr(environments, "_FOUND", {})
    monkeypatch.syspath_prepend(str(EXAMPLE))
    try:
        assert splits_digest(_env("countdown_env:Countdown", sizes)) == DIGESTS[sizes]
    finally:
        sys.modules.pop("countdown_env", None)
