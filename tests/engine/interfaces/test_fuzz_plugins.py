"""Property-based fuzzing (hypothesis) of plugin environments as the built-ins are fuzzed: the countdown example and
the environment ``genenv env new`` writes. Mutated real simulator outputs and random text go through the loop's
parser and validator (`genenv_engine.training.simulator.parse_and_validate`): each comes back as a stored task without
an
exception, rejected with a non-empty reason or accepted with a gold that passes its own checker; random agent
responses get a `CheckResult` with a reward in [0, 1]."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
from fuzz_outputs import mutated_outputs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genenv_engine.core.records import CheckResult
from genenv_engine.interfaces.scaffold import write_package
from genenv_engine.training.simulator import parse_and_validate

EXAMPLES = int(os.environ.get("GENENV_FUZZ_EXAMPLES", "150"))
EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "countdown"
FRAGMENTS = [
    " => ",
    "TASK: ",
    "\nANSWER: ",
    "(",
    ")",
    "*",
    "/",
    "/ 0",
    "**",
    "|",
    ":",
    "\x00",
    "\u202e",
    "9" * 40,
    "-1",
    "1e309",
    "nan",
    "None",
    "__import__('os')",
    "\n",
    "numbers: ",
    " | target: ",
    "add: ",
]


@pytest.fixture(params=["countdown", "generated"])
def plugin(request, tmp_path, monkeypatch):
    """A plugin environment: the countdown example, or the one `genenv env new` writes."""
    if request.param == "countdown":
        monkeypatch.syspath_prepend(str(EXAMPLE))
        module, cls = "countdown_env", "Countdown"
    else:
        write_package("fuzzed", tmp_path / "fuzzed")
        monkeypatch.syspath_prepend(str(tmp_path / "fuzzed"))
        module, cls = "fuzzed_env", "Fuzzed"
    yield getattr(importlib.import_module(module), cls)(seed=0)
    sys.modules.pop(module, None)


def outputs(env):
    """(text, style): a mutated real task in one of the two output styles, or random text."""
    return mutated_outputs(env, FRAGMENTS, ("insert", "delete", "splice", "digit"))


def test_plugin_outputs_never_crash_and_every_rejection_has_a_reason(plugin):
    seed = plugin.splits()["seed"][0]
    counts = {"valid": 0, "invalid": 0}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(outputs(plugin), st.one_of(st.text(max_size=120), st.sampled_from(FRAGMENTS)))
    def fuzz(case, response):
        text, style = case
        task = parse_and_validate(plugin, text, task_id="fuzz/0", seed=seed, epoch=1, generator="fuzz", style=style)
        assert task.benchmark == plugin.name and task.origin == "generated"
        if task.valid:
            counts["valid"] += 1
            assert plugin.check(task, task.answer).success, (text, task.answer)
        else:
            counts["invalid"] += 1
            assert isinstance(task.reason, str) and task.reason.strip() and "plugin_error" not in task.reason, text
        result = plugin.check(seed, response)
        assert isinstance(result, CheckResult) and 0.0 <= plugin.reward(result) <= 1.0

    fuzz()
    assert counts["valid"] > 0 and counts["invalid"] > 0, counts
