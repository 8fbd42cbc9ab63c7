"""The config's three parts: the method's settings, the runtime part and the study part (``[study]``); the settings
retired with their study (the success note's switches, the steer study's and the alpha seed sampler's settings)
still load from old configs, saved sessions and run records, moved to their place now."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from genenv_engine.config import (
    RENAMED_SETTINGS,
    RETIRED_VALUES,
    ConfigError,
    RenamedSettingWarning,
    RunConfig,
    config_from_dict,
    load_config,
)

RESULTS = Path(__file__).parents[3] / "docs" / "results"


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        ({"simulator.steer": True}, "simulator.note", "steer"),
        ({"simulator.success_note": False, "simulator.prompt": "instruct"}, "simulator.note", "fixed_line"),
        ({"simulator.steer": True, "simulator.steer_hold": True}, "study.steer_hold", True),
        ({"simulator.steer": True, "simulator.steer_relabel": True}, "study.steer_relabel", True),
        ({"simulator.seed_beta": 5.0, "simulator.seed_sampling": "alpha"}, "study.seed_beta", 5.0),
    ],
    ids=["steer", "success_note", "steer_hold", "steer_relabel", "seed_beta"],
)
def test_a_retired_setting_away_from_its_default_moves_to_its_place_with_a_warning(old, new, want):
    with pytest.warns(RenamedSettingWarning) as caught:
        cfg = load_config("micro", overrides=old)
    section, leaf = new.split(".")
    got = cfg.study.get(leaf) if section == "study" else getattr(getattr(cfg, section), leaf)
    assert got == want
    assert any(f"is now {new!r}" in str(w.message) for w in caught)


@pytest.mark.parametrize("old", sorted(RETIRED_VALUES))
def test_a_retired_setting_at_its_old_default_is_dropped_without_a_word(old):
    (default,) = [value for value, new in RETIRED_VALUES[old].items() if new is None]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RenamedSettingWarning)
        cfg = load_config("micro", overrides={old: default})
    assert cfg == load_config("micro")
    assert cfg.study == {} and cfg.simulator.note == "auto"
    assert old in RENAMED_SETTINGS  # every retired setting names its place now


def test_the_old_and_new_spelling_of_one_note_together_is_an_error():
    with pytest.raises(ConfigError, match="old spelling of simulator.note"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RenamedSettingWarning)
        load_config("micro", overrides={"simulator.steer": True, "simulator.note": "steer"})


@pytest.mark.parametrize(
    ("record", "note", "study"),
    [
        ("steer/records/trained-s0.json", "steer", {}),
        ("steer/hold/records/trained-s0.json", "steer", {"steer_hold": True}),
        ("steer/all/records/trained-s0.json", "steer", {"steer_hold": True, "steer_relabel": True}),
        ("smol-l34/records/off-s0.json", "auto", {}),
    ],
)
def test_the_steer_studys_records_load_with_their_settings_in_todays_places(record, note, study):
    from genenv_engine.ablation.run_records import read_record

    run = read_record(RESULTS / record)
    assert run is not None
    cfg = run["_config"]
    assert (cfg.simulator.note, cfg.study) == (note, study)
    if "all" in record:
        assert cfg.simulator.seed_sampling == "alpha"


def test_the_study_table_takes_settings_not_tables_and_reads_back():
    cfg = load_config("micro", overrides={"study.rounds": 3, "study.levels": [1, 2]})
    assert cfg.study == {"rounds": 3, "levels": [1, 2]}
    assert config_from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError) as err:
        load_config("micro", overrides={"study": {"arm": {"x": 1}}})
    assert err.value.field == "study"


@pytest.mark.parametrize("bad", ["", "two words", "x;y"])
def test_the_note_must_name_a_strategy(bad):
    with pytest.raises(ConfigError) as err:
        load_config("micro", overrides={"simulator.note": bad})
    assert err.value.field == "simulator.note"


def test_the_engine_refuses_a_study_setting_no_package_registers(monkeypatch):
    from genenv_engine.config import STUDY_SETTINGS, check_study

    monkeypatch.setattr("genenv_engine.config.study.STUDY_SETTINGS", [])
    with pytest.raises(ConfigError, match="no installed package registers study settings") as err:
        check_study(RunConfig(study={"steer_hold": True}))
    assert err.value.field == "study.steer_hold"
    check_study(RunConfig())  # an empty table needs nobody
    assert STUDY_SETTINGS is not None
