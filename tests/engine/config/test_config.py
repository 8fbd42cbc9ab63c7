"""Config tests: presets load, paper defaults hold, every bad value names its field, TOML roundtrips."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from genenv_engine.config import (
    VARIANT_FIELDS,
    AgentConfig,
    ConfigError,
    CurriculumConfig,
    ModelConfig,
    RayConfig,
    RenamedSettingWarning,
    RunConfig,
    RuntimeConfig,
    SimulatorConfig,
    VLLMConfig,
    WarmStartConfig,
    config_from_file,
    field_docs,
    load_config,
    preset_names,
    save_config,
)

ALL_CLASSES = [
    ModelConfig,
    WarmStartConfig,
    SimulatorConfig,
    AgentConfig,
    CurriculumConfig,
    RuntimeConfig,
    VLLMConfig,
    RayConfig,
    RunConfig,
]


def write(tmp_path, text: str, name: str = "run.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


# --- presets and defaults -------------------------------------------------------------------------


def test_preset_names_lists_tiny_and_micro():
    assert {"tiny", "micro"} <= set(preset_names())


def test_tiny_preset_loads_with_its_values():
    cfg = load_config("tiny")
    assert cfg.preset == "tiny"
    assert cfg.epochs == 6
    assert cfg.heldout_size == 400
    assert cfg.model == ModelConfig(
        kind="tiny",
        hidden_size=128,
        num_layers=4,
        num_heads=4,
        intermediate_size=512,
        max_length=384,
        sft_length_groups=4,
    )
    assert cfg.simulator.max_new_tokens == 200
    assert cfg.agent.rollouts == 8
    assert cfg.agent.max_new_tokens == 64


def test_micro_preset_loads_with_its_values():
    cfg = load_config("micro")
    assert cfg.preset == "micro"
    assert cfg.epochs == 2
    assert cfg.heldout_size == 24
    assert (cfg.model.hidden_size, cfg.model.num_layers, cfg.model.num_heads, cfg.model.intermediate_size) == (
        32,
        2,
        2,
        64,
    )
    assert (cfg.warm_start.agent_steps, cfg.warm_start.simulator_steps, cfg.warm_start.batch_size) == (8, 8, 8)
    assert (cfg.simulator.seeds_per_epoch, cfg.simulator.variations, cfg.simulator.batch_size) == (4, 2, 8)
    assert (cfg.agent.rollouts, cfg.agent.max_new_tokens, cfg.agent.minibatch) == (4, 24, 16)
    # micro leaves the curriculum section out: the dataclass defaults apply
    assert cfg.curriculum == CurriculumConfig()


def test_no_preset_and_no_file_means_tiny():
    assert load_config().preset == "tiny"


@pytest.mark.parametrize("cfg", [CurriculumConfig(), load_config("tiny").curriculum, load_config("micro").curriculum])
def test_paper_curriculum_defaults(cfg):
    assert cfg.reward == "alpha"
    assert cfg.alpha == 0.5
    assert cfg.k_min == 0.1
    assert cfg.beta == 2.0


@pytest.mark.parametrize("preset", ["tiny", "micro"])
def test_paper_rwr_lambda_default(preset):
    assert SimulatorConfig().rwr_lambda == 1.0
    assert load_config(preset).simulator.rwr_lambda == 1.0


# --- bad values -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: CurriculumConfig(alpha=0.0), "curriculum.alpha"),
        (lambda: CurriculumConfig(alpha=1.0), "curriculum.alpha"),
        (lambda: CurriculumConfig(alpha=1.5), "curriculum.alpha"),
        (lambda: CurriculumConfig(k_min=-0.1), "curriculum.k_min"),
        (lambda: CurriculumConfig(beta=0.0), "curriculum.beta"),
        (lambda: CurriculumConfig(reward="sharp"), "curriculum.reward"),
        (lambda: RunConfig(benchmarks=("nope",)), "benchmarks"),
        (lambda: RunConfig(benchmarks=()), "benchmarks"),
        (lambda: RuntimeConfig(backend="nope"), "runtime.backend"),
        (lambda: RuntimeConfig(threads=0), "runtime.threads"),
        (lambda: RuntimeConfig(device="tpu"), "runtime.device"),
        (lambda: RuntimeConfig(micro_batch=-1), "runtime.micro_batch"),
        (lambda: RuntimeConfig(train_forward="fast"), "runtime.train_forward"),
        (lambda: ModelConfig(kind="hf"), "model.path"),
        (lambda: ModelConfig(kind="hf", path="/definitely/not/a/folder/genenv").check_paths(), "model.path"),
        (lambda: ModelConfig(kind="gguf"), "model.kind"),
        (lambda: ModelConfig(hidden_size=30, num_heads=4), "model.num_heads"),
        (lambda: SimulatorConfig(mode="bogus"), "simulator.mode"),
        (lambda: AgentConfig(rollouts=1), "agent.rollouts"),
        (lambda: AgentConfig(clip=1.0), "agent.clip"),
    ],
    ids=[
        "alpha0",
        "alpha1",
        "alpha1.5",
        "kmin-neg",
        "beta0",
        "reward",
        "benchmark",
        "no-benchmarks",
        "backend",
        "threads",
        "device",
        "micro-batch",
        "train-forward",
        "hf-no-path",
        "hf-missing-path",
        "model-kind",
        "heads",
        "sim-mode",
        "rollouts",
        "clip",
    ],
)
def test_bad_values_raise_naming_the_field(build, field):
    with pytest.raises(ConfigError) as err:
        build()
    assert err.value.field == field
    assert f"'{field}'" in str(err.value)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"curriculum.alpha": 0}, "curriculum.alpha"),
        ({"curriculum.alpha": 1.5}, "curriculum.alpha"),
        ({"curriculum.k_min": -0.1}, "curriculum.k_min"),
        ({"benchmarks": ["nope"]}, "benchmarks"),
        ({"model.kind": "hf"}, "model.path"),
        ({"simulator.mode": "bogus"}, "simulator.mode"),
        ({"agent.rollout": 3}, "agent.rollout"),
        ({"epochs": "six"}, "epochs"),
    ],
)
def test_bad_overrides_raise_naming_the_field(overrides, field):
    with pytest.raises(ConfigError) as err:
        load_config("micro", overrides=overrides)
    assert err.value.field == field
    assert field in str(err.value)


def test_hf_model_with_existing_folder_is_accepted(tmp_path):
    cfg = ModelConfig(kind="hf", path=str(tmp_path))
    assert cfg.path == str(tmp_path)


@pytest.mark.parametrize(
    "text, field, words",
    [
        ("[agent]\nrollout = 3\n", "agent.rollout", ("unknown setting", "rollouts")),  # the known names are listed
        ('epochs = "six"\n', "epochs", ("integer",)),
    ],
)
def test_a_bad_key_or_type_in_toml_names_the_dotted_field(tmp_path, text, field, words):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config("micro", path)
    assert err.value.field == field
    assert all(word in str(err.value) for word in words)


def test_bool_is_not_an_integer(tmp_path):
    path = write(tmp_path, "[agent]\nrollouts = true\n")
    with pytest.raises(ConfigError) as err:
        load_config("micro", path)
    assert err.value.field == "agent.rollouts"


def test_section_must_be_a_table(tmp_path):
    path = write(tmp_path, "agent = 3\n")
    with pytest.raises(ConfigError) as err:
        load_config("micro", path)
    assert err.value.field == "agent"


def test_invalid_toml_syntax_names_the_file(tmp_path):
    path = write(tmp_path, "[agent\nrollouts = = 3\n")
    with pytest.raises(ConfigError) as err:
        load_config("micro", path)
    assert err.value.field == str(path)
    assert "invalid TOML" in str(err.value)


def test_paths_are_checked_where_a_run_starts_not_where_a_saved_config_is_read(tmp_path):
    """A session's config.toml from another machine reads here (reports, the console's list); starting a run
    from it (load_config, loop.run) names the missing path."""
    from genenv_engine.config import config_from_file, save_config, saved_config

    config = load_config("micro").with_overrides({"data_dirs": {"bfcl": str(tmp_path)}})
    save_config(config, tmp_path / "config.toml")
    moved = (tmp_path / "config.toml").read_text().replace(str(tmp_path), "/elsewhere/genenv/data")
    (tmp_path / "config.toml").write_text(moved)
    read = config_from_file(tmp_path / "config.toml")
    assert read.data_dirs == {"bfcl": "/elsewhere/genenv/data"}
    with pytest.raises(ConfigError) as err:
        read.check_paths()
    assert err.value.field == "data_dirs.bfcl" and "/elsewhere/genenv/data" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_config(None, tmp_path / "config.toml")
    assert err.value.field == "data_dirs.bfcl"
    (tmp_path / "config.toml").write_text("future = 3\n" + moved.replace("[agent]", "[agent]\nwarp = 9", 1))
    kept, unknown = saved_config(tmp_path / "config.toml")
    assert unknown == {"agent.warp": 9, "future": 3}
    assert kept.agent == config.agent and kept.data_dirs == read.data_dirs
    with pytest.raises(ConfigError):
        config_from_file(tmp_path / "config.toml")  # strict: a run never starts on settings it does not know


def test_missing_config_file_names_the_file(tmp_path):
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError) as err:
        load_config("micro", path)
    assert err.value.field == str(path)
    assert "not found" in str(err.value)


def test_unknown_preset_argument(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config("huge")
    assert err.value.field == "preset"
    assert "huge" in str(err.value)


def test_unknown_preset_named_in_file(tmp_path):
    path = write(tmp_path, 'preset = "huge"\n')
    with pytest.raises(ConfigError) as err:
        load_config(None, path)
    assert err.value.field == "preset"


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError):
        CurriculumConfig(alpha=2.0)


# --- save / load / overrides ----------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["tiny", "micro"])
def test_save_then_config_from_file_roundtrips(tmp_path, preset):
    original = load_config(preset)
    path = tmp_path / "config.toml"
    save_config(original, path)
    again = config_from_file(path)
    assert again == original
    assert isinstance(again.benchmarks, tuple)
    assert not (tmp_path / "config.tmp").exists()  # the temp file was renamed away


def test_roundtrip_keeps_a_non_default_hf_path_and_overrides(tmp_path):
    original = load_config("micro").with_overrides(
        {
            "curriculum.alpha": 0.3,
            "curriculum.beta": 8,
            "model.kind": "hf",
            "model.path": str(tmp_path),
            "simulator.mode": "frozen",
            "agent.drop_zero_variance": False,
            "seed": 7,
        }
    )
    path = tmp_path / "config.toml"
    save_config(original, path)
    again = config_from_file(path)
    assert again == original
    assert again.curriculum.alpha == 0.3
    assert again.curriculum.beta == 8.0 and isinstance(again.curriculum.beta, float)
    assert again.model.path == str(tmp_path)
    assert again.simulator.mode == "frozen"
    assert again.agent.drop_zero_variance is False
    assert again.seed == 7


def test_with_overrides_changes_only_the_named_field():
    base = load_config("micro")
    changed = base.with_overrides({"curriculum.alpha": 0.3})
    assert changed.curriculum.alpha == 0.3
    assert base.curriculum.alpha == 0.5  # frozen original untouched
    assert changed == dataclasses.replace(base, curriculum=dataclasses.replace(base.curriculum, alpha=0.3))


def test_with_overrides_splits_comma_strings_into_tuples():
    cfg = load_config("micro").with_overrides({"benchmarks": "bfcl, apibank"})
    assert cfg.benchmarks == ("bfcl", "apibank")


def test_benchmark_lists_reject_repeats_and_expand_all():
    with pytest.raises(ConfigError) as err:
        load_config("micro").with_overrides({"benchmarks": "bfcl, bfcl"})
    assert err.value.field == "benchmarks" and "twice" in str(err.value)
    cfg = load_config("micro").with_overrides({"benchmarks": "all"})
    assert cfg.benchmarks == ("bfcl", "apibank", "alfworld", "bamboogle", "travelplanner")


def test_load_config_precedence_preset_file_overrides(tmp_path):
    path = write(tmp_path, ("epochs = 5\n[curriculum]\nalpha = 0.4\nk_min = 0.2\n[agent]\nrollouts = 6\n"))
    cfg = load_config("micro", path, {"curriculum.alpha": 0.3, "seed": 3})
    # overrides beat the file
    assert cfg.curriculum.alpha == 0.3
    assert cfg.seed == 3
    # the file beats the preset
    assert cfg.epochs == 5  # micro says 2
    assert cfg.agent.rollouts == 6  # micro says 4
    assert cfg.curriculum.k_min == 0.2
    # untouched preset values survive the merge inside a section the file also sets
    assert cfg.agent.max_new_tokens == 24
    assert cfg.agent.minibatch == 16
    assert cfg.model.hidden_size == 32
    assert cfg.preset == "micro"


def test_preset_argument_beats_the_preset_named_in_the_file(tmp_path):
    path = write(tmp_path, 'preset = "tiny"\n')
    assert load_config("micro", path).preset == "micro"
    assert load_config(None, path).preset == "tiny"
    assert load_config(None, path).model.hidden_size == 128


# --- documentation --------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
def test_every_field_has_a_docstring(cls):
    docs = field_docs(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    assert sorted(docs) == sorted(names)
    for name in names:
        assert docs[name].strip(), f"{cls.__name__}.{name} has an empty docstring"


def test_field_docs_reads_the_literal_under_the_field():
    assert field_docs(CurriculumConfig)["alpha"] == (
        "Target success rate of generated tasks (the zone of proximal development)."
    )


def test_curriculum_docstring_warns_that_beta_2_gives_flat_weights():
    doc = " ".join(CurriculumConfig.__doc__.split())
    assert "beta = 2" in doc
    assert "nearly flat" in doc


def test_curriculum_filter_reward_and_per_benchmark_alpha_are_checked(tmp_path):
    from genenv_engine.config import ConfigError, load_config

    cfg = load_config("micro", overrides={"curriculum.alpha_by_benchmark": {"bfcl": 0.3}, "curriculum.filter": "none"})
    assert cfg.curriculum.alpha_for("bfcl") == 0.3 and cfg.curriculum.alpha_for("apibank") == 0.5
    assert cfg.curriculum.keeps(0.95, "bfcl")
    path = tmp_path / "c.toml"
    path.write_text('[curriculum]\nreward = "agent0"\nalpha_by_benchmark = { bfcl = 0.4 }\n')
    assert load_config("micro", path).curriculum.alpha_for("bfcl") == 0.4
    for bad, message in (
        ({"curriculum.filter": "top"}, "must be one of band, none"),
        ({"curriculum.reward": "zpd"}, "must be one of alpha, uniform, agent0"),
        ({"curriculum.alpha_by_benchmark": {"bfcl": 1.5}}, "must be in \\(0, 1\\)"),
        ({"curriculum.alpha_by_benchmark": {"bfcl": "half"}}, "must be a table of numbers"),
    ):
        with pytest.raises(ConfigError, match=message):
            load_config("micro", overrides=bad)


def test_ray_settings_are_checked_and_pick_the_batch_size():
    from genenv_engine.config import DEFAULT_RAY_BATCH, ConfigError, load_config

    assert load_config("micro").ray == RayConfig() and load_config("micro").rollout_batch_tasks() == 0
    assert load_config("micro", overrides={"ray.address": "127.0.0.1:6379"}).rollout_batch_tasks() == DEFAULT_RAY_BATCH
    assert load_config("micro").ray.call_timeout == 0.0 and load_config("micro").runtime.generate_batch == 0
    for key, value in (
        ("ray.workers", 0),
        ("runtime.rollout_batch", -1),
        ("ray.address", "local host"),
        ("runtime.generate_batch", -1),
        ("ray.validate_batch", 0),
        ("ray.call_timeout", -1.0),
    ):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as err:
            load_config("micro", overrides={key: value})
        assert err.value.field == key


# --- the [ray] table and the old top-level spelling -------------------------------------------------------

OLD_RAY = {"ray": "local", "ray_workers": 3, "validate_batch": 5, "ray_call_timeout": 7.0}
NEW_RAY = RayConfig(address="local", workers=3, validate_batch=5, call_timeout=7.0)


def test_the_ray_table_reads_from_toml_and_saves_as_a_table(tmp_path):
    path = write(tmp_path, '[ray]\naddress = "local"\nworkers = 3\nvalidate_batch = 5\ncall_timeout = 7\n')
    cfg = load_config("micro", path)
    assert cfg.ray == NEW_RAY
    save_config(cfg, tmp_path / "config.toml")
    text = (tmp_path / "config.toml").read_text()
    assert "[ray]" in text and "ray_workers" not in text
    assert config_from_file(tmp_path / "config.toml") == cfg


def test_old_top_level_ray_keys_in_a_toml_file_are_read_with_a_warning_naming_the_new_key(tmp_path):
    path = write(tmp_path, 'ray = "local"\nray_workers = 3\nvalidate_batch = 5\nray_call_timeout = 7.0\n')
    with pytest.warns(RenamedSettingWarning) as caught:
        cfg = load_config("micro", path)
    assert cfg.ray == NEW_RAY
    messages = " ".join(str(w.message) for w in caught)
    for old, new in (
        ("ray_workers", "ray.workers"),
        ("validate_batch", "ray.validate_batch"),
        ("ray_call_timeout", "ray.call_timeout"),
        ("'ray'", "ray.address"),
    ):
        assert old in messages and new in messages
    assert issubclass(RenamedSettingWarning, DeprecationWarning)


def test_old_ray_keys_as_overrides_and_set_are_read_with_a_warning():
    with pytest.warns(RenamedSettingWarning) as caught:
        cfg = load_config("micro", overrides=OLD_RAY)
    assert cfg.ray == NEW_RAY and len(caught) == 4 and all("overrides" in str(w.message) for w in caught)
    with pytest.warns(RenamedSettingWarning, match="ray.address"):
        moved = cfg.with_overrides({"ray": "10.0.0.1:6379"})
    assert moved.ray == dataclasses.replace(NEW_RAY, address="10.0.0.1:6379")  # the other [ray] values stay


def test_old_ray_key_beside_its_new_spelling_is_an_error(tmp_path):
    path = write(tmp_path, "ray_workers = 3\n[ray]\nworkers = 4\n")
    with pytest.raises(ConfigError, match="old spelling of ray.workers") as err:
        load_config("micro", path)
    assert err.value.field == "ray_workers"


SAVED_BEFORE_RUNTIME = Path(__file__).parents[2] / "fixtures" / "configs" / "saved-before-runtime.toml"
"""A session's config.toml as `save_config` wrote it before the ``[runtime]`` table: the smol preset for 3 epochs,
every setting now in ``[runtime]`` away from its default (threads, device, micro-batches, log-prob chunks,
checkpointing, the static and fused switches under ``[model]``; the batch sizes and backend at the top level), 3
Ray workers and vLLM chunks of 64."""
MOVED_TO_RUNTIME = RuntimeConfig(
    threads=1,
    device="cpu",
    micro_batch=2,
    logprob_chunk=512,
    gradient_checkpointing=True,
    static_decode=True,
    train_forward="fused",
    rollout_batch=4,
    generate_batch=2,
)


def saved_before_runtime() -> RunConfig:
    """The config built today that `SAVED_BEFORE_RUNTIME` describes."""
    made = load_config(
        "smol", overrides={"epochs": 3, "ray.workers": 3, "vllm.chunk_size": 64, "model.sft_length_groups": 0}
    )  # the smol recipe then (its SFT batches ungrouped)
    return dataclasses.replace(made, runtime=MOVED_TO_RUNTIME)


def test_a_session_saved_before_the_runtime_table_loads_into_it(tmp_path):
    """Its model and top-level runtime settings land in ``[runtime]`` (a warning naming each old and new key), as
    `config_from_file`, `saved_config` and `load_config` read it; saved again, it has today's layout."""
    from genenv_engine.config import RENAMED_SETTINGS, saved_config

    text = SAVED_BEFORE_RUNTIME.read_text()
    assert "[runtime]" not in text and "threads = 1" in text and "rollout_batch = 4" in text
    want = saved_before_runtime()
    with pytest.warns(RenamedSettingWarning) as caught:
        assert config_from_file(SAVED_BEFORE_RUNTIME) == want
    messages = [str(w.message) for w in caught]
    moved = {old: new for old, new in RENAMED_SETTINGS.items() if new.startswith("runtime.")}
    assert len(messages) == len(moved)
    for old, new in moved.items():
        assert any(f"{old!r} is now {new!r}" in m and str(SAVED_BEFORE_RUNTIME) in m for m in messages), old
    with pytest.warns(RenamedSettingWarning):
        assert saved_config(SAVED_BEFORE_RUNTIME) == (want, {})
    with pytest.warns(RenamedSettingWarning):
        assert load_config(None, SAVED_BEFORE_RUNTIME) == want
    save_config(want, tmp_path / "config.toml")
    again = (tmp_path / "config.toml").read_text()
    assert "\n[runtime]\nthreads = 1\n" in again and "rollout_batch" not in again.split("[runtime]")[0]
    assert config_from_file(tmp_path / "config.toml") == want  # no warning: today's keys


