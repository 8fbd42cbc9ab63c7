"""`genenv bench NAME`: each benchmark's bookkeeping on micro settings (never its speed)."""

from __future__ import annotations

import json

import pytest

from genenv_engine.interfaces.benches import ranking
from genenv_engine.interfaces.cli import main


def _bench(tmp_path, *argv: str) -> dict:
    assert main(["bench", *argv, "--out", str(tmp_path)]) == 0
    return json.loads((tmp_path / f"bench-{argv[0]}.json").read_text())


def test_ranking_exact_probability_is_under_the_bound_and_matches_monte_carlo(tmp_path):
    out = _bench(
        tmp_path, "ranking", "--pair", "0.5:0.8", "--pair", "0.4:0.05", "--n", "8", "--n", "64", "--trials", "4000"
    )
    assert out["bench"] == "ranking" and out["alpha"] == 0.5
    assert [(r["p1"], r["p2"], r["n"]) for r in out["table"]] == [
        (0.5, 0.8, 8),
        (0.5, 0.8, 64),
        (0.4, 0.05, 8),
        (0.4, 0.05, 64),
    ]
    assert out["bound_holds_everywhere"]
    for r in out["table"]:
        assert r["exact"] <= r["bound"]
        assert abs(r["empirical"] - r["exact"]) < 0.03
    # more rollouts, fewer mis-rankings
    assert out["table"][1]["exact"] < out["table"][0]["exact"]
    assert out["bound_below_one_from_n"] == {"0.5:0.8": 70, "0.4:0.05": 51}  # ⌈9·ln4 / (2·0.3²)⌉, ⌈9·ln4 / (2·0.35²)⌉
    assert len(out["machine"]["load_average"]) == 3 and len(out["machine"]["load_average_before"]) == 3


def test_ranking_exact_by_hand():
    # n = 1: p̂1, p̂2 ∈ {0, 1} are both at distance 0.5 from α = 0.5, so every outcome is a tie (mis-ranked)
    assert ranking.misrank_exact(0.6, 0.9, 1, 0.5) == pytest.approx(1.0)
    # n = 2, p1 = 0.5: p̂1 = 0.5 (prob 1/2) is never mis-ranked unless p̂2 = 0.5 too
    p2 = 0.9
    both_half = 0.5 * (2 * p2 * (1 - p2))
    assert ranking.misrank_exact(0.5, p2, 2, 0.5) == pytest.approx(0.5 + both_half)
    with pytest.raises(ValueError, match="nearer"):
        ranking.compute([(0.9, 0.5)], [4], 0.5, 0)


def test_store_bench_counts_what_each_console_page_matches(tmp_path):
    out = _bench(tmp_path, "store", "--tasks", "2000", "--repeats", "1")
    cases = {c["case"]: c for c in out["cases"]}
    assert out["tasks"] == 2000 and len(cases) == 11
    assert cases["first page"]["matches"] == 2000 and cases["first page"]["rows"] == 50
    assert cases["last page"]["rows"] == 50  # 2000 is a whole number of pages: the clamped last page is full
    assert cases["p̂ in [0.4, 0.6], epoch 50"]["matches"] == 0  # epochs 1-2 only at this size
    assert cases["search rare word"]["matches"] == 0 and cases["search rare word"]["rows"] == 0
    assert 0 < cases["search 'add' (common word)"]["matches"] < 2000
    assert {g["name"].split("_")[0] for g in out["goals"]} == {"page", "filter", "search"}
    assert out["search_ms"] == max(c["median_ms"] for c in out["cases"] if c["kind"] == "search")
    assert all(c["median_ms"] >= 0 for c in out["cases"])


