"""The generated configuration and command-line references: committed text current, staleness detected, complete."""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from pathlib import Path

from genenv_engine import config as config_module
from genenv_engine.interfaces import reference
from genenv_engine.interfaces.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]


def test_committed_references_equal_the_generated_text():
    names = reference.stale(ROOT)
    assert names == [], f"stale: {', '.join(names)} (not what the code gives now): run `make reference`"


def _copy_references(tmp_path: Path) -> Path:
    for rel in (reference.CONFIGURATION, reference.CLI):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def test_a_changed_field_doc_makes_the_configuration_reference_stale(tmp_path, monkeypatch):
    root = tmp_path
    reference.write(root)
    assert reference.stale(root) == []
    real = config_module.field_docs

    def edited(cls):
        docs = dict(real(cls))
        if cls is config_module.CurriculumConfig:
            docs["alpha"] = "A doc changed without regenerating the reference."
        return docs

    monkeypatch.setattr(config_module, "field_docs", edited)
    assert reference.stale(root) == [reference.CONFIGURATION]
    assert reference.main(["--check", "--root", str(root)]) == 1
    reference.write(root)
    assert reference.stale(root) == []


def test_check_names_a_missing_or_edited_file(tmp_path, capsys):
    root = _copy_references(tmp_path)
    (root / reference.CLI).write_text((root / reference.CLI).read_text() + "\nhand edit\n")
    (root / reference.CONFIGURATION).unlink()
    assert reference.main(["--check", "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert reference.CLI in err and reference.CONFIGURATION in err and "make reference" in err


def _subcommand_names(parser: argparse.ArgumentParser) -> set[str]:
    names: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                names.add(name)
                names |= _subcommand_names(sub)
    return names


def test_cli_reference_names_every_subcommand_and_option():
    text = reference.cli_reference()
    parser = build_parser()
    names = _subcommand_names(parser)
    assert {"run", "resume", "bench", "ablation"} <= names  # the walk reaches nested subcommands
    missing = sorted(name for name in names if f" {name}`" not in text)
    assert missing == [], f"subcommands missing from the CLI reference: {missing}"
    for words, _, sub in reference.commands(parser):
        heading = f"## `{' '.join(words)}`"
        assert heading in text
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and action.help != argparse.SUPPRESS and flag != "--help":
                    assert f"`{flag}`" in section, f"{flag} of {' '.join(words)} is not in its section"


def test_configuration_reference_names_every_field_of_every_section():
    text = reference.configuration_reference()
    tables = reference.sections()
    assert {cls for _, cls in tables} >= {
        config_module.RunConfig,
        config_module.ModelConfig,
        config_module.AgentConfig,
        config_module.CurriculumConfig,
    }
    for name, cls in tables:
        for f in dataclasses.fields(cls):
            key = f"{name}.{f.name}" if name else f.name
            if key == reference.STUDY_FIELD:  # the study part lists its registered settings instead
                continue
            assert f"| `{key}` |" in text, f"{key} is not in the configuration reference"
    for key in config_module.study_keys():
        assert f"| `study.{key}` |" in text, f"study.{key} is not in the configuration reference"


def test_output_does_not_depend_on_the_terminal_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    narrow = reference.cli_reference()
    monkeypatch.setenv("COLUMNS", "300")
    assert reference.cli_reference() == narrow


def test_configuration_reference_lists_each_section_under_its_part():
    """The method's settings, then the runtime part (`RUNTIME_TABLES`), then the study part (``[study]``, the
    registered study settings), each section under its own part."""
    text = reference.configuration_reference()
    assert [heading for heading, _ in reference.PARTS] == [
        "The method's settings",
        "The runtime part",
        "The study part",
    ]
    method, rest = text.split("\n## The method's settings\n", 1)[1].split("\n## The runtime part\n", 1)
    runtime, study = rest.split("\n## The study part\n", 1)
    for name in config_module.RUNTIME_TABLES:
        assert f"### `[{name}]`" in runtime and f"### `[{name}]`" not in method, name
    for name in ("model", "warm_start", "simulator", "agent", "curriculum"):
        assert f"### `[{name}]`" in method and f"### `[{name}]`" not in runtime, name
    assert "### Top level" in method and "| `study` |" not in method
    assert "### `[study]`: `genenv_lab.settings.StudySettings`" in study
    for key in ("steer_hold", "steer_relabel", "seed_beta"):
        assert f"| `study.{key}` |" in study and f"study.{key}" not in method + runtime, key