def test_a_session_saved_before_the_ray_and_runtime_tables_reads_as_the_same_run(tmp_path):
    """The same config with its Ray settings at the top level, as saved before the ``[ray]`` table."""
    import re
    import tomllib

    import tomli_w

    from genenv_engine.config import saved_config

    old = tomllib.loads(SAVED_BEFORE_RUNTIME.read_text())
    del old["ray"]
    old.update(OLD_RAY)
    text = tomli_w.dumps(old)
    assert "\n[ray]" not in text and "ray_workers = 3" in text
    (tmp_path / "config.toml").write_text(text)
    want = dataclasses.replace(saved_before_runtime(), ray=NEW_RAY)
    with pytest.warns(RenamedSettingWarning, match=re.escape(str(tmp_path / "config.toml"))):
        assert config_from_file(tmp_path / "config.toml") == want
    with pytest.warns(RenamedSettingWarning):
        assert saved_config(tmp_path / "config.toml") == (want, {})
    with pytest.warns(RenamedSettingWarning):
        assert load_config(None, tmp_path / "config.toml") == want


def test_old_runtime_spellings_in_a_toml_file_and_as_set_overrides_are_read_with_a_warning(tmp_path):
    from genenv_engine.config import parse_sets

    path = write(tmp_path, 'backend = "hf"\nrollout_batch = 4\n[model]\nthreads = 1\nmicro_batch = 3\n')
    with pytest.warns(RenamedSettingWarning) as caught:
        cfg = load_config("micro", path)
    assert len(caught) == 4 and "'model.threads' is now 'runtime.threads'" in " ".join(str(w.message) for w in caught)
    assert (cfg.runtime.threads, cfg.runtime.micro_batch, cfg.runtime.rollout_batch) == (1, 3, 4)
    sets = parse_sets(["model.threads=1", "generate_batch=2", "model.static_decode=true", "backend=hf"])
    with pytest.warns(RenamedSettingWarning) as caught:
        cfg = load_config("smol", overrides=sets)
    assert len(caught) == 4 and all("overrides" in str(w.message) for w in caught)
    assert cfg.runtime == RuntimeConfig(
        threads=1, generate_batch=2, static_decode=True, micro_batch=4, logprob_chunk=1024
    )
    with pytest.warns(RenamedSettingWarning, match="runtime.micro_batch"):
        assert cfg.with_overrides({"model.micro_batch": 0}).runtime.micro_batch == 0  # smol's 4 replaced
    with pytest.raises(ConfigError, match="old spelling of runtime.threads") as err:
        load_config("micro", overrides={"model.threads": 1, "runtime.threads": 2})
    assert err.value.field == "model.threads"


