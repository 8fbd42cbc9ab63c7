"""The veRL integration's parts that need no veRL (`genenv_engine.integrations.verl`): its reward function scores a
row of veRL's layout with the task's environment, as veRL's reward manager calls it (gold 1.0, a wrong answer 0.0,
veRL's extra keywords ignored, a row that is not genenv's refused); the dataset's settings refuse what it cannot
serve; importing the integration loads neither veRL nor torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from genenv_engine.config import load_config
from genenv_engine.environments import environments_of
from genenv_engine.integrations.verl import compute_score, settings, task_row


def rows() -> list[dict]:
    """A few of the micro preset's training tasks as the dataset serves them (issued by epoch 3)."""
    envs = environments_of(load_config("micro"))
    tasks = [t for env in envs.values() for t in env.splits()["train"][:3]]
    return [task_row(t, 3, i, "", bool(envs[t.benchmark].structured)) for i, t in enumerate(tasks)]


def test_compute_score_gives_the_gold_answer_one_and_a_wrong_one_zero():
    for row in rows():
        info, gold = row["extra_info"], row["reward_model"]["ground_truth"]
        assert row["data_source"].startswith("genenv/") and row["prompt"][0]["role"] == "user"
        assert (info["genenv_epoch"], info["id"]) == (3, info["id"]) and info["id"]
        info = {**info, "num_turns": 2, "rollout_reward_scores": {}}  # what veRL's reward manager adds
        assert compute_score(row["data_source"], gold, gold, info, reward_router_address=None) == 1.0
        assert compute_score(row["data_source"], "nope(x=1)", gold, info) == 0.0


def test_compute_score_refuses_a_row_that_is_not_genenvs():
    with pytest.raises(ValueError, match="not a genenv task"):
        compute_score("openai/gsm8k", "42", "42", {"index": 0})


def test_the_settings_need_a_session_and_no_loader_workers():
    base = {"train_batch_size": 8, "genenv": {"session": "s", "steps_per_epoch": 2}}
    with pytest.raises(ValueError, match="dataloader_num_workers=8: set 0"):
        settings({**base, "dataloader_num_workers": 8})
    with pytest.raises(ValueError, match="steps_per_epoch"):
        settings({"train_batch_size": 8, "genenv": {"session": "s"}})
    assert settings({**base, "gen_batch_size": 32})["batch_size"] == 32  # veRL's loader reads gen_batch_size first


@pytest.mark.subprocess
def test_importing_the_integration_loads_no_verl_or_torch():
    code = "import json, sys, genenv_engine.integrations.verl; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {name.split(".")[0] for name in json.loads(out.stdout.strip().splitlines()[-1])}
    assert "genenv_engine" in loaded
    assert loaded.isdisjoint({"verl", "torch", "tensordict", "hydra", "omegaconf", "ray", "transformers"})