def test_epoch_bench_splits_each_epoch_by_phase_with_its_work(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    out = _bench(tmp_path, "epoch", "--preset", "micro", "--epochs", "2")
    assert out["preset"] == "micro" and not out["warm_start_cached"] and "goals" not in out
    rows = out["epochs_measured"]
    assert [r["epoch"] for r in rows] == [1, 2]
    for r in rows:
        phases = r["phases"]
        assert list(phases) == [
            "generate",
            "validate",
            "rollout",
            "agent_update",
            "simulator_update",
            "heldout_eval",
            "checkpoint",
        ]
        assert r["seconds"] == pytest.approx(sum(p["seconds"] for p in phases.values()), abs=0.01)
        assert phases["generate"]["tasks"] == 4 * 2  # seeds_per_epoch x variations
        assert phases["rollout"]["rollouts"] == 4 * phases["rollout"]["tasks"] > 0
        assert phases["heldout_eval"]["tasks"] == 24
        # every generated token is counted in exactly one phase
        assert sum(p.get("tokens_generated", 0) for p in phases.values()) == r["tokens_generated"] > 0
        assert phases["agent_update"]["tokens_trained"] >= 0  # micro groups often have no reward variance
    assert out["median_seconds"] == pytest.approx(
        sorted(r["seconds"] for r in rows)[0] / 2 + sorted(r["seconds"] for r in rows)[1] / 2, abs=1e-3
    )
    assert set(out["phase_seconds"]) == set(rows[0]["phases"]) and out["peak_rss_mb"] > 100


def test_grammar_bench_times_the_masks_and_validates_both_ways(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))  # no warm start: an untrained simulator
    out = _bench(
        tmp_path,
        "grammar",
        "--preset",
        "micro",
        "--seeds",
        "3",
        "--variations",
        "2",
        "--set",
        "simulator.max_new_tokens=24",
    )
    assert out["simulator"].startswith("random weights")
    free, first, constrained = out["rows"]
    assert [r["way"] for r in out["rows"]] == ["free", "grammar, first call", "grammar"] and free["benchmark"] == "bfcl"
    assert free["drafts"] == constrained["drafts"] == 6 and free["grammar_seconds"] == 0.0
    assert (first["tokens"], first["valid_fraction"]) == (constrained["tokens"], constrained["valid_fraction"])
    assert 0 < constrained["grammar_seconds"] < constrained["seconds"]
    assert constrained["grammar_share"] == pytest.approx(
        constrained["grammar_seconds"] / constrained["seconds"], abs=0.02
    )  # both rounded to the ms
    assert sum(constrained["rejected"].values()) == round(6 * (1 - constrained["valid_fraction"]))
    (share,) = out["goals"]
    assert share["name"] == "grammar_share" and share["value"] == constrained["grammar_share"]


def test_rollouts_bench_counts_the_same_tokens_for_the_same_seed(tmp_path):
    from genenv_engine.config import ModelConfig
    from genenv_engine.training.policy import build_tiny_model
    from genenv_engine.training.tokenizer import build_byte_tokenizer

    tok = build_byte_tokenizer()
    build_tiny_model(
        ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64), tok, 0
    ).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    out = _bench(
        tmp_path,
        "rollouts",
        "--model",
        str(tmp_path / "m"),
        "--prompts",
        "6",
        "--max-new-tokens",
        "8",
        "--threads",
        "1",
        "--repeats",
        "2",
    )
    ways = {w["way"]: w for w in out["ways"]}
    assert list(ways) == ["naive", "generate batched", "engine"]
    # the engine draws what batched generate draws for the same seed: the same tokens
    assert ways["engine"]["tokens"] == ways["generate batched"]["tokens"]
    assert all(0 < w["tokens"] <= 6 * 9 for w in ways.values())  # at most 8 tokens + end-of-sequence per prompt
    assert out["ratio"] == pytest.approx(
        ways["engine"]["tokens_per_second"] / ways["naive"]["tokens_per_second"], rel=0.01
    )
    assert out["engine_threads"] == 1 and out["mean_completion_tokens"] == round(ways["engine"]["tokens"] / 6, 1)
    assert "goals" not in out  # the goal is for the tiny warm-start agent only
    # k samples per prompt, sent as adjacent repeats (the engine prefills each prompt once): still the same tokens
    out = _bench(
        tmp_path,
        "rollouts",
        "--model",
        str(tmp_path / "m"),
        "--prompts",
        "3",
        "--rollouts",
        "3",
        "--max-new-tokens",
        "8",
        "--threads",
        "1",
        "--skip-batched-generate",
    )
    assert out["rollouts"] == 3 and out["mean_completion_tokens"] == round(out["ways"][-1]["tokens"] / 9, 1)
    assert 3 < out["ways"][-1]["tokens"] <= 9 * 9