def test_cli_ray_flag_sets_the_ray_address():
    from genenv_engine.interfaces.cli import _overrides, build_parser

    args = build_parser().parse_args(["run", "--preset", "micro", "--ray", "local"])
    assert load_config("micro", overrides=_overrides(args)).ray == RayConfig(address="local")


# --- settings that depend on another ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field", "needs"),
    [
        ({"agent.unseen_tasks": 300}, "agent.unseen_tasks", "agent.base_source = 'unseen'"),
        ({"model.path": "/tmp"}, "model.path", "model.kind = 'hf'"),
        ({"model.hub_download": True}, "model.hub_download", "model.kind = 'hf'"),
    ],
    ids=["unseen_tasks", "path", "hub_download"],
)
def test_a_setting_changed_without_the_one_it_depends_on_is_an_error(overrides, field, needs):
    with pytest.raises(ConfigError) as err:
        load_config("micro", overrides=overrides)
    assert err.value.field == field and needs in str(err.value)


@pytest.mark.parametrize(
    "overrides",
    [
        {"agent.unseen_tasks": 300, "agent.base_source": "unseen"},
        {"agent.unseen_tasks": 5000},
        {"model.kind": "hf", "model.path": "/tmp", "model.hub_download": True},
    ],
)
def test_a_dependent_setting_is_accepted_with_its_parent_on_or_at_its_default(overrides):
    load_config("micro", overrides=overrides)


