"""The warm-start cache key: the method's settings name a warm start, the runtime part never does, and every preset's
key is the one it had before the runtime settings left ``[model]`` and the top level for ``[runtime]`` (its cache
entries, the shipped warm starts among them, are still found), but for the ``smol`` family's, whose recipe turned on
SFT length groups later (`SMOL_UNGROUPED`: its keys before)."""

from __future__ import annotations

import dataclasses

import pytest

from genenv_engine.config import RUNTIME_TABLES, RunConfig, RuntimeConfig, load_config, preset_names
from genenv_engine.training.warmstart import cache_key

KEYS_BEFORE_RUNTIME = {
    "ablation": ("ablation-s0-9873941b1f0e", "ablation-s1-312e63d8f7f9"),
    "chain": ("chain-s0-49da9013afef", "chain-s1-05af8135dbf5"),
    "five": ("five-s0-b1efd856e3fb", "five-s1-858a8b4b1eab"),
    "micro": ("micro-s0-12ec78dcbf70", "micro-s1-122275dbc6c2"),
    "smol": ("smol-s0-0967a8600d22", "smol-s1-84f35f9ebe4f"),
    "smol-ablation": ("smol-ablation-s0-0967a8600d22", "smol-ablation-s1-84f35f9ebe4f"),
    "smol-l3": ("smol-l3-s0-0967a8600d22", "smol-l3-s1-84f35f9ebe4f"),
    "smol-l34": ("smol-l34-s0-0967a8600d22", "smol-l34-s1-84f35f9ebe4f"),
    "tiny": ("tiny-s0-20af7cabae25", "tiny-s1-d5194439719e"),
}
"""Each preset's keys for seeds 0 and 1, computed by the version whose ``[model]`` table still held the threads,
device and execution switches; the ``smol`` family's since its warm start groups its SFT batches by length."""

SMOL_UNGROUPED = ("smol-s0-0963a2ea85b3", "smol-s1-a8469dcaa5cb")
"""The ``smol`` keys before (``model.sft_length_groups = 0``): the runs recorded then still name their warm start."""


def test_a_smol_config_saved_before_the_grouped_recipe_keeps_its_key():
    for seed, key in enumerate(SMOL_UNGROUPED):
        config = load_config("smol", overrides={"seed": seed, "model.sft_length_groups": 0})
        assert cache_key(config) == key


OTHER_RUNTIME = {
    "runtime": RuntimeConfig(
        threads=1,
        device="cpu",
        micro_batch=3,
        logprob_chunk=100,
        gradient_checkpointing=True,
        train_forward="fused",
        static_decode=True,
        rollout_batch=3,
        generate_batch=2,
    ),
}
"""Every ``[runtime]`` setting away from its default (bfloat16 passes left out: not every CPU takes them)."""


@pytest.mark.parametrize("preset", sorted(KEYS_BEFORE_RUNTIME))
def test_every_presets_key_is_byte_identical_to_its_key_before_the_runtime_table(preset):
    assert sorted(KEYS_BEFORE_RUNTIME) == preset_names()
    for seed, key in enumerate(KEYS_BEFORE_RUNTIME[preset]):
        assert cache_key(load_config(preset, overrides={"seed": seed})) == key


@pytest.mark.parametrize("preset", ["tiny", "smol"])
def test_no_runtime_setting_changes_the_key(preset):
    config = load_config(preset)
    other = load_config(preset, overrides={"ray.address": "local", "ray.workers": 5, "vllm.chunk_size": 7})
    assert cache_key(dataclasses.replace(other, **OTHER_RUNTIME)) == cache_key(config)
    assert set(RUNTIME_TABLES) == {"runtime", "ray", "vllm"}
    assert {f.name for f in dataclasses.fields(RunConfig)} >= set(RUNTIME_TABLES)


@pytest.mark.parametrize(
    "overrides",
    [{"seed": 1}, {"model.lora_r": 8}, {"warm_start.agent_steps": 29}, {"model.sft_length_groups": 0}],
    ids=["seed", "model", "warm-start", "sft-length-groups"],
)
def test_the_methods_settings_change_the_key(overrides):
    assert cache_key(load_config("smol", overrides=overrides)) != cache_key(load_config("smol"))
