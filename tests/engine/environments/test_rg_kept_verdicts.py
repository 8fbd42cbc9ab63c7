"""Admitted eligibility verdicts kept on disk (`checked_or_kept`): a second process reads the verdict instead of
probing again, a refusal is never kept, a file that does not read is probed again, and the key moves with what
decides the verdict."""

from __future__ import annotations

import importlib.util
import json

import pytest

from genenv_engine.core.errors import ConfigError
from genenv_engine.environments.reasoning_gym import eligibility as elig

VERDICT = elig.Eligibility(
    "letter_counting", "sandboxed", ("eval@score_answer",), 0.25, 0.0, True, 21, 3, 9.5, ("a note",)
)


@pytest.fixture
def probes(monkeypatch):
    """The datasets `check_eligibility` was asked about; it admits every one with `VERDICT`'s fields, or refuses
    those named in ``refuse``."""
    asked: list[str] = []
    refuse: set[str] = set()

    def check(dataset, findings, sandbox_missing, seconds=elig.PROBE_SECONDS):
        asked.append(dataset)
        if dataset in refuse:
            raise ConfigError("benchmarks", f"rg:{dataset}: refused")
        return elig.Eligibility(dataset, *list(vars(VERDICT).values())[1:])

    monkeypatch.setattr(elig, "check_eligibility", check)
    return asked, refuse


def test_an_admitted_verdict_is_kept_and_read_back_instead_of_probing_again(tmp_path, probes):
    asked, _ = probes
    first = elig.checked_or_kept("letter_counting", ("eval@score_answer",), None, "0.1.25", tmp_path)
    assert first == VERDICT and asked == ["letter_counting"]
    again = elig.checked_or_kept("letter_counting", ("eval@score_answer",), None, "0.1.25", tmp_path)
    assert again == VERDICT and isinstance(again.findings, tuple) and asked == ["letter_counting"]
    (kept,) = (tmp_path / "0.1.25" / "eligibility").iterdir()
    assert kept.name.startswith("letter_counting-") and json.loads(kept.read_text())["entries"] == 21


def test_a_refusal_is_not_kept(tmp_path, probes):
    asked, refuse = probes
    refuse.add("codeio")
    for _ in range(2):
        with pytest.raises(ConfigError, match="rg:codeio: refused"):
            elig.checked_or_kept("codeio", (), None, "0.1.25", tmp_path)
    assert asked == ["codeio", "codeio"] and not (tmp_path / "0.1.25").exists()


def test_a_file_that_does_not_read_whole_is_probed_again_and_rewritten(tmp_path, probes):
    asked, _ = probes
    path = elig.verdict_path("letter_counting", "0.1.25", (), True, tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"dataset": "letter_count')
    assert elig.checked_or_kept("letter_counting", (), None, "0.1.25", tmp_path).dataset == "letter_counting"
    assert asked == ["letter_counting"] and elig.read_kept(path) is not None
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_the_key_moves_with_the_release_findings_and_containment(tmp_path):
    base = elig.verdict_path("letter_counting", "0.1.25", (), True, tmp_path)
    others = {
        elig.verdict_path("letter_counting", "0.1.26", (), True, tmp_path),
        elig.verdict_path("letter_counting", "0.1.25", ("eval@x",), True, tmp_path),
        elig.verdict_path("letter_counting", "0.1.25", (), False, tmp_path),
        elig.verdict_path("basic_arithmetic", "0.1.25", (), True, tmp_path),
    }
    assert base not in others and len(others) == 4
    assert base == elig.verdict_path("letter_counting", "0.1.25", (), True, tmp_path)


@pytest.mark.skipif(importlib.util.find_spec("reasoning_gym") is None, reason="reasoning-gym is not installed")
def test_the_adapter_reads_a_verdict_another_process_kept(tmp_path, monkeypatch, probes):
    from genenv_engine.environments.reasoning_gym import adapter
    from genenv_engine.environments.reasoning_gym.calls import dataset_class
    from genenv_engine.environments.reasoning_gym.scan import scan_scorer
    from genenv_engine.environments.sandbox import unavailable_reason

    asked, _ = probes
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path))
    findings = tuple(scan_scorer(dataset_class("letter_counting")))
    path = elig.verdict_path(
        "letter_counting", adapter.rg_version(), findings, unavailable_reason() is None, tmp_path / "reasoning-gym"
    )
    elig.keep(path, VERDICT)
    assert adapter.eligibility.__wrapped__("letter_counting") == VERDICT and asked == []