def test_per_benchmark_alpha_must_name_a_known_benchmark():
    with pytest.raises(ConfigError) as err:
        load_config("micro", overrides={"curriculum.alpha_by_benchmark": {"bfcll": 0.4}})
    assert err.value.field == "curriculum.alpha_by_benchmark.bfcll"
    assert load_config("micro", overrides={"curriculum.alpha_by_benchmark": {"apibank": 0.4}})  # known, not enabled


# --- the variants' settings and field docs -----------------------------------------------------------------


def _section(dotted: str):
    """(dataclass, field name) of a dotted setting name."""
    cls, *parents, leaf = RunConfig, *dotted.split(".")
    for part in parents:
        cls = {f.name: f for f in dataclasses.fields(cls)}[part].default_factory
    return cls, leaf


def test_variant_fields_name_real_settings_whose_docs_say_variant():
    assert len(VARIANT_FIELDS) == len(set(VARIANT_FIELDS))
    for dotted in VARIANT_FIELDS:
        cls, name = _section(dotted)
        assert name in {f.name for f in dataclasses.fields(cls)}, dotted
        assert field_docs(cls)[name].startswith("Variant:"), dotted
    prefix = {
        "RunConfig": "",
        "ModelConfig": "model.",
        "WarmStartConfig": "warm_start.",
        "SimulatorConfig": "simulator.",
        "AgentConfig": "agent.",
        "CurriculumConfig": "curriculum.",
        "VLLMConfig": "vllm.",
        "RayConfig": "ray.",
        "RuntimeConfig": "runtime.",
    }
    marked = {
        prefix[cls.__name__] + name
        for cls in ALL_CLASSES
        for name, doc in field_docs(cls).items()
        if doc.startswith("Variant")
    }
    assert marked == set(VARIANT_FIELDS)


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
def test_field_docs_describe_settings_not_lab_results(cls):
    import re

    lab = re.compile(
        r"\bseeds? \d|\bsessions? \d|\bissues? \d|\b20\d\d-\d\d|held-out \d|this machine|\d\.\d+ vs ", re.IGNORECASE
    )
    for name, doc in field_docs(cls).items():
        assert not lab.search(doc), f"{cls.__name__}.{name}: {lab.search(doc).group()!r}"
    assert not lab.search(cls.__doc__ or "")


