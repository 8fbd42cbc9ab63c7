"""The reasoning-gym eligibility check refuses up front what env check would find broken: entries that follow the
hash seed (on a probed seed or only on one of the further seeds compared across the two processes, named by level
and seed), another entry's gold accepted beyond env check's own limit, and a dataset whose splits cannot be built.

`HashOrderDouble` is a test double of a reasoning-gym dataset, installed in the probe's real child processes (run
under hash seeds 0 and 1 as always), so the cross-process comparison itself is what is checked."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from genenv_engine.core.errors import ConfigError
from genenv_engine.environments.reasoning_gym import calls
from genenv_engine.environments.reasoning_gym import eligibility as elig
from genenv_engine.environments.reasoning_gym.spec import Attribute
from genenv_engine.interfaces.conformance import SWAP_PASS_LIMIT

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
DOUBLE_LEVELS = (1, 2)
WORDS = {"amber", "birch", "cedar", "delta", "ember", "fjord"}
"""The test double's gold at its hash-ordered entry: these words in the set's order, which the hash seed decides."""


class HashOrderDouble:
    """A test double of a reasoning-gym dataset object: exact-match scoring."""

    def score_answer(self, answer: str, entry: dict) -> float:
        return float(answer == entry["answer"])


def install_double() -> None:
    """In a probe child: the double's curriculum (levels 1 and 2) and generator. ``DOUBLE_HASHED`` names the one
    ``level,seed`` whose gold follows the hash seed (``-``: none); ``DOUBLE_HANG`` one whose generation never ends."""
    hashed, hang = os.environ["DOUBLE_HASHED"], os.environ.get("DOUBLE_HANG", "-")

    def materialize(dataset: str, config: dict, seed: int) -> tuple[HashOrderDouble, dict]:
        where = f"{config['level']},{seed}"
        if where == hang:
            time.sleep(600)
        gold = ",".join(WORDS) if where == hashed else f"gold {where}"
        return HashOrderDouble(), {"question": f"question {where}", "answer": gold}

    calls.read_curriculum = lambda dataset: (Attribute("level", ("level",), DOUBLE_LEVELS, DOUBLE_LEVELS),)
    calls.materialize = materialize


@pytest.fixture
def double(monkeypatch):
    """`check_eligibility`'s children run the double: returns a setter of ``DOUBLE_HASHED`` and ``DOUBLE_HANG``."""
    settings: dict[str, str] = {}

    def start(dataset: str, contained: bool, hash_seed: str) -> subprocess.Popen[str]:
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, **settings)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), *filter(None, [env.get("PYTHONPATH")])])
        code = "import sys, test_rg_eligibility_checks as t\nt.install_double()\n"
        code += "from genenv_engine.environments.reasoning_gym.eligibility import child\nchild(sys.argv[1], False)"
        return subprocess.Popen(
            [sys.executable, "-c", code, dataset],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )

    monkeypatch.setattr(elig, "_start", start)
    return lambda hashed, hang="-": settings.update(DOUBLE_HASHED=hashed, DOUBLE_HANG=hang)


COMPARED = len(DOUBLE_LEVELS) * (len(elig.PROBE_SEEDS) + len(elig.CROSS_SEEDS))


@pytest.mark.parametrize(
    "hashed, first",
    [("1,1", "level 1 seed 1"), ("2,4", "level 2 seed 4")],
    ids=["a probed seed", "a further seed only"],
)
def test_entries_that_follow_the_hash_seed_are_refused_naming_the_first_level_and_seed(double, hashed, first):
    double(hashed)
    with pytest.raises(ConfigError) as refused:
        elig.check_eligibility("hash_order_double", (), None, seconds=120)
    line = str(refused.value)
    assert "\n" not in line and "rg:hash_order_double: not deterministic" in line
    assert f"(1 of {COMPARED} compared, the first at {first})" in line


def test_the_same_double_without_a_hashed_entry_is_admitted(double):
    double("-")
    verdict = elig.check_eligibility("hash_order_double", (), None, seconds=120)
    assert (verdict.entries, verdict.other_gold_share, verdict.constant_share) == (6, 0.0, 0.0)


def test_a_further_seed_that_never_finishes_stops_the_comparison_not_the_verdict(double, monkeypatch):
    """The children are stopped at the limit once their probe's result is out; the entries both compared count."""
    double("-", hang="2,5")
    started = time.monotonic()
    verdict = elig.check_eligibility("hash_order_double", (), None, seconds=8)
    assert verdict.entries == 6 and time.monotonic() - started < 30


def _fake_results(other: list[int]):
    result = {"digests": [[1, 0, "d"]], "entries": 12, "longest_gold": 3, "other": other, "constant": [0, 12]}
    return lambda *_: [(dict(result), {}), (dict(result), {})]


def test_the_other_gold_limit_is_env_checks_own():
    assert elig.MAX_OTHER_GOLD_SHARE == SWAP_PASS_LIMIT == 0.1


@pytest.mark.parametrize("dataset, other, refused", [("d", [1, 12], False), ("d", [2, 12], True)])
def test_another_golds_share_past_env_checks_limit_is_refused(monkeypatch, dataset, other, refused):
    monkeypatch.setattr(elig, "_results", _fake_results(other))
    if not refused:
        assert elig.check_eligibility(dataset, (), None).other_gold_share == pytest.approx(1 / 12)
        return
    with pytest.raises(ConfigError, match=r"rg:d: its score_answer accepts another entry's different gold on 2 of 12"):
        elig.check_eligibility(dataset, (), None)


def test_a_named_exception_is_admitted_with_its_reason(monkeypatch):
    monkeypatch.setattr(elig, "_results", _fake_results([3, 15]))
    verdict = elig.check_eligibility("n_queens", (), None)
    assert verdict.other_gold_share == 0.2 and verdict.notes == (elig.WRONG_SHARE_EXCEPTIONS["n_queens"],)


@pytest.mark.skipif(importlib.util.find_spec("reasoning_gym") is None, reason="reasoning-gym is not installed")
def test_a_dataset_whose_splits_cannot_be_built_is_refused_before_any_probe(monkeypatch):
    from genenv_engine.environments.reasoning_gym import adapter

    def no_probe(*_):
        raise AssertionError("the probe ran")

    monkeypatch.setattr(elig, "check_eligibility", no_probe)
    monkeypatch.setattr(adapter, "rg_version", lambda: "0.1.25")
    with pytest.raises(ConfigError) as refused:
        adapter.eligibility.__wrapped__("sokoban")
    line = str(refused.value)
    assert "\n" not in line and line.startswith("config error in 'benchmarks': rg:sokoban: its splits cannot be built")
    assert "8 distinct puzzles in 161 seeds" in line