def test_grpo_bench_times_our_steps_and_says_when_trl_is_missing(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_trl(name, *args, **kwargs):
        if name == "trl" or name.startswith("trl."):
            raise ImportError("No module named 'trl'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_trl)
    out = _bench(
        tmp_path, "grpo", "--prompts", "2", "--group", "3", "--max-new-tokens", "6", "--steps", "2", "--threads", "1"
    )
    o = out["ours"]
    assert len(o["seconds"]) == len(o["tokens_generated"]) == len(o["tokens_trained"]) == 2
    assert o["median_seconds"] == round(o["seconds"][1], 4)  # the first step is a warm-up
    assert all(0 < n <= 2 * 3 * 7 for n in o["tokens_generated"])  # ≤ 6 tokens + end-of-sequence each
    assert o["tokens_trained"] == o["tokens_generated"]  # every completion token is trained on (no group skipped)
    assert len(o["generate_seconds"]) == 2 and o["median_generate_seconds"] == round(o["generate_seconds"][1], 4)
    assert o["median_update_seconds"] == round(o["seconds"][1] - o["generate_seconds"][1], 4)
    assert out["trl"]["missing"] and "bench" in out["trl"]["install"]
    assert out["ratio"] is None and out["update_ratio"] is None and out["goals"][0]["met"] is None


def test_grpo_bench_trains_the_token_that_ended_each_completion():
    from genenv_engine.backends.base import Completion
    from genenv_engine.interfaces.benches.grpo import _with_end
    from genenv_engine.training.tokenizer import build_byte_tokenizer

    tok = build_byte_tokenizer()
    eos, pad = tok.eos_token_id, tok.pad_token_id
    assert _with_end(Completion("ab", [97, 98], finished=True), 4, eos, pad) == [97, 98, eos]
    # our decoder also ends a row on a sampled padding token (and strips it): that row keeps it, never empty
    assert _with_end(Completion("", [], finished=False), 4, eos, pad) == [pad]
    assert _with_end(Completion("abcd", [97, 98, 99, 100], finished=False), 4, eos, pad) == [97, 98, 99, 100]


def test_grpo_bench_against_trl_when_installed(tmp_path):
    from genenv_engine.training.tokenizer import build_byte_tokenizer

    pytest.importorskip("trl")
    out = _bench(
        tmp_path, "grpo", "--prompts", "2", "--group", "2", "--max-new-tokens", "4", "--steps", "2", "--threads", "1"
    )
    r = out["trl"]
    assert len(r["seconds"]) == len(r["generate_seconds"]) == len(r["tokens_generated"]) == 2 and r["version"]
    assert all(0 < n <= 2 * 2 * 4 for n in r["tokens_generated"])  # ≤ 4 tokens each, the ending one included
    # the same work as ours: float32, no gradient checkpointing (TRL's defaults: bf16 autocast, checkpointing on),
    # and a row ends at the end-of-sequence or the padding token, as our decoder ends it
    assert r["settings"]["bf16"] is False and r["settings"]["gradient_checkpointing"] is False
    tok = build_byte_tokenizer()
    assert set(r["settings"]["end_tokens"]) == {tok.eos_token_id, tok.pad_token_id}
    assert out["ratio"] == round(r["median_seconds"] / out["ours"]["median_seconds"], 2)
    assert out["update_ratio"] == round(r["median_update_seconds"] / out["ours"]["median_update_seconds"], 2)


def test_warmstart_bench_trains_afresh_in_a_temporary_cache(tmp_path, monkeypatch):
    cache = tmp_path / "real-cache"
    monkeypatch.setenv("GENENV_CACHE", str(cache))
    out = _bench(tmp_path, "warmstart", "--preset", "micro", "--set", "warm_start.agent_steps=4")
    assert out["agent_steps"] == 4 and out["simulator_steps"] == 8
    assert out["seconds"] >= out["agent_seconds"] > 0 and out["simulator_seconds"] > 0
    assert out["agent_steps_per_second"] == round(4 / out["agent_seconds"], 2)
    assert set(out["heldout"]) == {"bfcl"} and 0.0 <= out["heldout"]["bfcl"] <= 1.0
    assert not cache.exists()  # the real cache was neither read nor written
    import os

    assert os.environ["GENENV_CACHE"] == str(cache)
    assert out["kept"] is None


def test_warmstart_bench_keep_fills_the_real_cache_once(tmp_path, monkeypatch):
    from genenv_engine.config import load_config
    from genenv_engine.training.warmstart import cache_key

    cache = tmp_path / "real-cache"
    monkeypatch.setenv("GENENV_CACHE", str(cache))
    entry = cache / "warmstart" / cache_key(load_config("micro", None, {"warm_start.agent_steps": 4}))
    out = _bench(tmp_path, "warmstart", "--preset", "micro", "--set", "warm_start.agent_steps=4", "--keep")
    assert out["kept"] == str(entry)
    assert (entry / "info.json").exists() and (entry / "agent").is_dir() and (entry / "simulator").is_dir()
    assert json.loads((entry / "info.json").read_text())["agent_steps"] == 4
    stamp = (entry / "info.json").stat().st_mtime_ns
    again = _bench(tmp_path, "warmstart", "--preset", "micro", "--set", "warm_start.agent_steps=4", "--keep")
    assert again["kept"] is None and again["seconds"] > 0  # trained afresh again, the cached entry left alone
    assert (entry / "info.json").stat().st_mtime_ns == stamp
