"""Run configuration: frozen dataclasses with a docstring per field, loaded from and saved to TOML.

A run is described by one `RunConfig` built from a preset (``presets/<name>.toml``), then an
optional user TOML file, then command-line overrides. The dataclass defaults are the ``tiny``
preset; every other preset names the preset it ``extends`` and holds only the settings it changes.
Every value is checked when the dataclass is built; a bad value, or a setting changed from its
default while the setting it depends on is off, raises `ConfigError` naming the field
(``curriculum.alpha`` ...).

The config has three parts: the method's settings (the top level, ``[model]``, ``[warm_start]``, ``[simulator]``,
``[agent]``, ``[curriculum]``; those of the method's variants, its ablations, listed in `VARIANT_FIELDS`); the
runtime part (`RUNTIME_TABLES`: ``[runtime]``, ``[vllm]``, ``[ray]``), how and where a run computes, which the
warm-start cache key never reads; and the study part (``[study]``), settings that only the package registering them
reads (`genenv_engine.method.strategies.register_settings`). Keys of earlier versions (`RENAMED_SETTINGS`: the
top-level Ray settings, now ``[ray]``; the model's threads, device and execution switches and the top-level backend
and batch sizes, now ``[runtime]``; the settings retired with their study, `RETIRED_VALUES`) are still read from
TOML files, saved sessions and overrides, with a `RenamedSettingWarning`.

The modules, one job each: `choices` (the allowed values), `sections` (the method's section dataclasses,
`field_docs`), `runtime` (the runtime part's), `run` (`RunConfig`), `checks` (every value check), `tables` (nested
tables merged, renamed keys moved, a dataclass built from a table), `loading` (presets, files, saved sessions),
`overrides` (``--set`` values) and `study` (the ``[study]`` table's registered settings). Every name is importable
from this package.
"""

from __future__ import annotations

from genenv_engine.config.choices import (
    BASE_SOURCES,
    CURRICULUM_FILTERS,
    CURRICULUM_REWARDS,
    DEFAULT_RAY_BATCH,
    DTYPES,
    LEVEL_SAMPLERS,
    LLAMA_LORA_TARGETS,
    MODEL_KINDS,
    NO_SIMULATOR_MODES,
    SEED_SAMPLINGS,
    SIMULATOR_MODES,
    SIMULATOR_PROMPTS,
    TUNINGS,
)
from genenv_engine.config.loading import (
    PRESET_DIR,
    config_from_dict,
    config_from_file,
    load_config,
    preset_data,
    preset_names,
    read_toml,
    replace_config,
    save_config,
    saved_config,
)
from genenv_engine.config.overrides import parse_sets, parse_value
from genenv_engine.config.run import RunConfig
from genenv_engine.config.runtime import RUNTIME_TABLES, RayConfig, RuntimeConfig, VLLMConfig
from genenv_engine.config.sections import (
    VARIANT_FIELDS,
    AgentConfig,
    CurriculumConfig,
    ModelConfig,
    SimulatorConfig,
    WarmStartConfig,
    field_docs,
)
from genenv_engine.config.study import STUDY_SETTINGS, check_study, register_settings, study_keys, study_settings
from genenv_engine.config.tables import RENAMED_SETTINGS, RETIRED_VALUES, RenamedSettingWarning
from genenv_engine.core.errors import ConfigError

__all__ = [
    "BASE_SOURCES",
    "CURRICULUM_FILTERS",
    "CURRICULUM_REWARDS",
    "DEFAULT_RAY_BATCH",
    "DTYPES",
    "LEVEL_SAMPLERS",
    "LLAMA_LORA_TARGETS",
    "MODEL_KINDS",
    "NO_SIMULATOR_MODES",
    "PRESET_DIR",
    "RENAMED_SETTINGS",
    "RETIRED_VALUES",
    "RUNTIME_TABLES",
    "SEED_SAMPLINGS",
    "SIMULATOR_MODES",
    "SIMULATOR_PROMPTS",
    "STUDY_SETTINGS",
    "TUNINGS",
    "VARIANT_FIELDS",
    "AgentConfig",
    "ConfigError",
    "CurriculumConfig",
    "ModelConfig",
    "RayConfig",
    "RenamedSettingWarning",
    "RunConfig",
    "RuntimeConfig",
    "SimulatorConfig",
    "VLLMConfig",
    "WarmStartConfig",
    "check_study",
    "config_from_dict",
    "config_from_file",
    "field_docs",
    "load_config",
    "parse_sets",
    "parse_value",
    "preset_data",
    "preset_names",
    "read_toml",
    "register_settings",
    "replace_config",
    "save_config",
    "saved_config",
    "study_keys",
    "study_settings",
]
