"""The default first run's warm start (tiny preset, seed 0; the `five` preset's seed 0 ships too) shipped inside
the package: used only for its exact
cache key and only when every file verifies against its manifest's sha256, installed into the warm-start cache
so that a run finds it cached, and equal to what the training path gives (same info, same epoch-0 held-out).

When the warm-start recipe changes, a shipped preset's key moves and the first test here fails until its shipped
entry is rebuilt with ``make shipped-warmstart PRESET=<preset>``."""

from __future__ import annotations

import json
import shutil
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from genenv_engine.config import load_config
from genenv_engine.environments import get_environment
from genenv_engine.method.loop import run
from genenv_engine.storage.session import Session
from genenv_engine.training import warmstart
from genenv_engine.training.models import DONE

TINY = load_config("tiny")
KEY = warmstart.cache_key(TINY)
SHIPPED = warmstart.SHIPPED_ROOT / KEY
SHIPPED_PRESETS = ("tiny", "five")
"""The presets whose seed-0 warm start ships: the default first run's, and the five-benchmark preset's (80 minutes
to train on a slow 2-core CPU)."""
REBUILD = (
    "the warm-start recipe or the {preset} preset changed: rebuild its shipped warm start with "
    "`make shipped-warmstart PRESET={preset}`"
)


class Trained(Exception):
    """Raised by a stubbed training step: the run went on to train its warm start."""


def manifest(folder: Path = SHIPPED) -> dict:
    return json.loads((folder / warmstart.MANIFEST).read_text())


def stub_training(monkeypatch) -> None:
    def train(*args, **kwargs):
        raise Trained

    monkeypatch.setattr(warmstart.training, "train_agent", train)
    monkeypatch.setattr(warmstart.training, "train_simulator", train)


def shipped_copy(tmp_path: Path) -> Path:
    """A copy of the shipped entries to tamper with, standing in for the package's folder."""
    root = tmp_path / "shipped"
    shutil.copytree(warmstart.SHIPPED_ROOT, root)
    return root


def entries(cache: Path) -> list[str]:
    folder = cache / "warmstart"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("preset", SHIPPED_PRESETS)
def test_each_shipped_warm_start_has_its_presets_current_key(preset):
    config = load_config(preset)
    key = warmstart.cache_key(config)
    shipped = sorted(p.name for p in warmstart.SHIPPED_ROOT.iterdir() if p.is_dir())
    assert key in shipped, REBUILD.format(preset=preset)
    m = manifest(warmstart.SHIPPED_ROOT / key)
    assert (m["key"], m["preset"], m["seed"], m["warm_start_version"]) == (
        key,
        preset,
        0,
        warmstart.WARM_START_VERSION,
    ), REBUILD.format(preset=preset)
    assert m["heldout_tasks"] == config.heldout_size and set(m["heldout"]) == set(config.benchmarks)
    assert warmstart.shipped_problems(warmstart.SHIPPED_ROOT / key) == []


def test_nothing_else_is_shipped():
    shipped = sorted(p.name for p in warmstart.SHIPPED_ROOT.iterdir() if p.is_dir())
    assert shipped == sorted(warmstart.cache_key(load_config(p)) for p in SHIPPED_PRESETS)


def test_every_shipped_file_is_listed_and_matches_its_checksum():
    assert warmstart.shipped_problems(SHIPPED) == []
    on_disk = {p.relative_to(SHIPPED).as_posix() for p in SHIPPED.rglob("*") if p.is_file()}
    assert on_disk - {warmstart.MANIFEST} == set(manifest()["files"])
    assert {DONE, "agent.json", "rng.pt", "agent/model.safetensors", "simulator/model.safetensors"} <= on_disk
    assert manifest()["bytes"] == sum((SHIPPED / name).stat().st_size for name in manifest()["files"])


def test_the_package_data_globs_take_every_shipped_file():
    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    package = Path(warmstart.__file__).parents[2]
    globs = pyproject["tool"]["setuptools"]["package-data"]["genenv_engine"]
    taken = {p for pattern in globs for p in package.glob(pattern) if p.is_file()}
    assert {p for p in SHIPPED.rglob("*") if p.is_file()} <= taken


