"""GenEnv inside veRL's legacy trainer (`genenv_engine.integrations.verl`), driven through veRL's own classes: the
dataset veRL builds from its Hydra config (``create_rl_dataset``, ``collate_fn``, the ``StatefulDataLoader`` and
sampler the trainer uses) serves the open genenv epoch's tasks in veRL's row layout; batches built as the legacy
trainer builds them (``DataProto.from_single_dict``, a ``uid`` per prompt, ``repeat(n, interleave=True)``, the
rollout's responses, ``token_level_scores``) are recorded by ``on_batch_end``, and at each epoch boundary the session
holds the batches' p-hat from those scores, R_env, the simulator's update and the epoch's row; the recipe composes
with veRL's ``ppo_trainer`` config. Micro preset with scripted roles, so that the simulator writes valid tasks;
veRL's rollout and training workers (a GPU, vLLM) are not run. Skipped where veRL is not installed (``make
setup-verl``)."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="veRL is not installed: make setup-verl")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from genenv_engine.config import load_config  # noqa: E402
from genenv_engine.core.curriculum import env_reward  # noqa: E402
from genenv_engine.integrations.verl import (  # noqa: E402
    HELDOUT_FILES,
    TRAIN_FILES,
    VerlCoEvolution,
    compute_score,
)
from genenv_engine.storage.session import Session  # noqa: E402
from genenv_engine.testing import scripted_backends  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "docs" / "examples" / "verl"
STEPS, BATCH, N = 2, 4, 4
"""Two veRL steps of 4 prompts a genenv epoch, 4 responses a prompt (``rollout.n``)."""
WRONG = "nope(x=1)"


def verl_config(folder: Path, name: str = "genenv_ppo", cut: bool = True):
    """The recipe composed over veRL's own ``ppo_trainer`` config, pointed at ``folder`` and (``cut``) cut to this
    test's sizes."""
    from hydra import compose, initialize_config_dir

    overrides = [f"data.genenv.session={folder}"]
    if cut:
        overrides += [f"data.genenv.steps_per_epoch={STEPS}", f"data.train_batch_size={BATCH}"]
        overrides += [f"actor_rollout_ref.rollout.n={N}"]
    with initialize_config_dir(config_dir=str(RECIPE), version_base=None):
        return compose(config_name=name, overrides=overrides)


def loader(dataset, data_config):
    """The train data loader veRL's legacy trainer makes (``RayPPOTrainer._create_dataloader``)."""
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.trainer.ppo.utils import create_rl_sampler
    from verl.utils.dataset.rl_dataset import collate_fn

    return StatefulDataLoader(
        dataset=dataset,
        batch_size=data_config.get("gen_batch_size") or data_config.train_batch_size,
        num_workers=data_config["dataloader_num_workers"],
        drop_last=True,
        collate_fn=collate_fn,
        sampler=create_rl_sampler(data_config, dataset),
    )


def tokenizer():
    from genenv_engine.training.tokenizer import build_byte_tokenizer

    return build_byte_tokenizer()