def test_preset_comments_describe_settings_not_lab_results():
    import re

    from genenv_engine.config import PRESET_DIR

    lab = re.compile(
        r"\bseeds? \d|\bsessions? \d|\bissues? \d|\b20\d\d-\d\d|held-out [LD]?\d|this machine|"
        r"measured on|\bSE\b|docs/|\d\.\d+ GB",
        re.IGNORECASE,
    )
    for path in sorted(PRESET_DIR.glob("*.toml")):
        for line in path.read_text().splitlines():
            comment = line.partition("#")[2]
            assert not lab.search(comment), f"{path.name}: {line}"


def test_a_preset_extends_another_and_a_loop_or_unknown_parent_is_a_clear_error(tmp_path, monkeypatch):
    from genenv_engine.config import loading

    (tmp_path / "base.toml").write_text('preset = "base"\nepochs = 3\n[agent]\nlr = 1e-4\nrollouts = 4\n')
    (tmp_path / "child.toml").write_text('extends = "base"\npreset = "child"\n[agent]\nlr = 2e-4\n')
    (tmp_path / "a.toml").write_text('extends = "b"\n')
    (tmp_path / "b.toml").write_text('extends = "a"\n')
    (tmp_path / "orphan.toml").write_text('extends = "nowhere"\n')
    monkeypatch.setattr(loading, "PRESET_DIR", tmp_path)
    child = load_config("child")
    assert (child.preset, child.epochs, child.agent.lr, child.agent.rollouts) == ("child", 3, 2e-4, 4)
    with pytest.raises(ConfigError, match="loop: a -> b -> a"):
        load_config("a")
    with pytest.raises(ConfigError, match="unknown preset 'nowhere'"):
        load_config("orphan")


def test_a_model_path_that_holds_no_model_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ConfigError, match="is not a model folder") as err:
        ModelConfig(kind="hf", path=str(tmp_path)).check_paths()
    assert err.value.field == "model.path"
    with pytest.raises(ConfigError, match="model.agent_path.*is not a model folder"):
        load_config("micro", overrides={"model.agent_path": str(tmp_path)})
    (tmp_path / "adapter_config.json").write_text("{}")  # a PEFT adapter folder is a role's checkpoint too
    ModelConfig(agent_path=str(tmp_path)).check_paths()
    (tmp_path / "adapter_config.json").unlink()
    (tmp_path / "config.json").write_text("{}")
    ModelConfig(kind="hf", path=str(tmp_path)).check_paths()