def test_an_empty_cache_installs_the_shipped_warm_start_and_trains_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path))
    stub_training(monkeypatch)
    events = []
    folder, info = warmstart.warm_start(TINY, {}, events.append)
    assert folder == tmp_path / "warmstart" / KEY and not events
    assert info == json.loads((SHIPPED / DONE).read_text()) and info["key"] == KEY
    for name in manifest()["files"]:
        assert (folder / name).read_bytes() == (SHIPPED / name).read_bytes(), name
    assert json.loads((folder / warmstart.SHIPPED_COPY).read_text()) == manifest()
    assert entries(tmp_path) == [KEY]  # no temp folder left
    assert warmstart.is_cached(TINY) and warmstart.cached_agent(TINY) == folder
    assert warmstart.warm_start(TINY, {}, events.append) == (folder, info)


def test_the_cache_queries_install_it_too(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path))
    assert warmstart.is_cached(TINY)
    assert entries(tmp_path) == [KEY] and (tmp_path / "warmstart" / KEY / DONE).is_file()


def test_an_agent_only_entry_of_the_key_is_completed_by_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path))
    stub_training(monkeypatch)
    half = tmp_path / "warmstart" / KEY
    (half / "agent").mkdir(parents=True)
    for name in ("agent.json", "rng.pt"):
        shutil.copyfile(SHIPPED / name, half / name)
    folder, info = warmstart.warm_start(TINY, {}, lambda e: None)
    assert folder == half and (half / "simulator" / "model.safetensors").is_file() and info["key"] == KEY


@pytest.mark.parametrize(
    "config",
    [
        replace(TINY, seed=1),
        load_config("tiny", overrides={"warm_start.agent_steps": 699}),
        load_config("micro"),
        replace(TINY, preset="tiny2"),  # the same hash under another preset's name: still not the exact key
    ],
    ids=["seed-1", "another-recipe", "micro", "another-preset-name"],
)
def test_a_run_of_another_key_never_uses_the_shipped_warm_start(tmp_path, monkeypatch, config):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path))
    stub_training(monkeypatch)
    assert warmstart.cache_key(config) != KEY
    assert warmstart.shipped_folder(config) is None
    assert not warmstart.is_cached(config) and warmstart.cached_agent(config) is None
    with pytest.raises(Trained):
        warmstart.warm_start(config, {}, lambda e: None)
    assert KEY not in entries(tmp_path)


def test_a_run_on_another_runtime_installs_the_shipped_warm_start(tmp_path, monkeypatch):
    """Threads, micro-batches and the other ``[runtime]`` settings are not part of the key."""
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path))
    stub_training(monkeypatch)
    config = load_config("tiny", overrides={"runtime.threads": 1, "runtime.micro_batch": 8})
    assert warmstart.cache_key(config) == KEY and warmstart.shipped_folder(config) == SHIPPED
    folder, _ = warmstart.warm_start(config, {}, lambda e: None)
    assert folder == tmp_path / "warmstart" / KEY


def test_a_shipped_folder_whose_manifest_names_another_key_is_not_used(tmp_path, monkeypatch):
    root = tmp_path / "shipped"
    other = replace(TINY, seed=1)
    shutil.copytree(SHIPPED, root / warmstart.cache_key(other))  # renamed: the manifest still names seed 0's key
    monkeypatch.setattr(warmstart.shipped, "SHIPPED_ROOT", root)
    assert warmstart.shipped_folder(other) is None