def step_batch(batch_dict, tok, answer_of) -> tuple[object, list[float]]:
    """One legacy-trainer step on the CPU: the batch as ``fit`` builds it, ``N`` responses a prompt (``answer_of(row,
    k)`` stands for the rollout), each scored with `compute_score` at its last token, as veRL's reward manager puts
    it in ``token_level_scores``; returns the batch and each row's score."""
    from verl import DataProto

    batch = DataProto.from_single_dict(batch_dict)
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch.batch))], dtype=object)
    batch = batch.repeat(repeat_times=N, interleave=True)
    texts = [answer_of(i // N, i % N, batch.non_tensor_batch["extra_info"][i]) for i in range(len(batch))]
    ids = [tok.encode(t, add_special_tokens=False) for t in texts]
    width = max(map(len, ids))
    responses = torch.full((len(ids), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), 1 + width), dtype=torch.long)  # a one-token prompt, then the response
    scores = torch.zeros((len(ids), width))
    values = []
    for i, (row, text) in enumerate(zip(ids, texts, strict=True)):
        responses[i, : len(row)] = torch.tensor(row)
        mask[i, : 1 + len(row)] = 1
        ntb = batch.non_tensor_batch
        value = compute_score(ntb["data_source"][i], text, ntb["reward_model"][i]["ground_truth"], ntb["extra_info"][i])
        scores[i, len(row) - 1] = value
        values.append(value)
    batch = batch.union(DataProto.from_dict({"responses": responses, "attention_mask": mask}))
    batch.batch["token_level_scores"] = scores
    return batch, values


def stored(folder: Path, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(folder / "genenv.db") as db:
        return db.execute(sql, params).fetchall()


@pytest.mark.slow
def test_the_dataset_serves_the_epochs_tasks_in_verls_layout(tmp_path):
    from verl import DataProto
    from verl.trainer.ppo.utils import create_rl_dataset

    folder = tmp_path / "s"
    cfg = verl_config(folder)
    assert cfg.trainer.use_v1 is False and cfg.data.train_files == TRAIN_FILES
    config = load_config("micro", overrides={"epochs": 1})
    coevo = VerlCoEvolution(
        folder, steps_per_epoch=STEPS, batch_size=BATCH, config=config, backend_factory=scripted_backends()
    )
    with coevo:
        dataset = create_rl_dataset(cfg.data.train_files, cfg.data, tokenizer(), None, is_train=True)
        assert type(dataset).__name__ == "GenenvDataset" and dataset.coevo is coevo
        assert len(dataset) == STEPS * BATCH
        tasks = list(coevo.core._open.tasks.values())
        rows = [dataset[i] for i in range(len(dataset))]
        assert [r["extra_info"]["id"] for r in rows] == [tasks[i % len(tasks)].id for i in range(len(rows))]
        first, task = rows[0], tasks[0]
        assert first["prompt"] == first["raw_prompt"] == [{"role": "user", "content": task.prompt}]
        assert first["data_source"] == f"genenv/{task.benchmark}"
        assert first["reward_model"] == {"style": "rule", "ground_truth": task.answer}
        assert first["extra_info"]["genenv_epoch"] == 1 and first["index"] == 0
        assert compute_score(first["data_source"], task.answer, task.answer, first["extra_info"]) == 1.0
        data = loader(dataset, cfg.data)
        assert len(data) == STEPS  # one pass of veRL's data loader is one genenv epoch
        batch = DataProto.from_single_dict(next(iter(data)))
        assert len(batch) == BATCH and batch.batch["dummy_tensor"].shape == (BATCH, 1)
        assert {info["id"] for info in batch.non_tensor_batch["extra_info"]} <= {t.id for t in tasks}
        assert {"data_source", "reward_model", "extra_info", "raw_prompt", "index"} <= set(batch.non_tensor_batch)
        held = create_rl_dataset(cfg.data.val_files, cfg.data, tokenizer(), None, is_train=False)
        assert cfg.data.val_files == HELDOUT_FILES and len(held) == config.heldout_size
        assert held[0]["extra_info"]["genenv_epoch"] == -1 and held[0]["extra_info"]["split"] == "heldout"


@pytest.mark.slow
def test_on_batch_end_records_each_tasks_rewards_and_closes_the_epoch(tmp_path):
    from verl.trainer.ppo.utils import create_rl_dataset

    folder, tok = tmp_path / "s", tokenizer()
    cfg = verl_config(folder)
    config = load_config("micro", overrides={"epochs": 2})

    answers: dict[str, str] = {}

    def answer_of(prompt: int, k: int, info: dict) -> str:  # even prompts: half of the responses right; odd: none
        return answers[info["id"]] if prompt % 2 == 0 and k % 2 == 0 else WRONG

    scores: dict[int, dict[str, list[float]]] = {1: {}, 2: {}}
    coevo = VerlCoEvolution(
        folder, steps_per_epoch=STEPS, batch_size=BATCH, config=config, backend_factory=scripted_backends()
    )
    with coevo:
        dataset = create_rl_dataset(cfg.data.train_files, cfg.data, tok, None, is_train=True)
        data = loader(dataset, cfg.data)
        for epoch in (1, 2):  # veRL's passes over its data loader, as the legacy fit loop makes them
            assert coevo.epoch == epoch and len(dataset) == STEPS * BATCH  # the same slots, this epoch's tasks
            assert {dataset[i]["extra_info"]["genenv_epoch"] for i in range(len(dataset))} == {epoch}
            answers.update({t.id: t.answer for t in coevo.core._open.tasks.values()})
            for batch_dict in data:
                batch, values = step_batch(batch_dict, tok, answer_of)
                for info, value in zip(batch.non_tensor_batch["extra_info"], values, strict=True):
                    scores[epoch].setdefault(info["id"], []).append(value)
                dataset.on_batch_end(batch=batch)
        assert coevo.done and coevo.steps == 2 * STEPS and coevo.recorded == 2 * STEPS * BATCH * N
        assert (coevo.late, coevo.unknown) == (0, 0)
    assert coevo.summary == {"epochs_done": 2}

    session = Session.open(folder)
    metrics = {m["epoch"]: m for m in session.store.epoch_metrics()}
    cur = session.config.curriculum
    for epoch in (1, 2):
        m = metrics[epoch]
        assert m["status"] == "done" and m["agent_update"] == {"steps": float(STEPS), "trainer_step": STEPS * epoch}
        assert m["rollouts_recorded"] == STEPS * BATCH * N and "simulator_update" in m and m["heldout"]
        rows = stored(
            folder, "select task_id, response, reward from rollouts where epoch = ? and purpose = 'train'", epoch
        )
        by_task: dict[str, list[float]] = {}
        for task_id, response, reward in rows:
            assert response in (answers[task_id], WRONG)  # the decoded responses are stored
            by_task.setdefault(task_id, []).append(reward)
        assert {t: sorted(v) for t, v in by_task.items()} == {t: sorted(v) for t, v in scores[epoch].items()}
        batches = stored(folder, "select id, p_hat, r_env from batches where epoch = ?", epoch)
        assert len(batches) == m["batches"] >= 1
        for batch_id, p_hat, r_env in batches:
            members = stored(folder, "select id, benchmark from tasks where batch_id = ?", batch_id)
            pooled = [s for t, _ in members for s in scores[epoch].get(t, [])]
            assert pooled and p_hat == pytest.approx(sum(pooled) / len(pooled))  # p-hat from veRL's scores
            alpha = cur.alpha_for(members[0][1])
            assert r_env == pytest.approx(env_reward(p_hat, cur.reward, alpha, cur.beta))
    assert stored(folder, "select epoch, status from epochs order by epoch") == [(0, "done"), (1, "done"), (2, "done")]
    assert session.checkpoint_epochs() == [0, 1, 2]


@pytest.mark.parametrize("name", ["genenv_ppo", "genenv_ppo_multinode"])
def test_the_recipe_composes_with_verls_own_config(tmp_path, name):
    from omegaconf import OmegaConf

    from genenv_engine.integrations.verl import settings

    cfg = verl_config(tmp_path / "s", name)
    OmegaConf.resolve(cfg)  # every interpolation of veRL's config resolves with the overlay
    assert cfg.trainer.use_v1 is False and cfg.algorithm.adv_estimator == "grpo"
    assert cfg.data.custom_cls.path == "pkg://genenv_engine.integrations.verl"
    assert (cfg.reward.custom_reward_function.path, cfg.reward.custom_reward_function.name) == (
        "pkg://genenv_engine.integrations.verl",
        "compute_score",
    )
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import get_dataset_class

    assert get_dataset_class(cfg.data).__name__ == "GenenvDataset"  # veRL's loaders find both
    assert get_custom_reward_fn(cfg) is not None
    s = settings(cfg.data)
    assert (s["steps_per_epoch"], s["batch_size"]) == (STEPS, BATCH)
    own = verl_config(tmp_path / "s", name, cut=False)  # the recipe's own sizes: one step past the session's epochs
    epochs, steps = own.data.genenv.epochs, own.data.genenv.steps_per_epoch
    assert (own.trainer.total_epochs, own.trainer.total_training_steps) == (epochs + 1, steps * epochs + 1)
    assert own.data.dataloader_num_workers == 0 and own.trainer.save_freq == own.trainer.test_freq == steps


def test_genenv_settings_given_on_veRLs_command_line_reach_the_session_config(tmp_path):
    from hydra import compose, initialize_config_dir

    from genenv_engine.config import load_config as load
    from genenv_engine.integrations.verl import settings

    with initialize_config_dir(config_dir=str(RECIPE), version_base=None):
        cfg = compose(
            config_name="genenv_ppo",
            overrides=[
                f"data.genenv.session={tmp_path}",
                "data.genenv.preset=micro",
                "+data.genenv.overrides={simulator.seeds_per_epoch: 3, epochs: 2}",
            ],
        )
    s = settings(cfg.data)
    assert s["overrides"] == {"simulator.seeds_per_epoch": 3, "epochs": 2} and type(s["overrides"]) is dict
    config = load(s["preset"], overrides=s["overrides"])
    assert (config.epochs, config.simulator.seeds_per_epoch) == (2, 3)