def test_it_is_not_used_when_the_cache_is_off_or_shipped_warm_starts_are_switched_off(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path))
    stub_training(monkeypatch)
    with pytest.raises(Trained):
        warmstart.warm_start(replace(TINY, warm_start=replace(TINY.warm_start, cache=False)), {}, lambda e: None)
    monkeypatch.setenv(warmstart.SHIPPED_ENV, "0")
    assert warmstart.shipped_folder(TINY) is None and not warmstart.is_cached(TINY)
    with pytest.raises(Trained):
        warmstart.warm_start(TINY, {}, lambda e: None)
    assert entries(tmp_path) == []


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda p: flip_a_byte(p / "agent" / "model.safetensors"), "agent/model.safetensors: sha256 does not match"),
        (lambda p: (p / "simulator" / "model.safetensors").unlink(), "simulator/model.safetensors: missing"),
        (lambda p: (p / DONE).write_text("{}"), f"{DONE}: sha256 does not match"),
    ],
    ids=["flipped-byte", "missing-file", "edited-marker"],
)
def test_a_corrupted_shipped_file_is_refused_with_a_clear_message_and_training_proceeds(
    tmp_path, monkeypatch, damage, reason
):
    root = shipped_copy(tmp_path)
    damage(root / KEY)
    monkeypatch.setattr(warmstart.shipped, "SHIPPED_ROOT", root)
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    stub_training(monkeypatch)
    with pytest.warns(UserWarning, match=rf"shipped warm start {KEY} refused, it will be trained instead .*{reason}"):
        with pytest.raises(Trained):
            warmstart.warm_start(TINY, {}, lambda e: None)
    assert entries(tmp_path / "cache") == []  # nothing installed, no temp folder left


def test_a_file_corrupted_on_its_way_into_the_cache_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path))
    copy = shutil.copyfile

    def bad_copy(src, dst):
        copy(src, dst)
        if Path(dst).name == "rng.pt":
            flip_a_byte(Path(dst))

    monkeypatch.setattr(warmstart.shipped.shutil, "copyfile", bad_copy)
    with pytest.warns(UserWarning, match="rng.pt: sha256 of the copy does not match"):
        assert warmstart.install_shipped(TINY, tmp_path / "warmstart" / KEY) is None
    assert entries(tmp_path) == []


def micro_envs(config):
    return {name: get_environment(name, config.seed) for name in config.benchmarks}


def test_a_refused_entry_trains_the_same_warm_start_as_without_one(tmp_path, monkeypatch):
    """End to end on the micro preset: ship a trained entry, then install it intact (nothing trained), and
    corrupted (refused: trained again, to the same weights)."""
    from safetensors.torch import load_file

    config = load_config("micro")
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "trained"))
    trained, info = warmstart.warm_start(config, micro_envs(config), lambda e: None)
    with pytest.raises(ValueError, match="is not the entry of"):
        warmstart.ship(trained, {"bfcl": 0.0}, replace(config, seed=1), "test", root=tmp_path / "shipped")
    shipped = warmstart.ship(trained, {"bfcl": 0.0}, config, "test", root=tmp_path / "shipped")
    assert warmstart.shipped_problems(shipped) == [] and manifest(shipped)["key"] == trained.name
    monkeypatch.setattr(warmstart.shipped, "SHIPPED_ROOT", tmp_path / "shipped")

    events = []
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "intact"))
    folder, got = warmstart.warm_start(config, micro_envs(config), events.append)
    assert got == info and not events and (folder / warmstart.SHIPPED_COPY).is_file()

    flip_a_byte(shipped / "simulator" / "model.safetensors")
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "corrupted"))
    with pytest.warns(UserWarning, match="simulator/model.safetensors: sha256 does not match"):
        folder, got = warmstart.warm_start(config, micro_envs(config), events.append)
    assert {e.role for e in events if e.kind == "WarmStartProgressed"} == {"agent", "simulator"}
    assert not (folder / warmstart.SHIPPED_COPY).exists()
    drop = ("agent_seconds", "simulator_seconds")
    assert {k: v for k, v in got.items() if k not in drop} == {k: v for k, v in info.items() if k not in drop}
    for role in ("agent", "simulator"):
        a, b = load_file(folder / role / "model.safetensors"), load_file(trained / role / "model.safetensors")
        assert a.keys() == b.keys() and all((a[n] == b[n]).all() for n in a), role


def test_the_shipped_warm_start_gives_the_epoch_zero_heldout_the_training_path_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    stub_training(monkeypatch)
    session = Session.create(replace(TINY, epochs=0), tmp_path / "session")
    run(session)
    metrics = session.store.epoch_metrics()[0]
    session.store.close()
    assert metrics["warm_start"] == json.loads((SHIPPED / DONE).read_text())
    assert metrics["heldout"] == manifest()["heldout"]
