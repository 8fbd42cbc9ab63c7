"""The ablation bench's numbers: read back from each arm's session database, summarised over seeds, written out.

`collect` reads every ``<arm>-s<seed>`` session of a bench folder (its per-epoch metrics and its stored tasks)
into plain rows; `summarise` turns them into the final table (mean and spread over seeds), the paired
standard error of each arm's held-out change on the same tasks, arm against arm on one seed's held-out tasks
(`versus`: every arm against Off, GenEnv against every other arm), the first epoch at which mean p-hat enters
[alpha - 0.1, alpha + 0.1], and the data-efficiency ratio against Static. `write_outputs` writes
``ablation.json``, ``ablation.md`` and two PNG plots with all arms (calibration, held-out).

Diversity is measured here so that it can fail: besides the engine's within-epoch exact-string unique
fraction, each epoch's valid generated tasks are compared with every earlier task of the session
(near-duplicate keys: numbers masked) and scored by distinct word bigrams.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from genenv_engine.ablation import ARMS, COMPUTE_FIELDS, folder_name
from genenv_engine.curriculum import in_band
from genenv_engine.simulator import near_duplicate_key

BAND = 0.1
"""Half-width of the calibration target the bench reports against (the issue's [alpha - 0.1, alpha + 0.1])."""


def mean_sd(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (None when undefined).

    >>> mean_sd([0.5, 0.7]) == (0.6, statistics.stdev([0.5, 0.7]))
    True
    >>> mean_sd([0.5]), mean_sd([])
    ((0.5, None), (None, None))
    """
    vals = [v for v in values if v is not None]
    if not vals:
        return None, None
    return sum(vals) / len(vals), (statistics.stdev(vals) if len(vals) > 1 else None)


def paired_change(before: str, after: str) -> tuple[float, float] | None:
    """Held-out change on the same tasks (``0``/``1`` strings): mean difference and its paired standard error.

    The standard error is sd(d_i) / sqrt(n) over per-task differences d_i in {-1, 0, 1}: tasks both epochs get
    right (or wrong) add no noise, which makes it smaller than the unpaired binomial one.

    >>> paired_change("1100", "1110")
    (0.25, 0.25)
    >>> paired_change("11", "1") is None
    True
    """
    if len(before) != len(after) or not before:
        return None
    d = [int(b) - int(a) for a, b in zip(before, after)]
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var / n)


def binomial_se(p: float, n: int) -> float:
    """Standard error of a success rate measured on ``n`` tasks.

    >>> round(binomial_se(0.86, 400), 4)
    0.0173
    """
    return math.sqrt(p * (1 - p) / n)


def distinct_bigrams(texts: list[str]) -> float | None:
    """Distinct word bigrams over all bigrams of ``texts`` (1.0: no bigram repeats; near 0: one template).

    >>> distinct_bigrams(["add 3 and 5", "add 3 and 5"]), distinct_bigrams(["a b c", "c d e"])
    (0.5, 1.0)
    >>> distinct_bigrams(["a"]) is None
    True
    """
    grams = [tuple(words[i:i + 2]) for t in texts for words in [t.split()] for i in range(len(words) - 1)]
    return len(set(grams)) / len(grams) if grams else None


def _diversity(store: Any, epochs: list[int]) -> dict[int, dict[str, float | None]]:
    """Per epoch: the share of valid generated/static tasks whose near-duplicate key no earlier task of the
    session (seeds, train split, older generations) has, and their distinct-bigram fraction."""
    seen = {near_duplicate_key(r["prompt"]) for r in store.query_tasks(origin="seed", limit=10**9, order="id")}
    out: dict[int, dict[str, float | None]] = {}
    for epoch in sorted(epochs):
        rows = [r for origin in ("generated", "static")
                for r in store.query_tasks(origin=origin, epoch=epoch, valid=True, limit=10**9, order="id")]
        keys = [near_duplicate_key(r["prompt"]) for r in rows]
        fresh = [k not in seen for k in keys]
        out[epoch] = {"pool_unique_fraction": (sum(fresh) / len(fresh)) if fresh else None,
                      "distinct_bigrams": distinct_bigrams([r["prompt"].split("| Q:")[-1] for r in rows])}
        seen.update(keys)
    return out


def _epoch_row(m: dict[str, Any], rollouts: int, diversity: dict[str, float | None]) -> dict[str, Any]:
    upd = m.get("agent_update") or {}
    groups, seqs = upd.get("groups") or 0, upd.get("sequences") or 0
    return {
        "epoch": m["epoch"], "status": m.get("status"),
        "heldout": m.get("heldout") or {}, "heldout_by_level": m.get("heldout_by_level") or {},
        "p_hat": m.get("generated_success"), "calibration_error": m.get("calibration_error"),
        "in_band_fraction": m.get("in_band_fraction"), "valid_fraction": m.get("valid_fraction"),
        "unique_fraction": m.get("unique_fraction"), "difficulty_mix": m.get("difficulty_mix") or {},
        "tasks_trained": m.get("tasks_trained"), "rollouts": (m.get("tasks_trained") or 0) * rollouts,
        "agent_steps": upd.get("steps"),
        "zero_advantage_share": (1 - seqs / (groups * rollouts)) if groups else None,
        "simulator_examples": (m.get("simulator_update") or {}).get("examples"),
        "seed_levels": dict(sum((Counter(v) for v in (m.get("seed_levels_drawn") or {}).values()), Counter())),
        **diversity,
    }


def read_session(folder: Path) -> dict[str, Any] | None:
    """One arm x seed session as rows per finished epoch (None if the folder holds no session)."""
    from genenv_engine.session import Session

    if not (folder / "config.toml").exists():
        return None
    session = Session.open(folder)
    try:
        cfg = session.config
        metrics = [m for m in session.store.epoch_metrics() if m.get("status") == "done"]
        diversity = _diversity(session.store, [m["epoch"] for m in metrics if m["epoch"] > 0])
        rows = [_epoch_row(m, cfg.agent.rollouts, diversity.get(m["epoch"], {})) for m in metrics]
        correct = {m["epoch"]: m.get("heldout_correct") or {} for m in metrics}
    finally:
        session.store.close()
    levels = heldout_levels(cfg, metrics)
    budget = {name: (list(v) if isinstance(v := getattr(cfg.agent, name), tuple) else v) for name in COMPUTE_FIELDS}
    budget.update(rollouts_per_epoch=cfg.agent.tasks_per_epoch * cfg.agent.rollouts, heldout_size=cfg.heldout_size,
                  benchmarks=list(cfg.benchmarks))
    return {"alpha": cfg.curriculum.alpha, "target_epochs": cfg.epochs, "benchmarks": list(cfg.benchmarks),
            "heldout_size": cfg.heldout_size, "epochs": rows, "_correct": correct, "_levels": levels,
            "_budget": budget, "_folder": folder, "_config": cfg,
            "_warm_start": ((metrics[0].get("warm_start") or {}).get("key") if metrics and metrics[0]["epoch"] == 0
                            else None)}


def warm_start_mismatches(runs: dict[str, dict[int, dict[str, Any]]]) -> dict[str, dict[str, str]]:
    """Seeds whose arms started from different warm starts (e.g. run with other ``model.threads``, which the
    warm-start key holds): their arm-against-arm differences then include the epoch-0 agents' difference.

    >>> warm_start_mismatches({"off": {0: {"_warm_start": "a"}}, "unseen": {0: {"_warm_start": "b"}, 1: {}}})
    {'0': {'off': 'a', 'unseen': 'b'}}
    """
    by_seed: dict[int, dict[str, str]] = {}
    for arm, by in runs.items():
        for seed, run in by.items():
            if run.get("_warm_start"):
                by_seed.setdefault(seed, {})[arm] = run["_warm_start"]
    return {str(seed): keys for seed, keys in sorted(by_seed.items()) if len(set(keys.values())) > 1}


def heldout_levels(cfg: Any, metrics: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each benchmark's held-out tasks' difficulty buckets, in the order of ``heldout_correct``: rebuilt from the
    session's environments the way the loop picks them, and kept only where they reproduce the per-level rates
    the database stored (a benchmark whose data is missing here, or whose split changed, gets none)."""
    from genenv_engine.agent import heldout_tasks
    from genenv_engine.environments import get_environment

    out: dict[str, list[str]] = {}
    for name in cfg.benchmarks:
        try:
            env = get_environment(name, cfg.seed, data_dir=cfg.data_dirs.get(name))
            buckets = [env.bucket(t) for t in heldout_tasks({name: env}, cfg.heldout_size)]
        except Exception:  # noqa: BLE001 - data not on this machine: the table goes without levels
            continue
        agree = True
        for m in metrics:
            stored, correct = (m.get("heldout_by_level") or {}).get(name), (m.get("heldout_correct") or {}).get(name)
            if stored and correct:
                agree &= len(correct) == len(buckets) and all(
                    math.isclose(rate, _level_rate(correct, buckets, level)) for level, rate in stored.items())
        if agree:
            out[name] = buckets
    return out


def _level_rate(correct: str, buckets: list[str], level: str) -> float:
    picked = [c for c, b in zip(correct, buckets) if b == level]
    return picked.count("1") / len(picked) if picked else math.nan


def level_rates(correct: str, buckets: list[str]) -> dict[str, float]:
    """Success per difficulty bucket of one ``0``/``1`` held-out string.

    >>> level_rates("1101", ["L1", "L1", "L2", "L2"])
    {'L1': 1.0, 'L2': 0.5}
    """
    return {level: _level_rate(correct, buckets, level) for level in sorted(set(buckets))}


def by_level(before: str, after: str, buckets: list[str] | None) -> dict[str, dict[str, float]]:
    """The paired change of `paired_change` within each difficulty bucket (empty without buckets).

    >>> by_level("0011", "0111", ["L1", "L1", "L2", "L2"])["L1"]
    {'before': 0.0, 'after': 0.5, 'delta': 0.5, 'paired_se': 0.5, 'n': 2}
    """
    if not buckets or len(buckets) != len(before) or len(before) != len(after):
        return {}
    out = {}
    for level in sorted(set(buckets)):
        idx = [i for i, b in enumerate(buckets) if b == level]
        b, a = "".join(before[i] for i in idx), "".join(after[i] for i in idx)
        mean, se = paired_change(b, a)
        out[level] = {"before": b.count("1") / len(b), "after": a.count("1") / len(a), "delta": mean,
                      "paired_se": se, "n": len(idx)}
    return out


def _change(run: dict[str, Any], bench: str) -> dict[str, Any] | None:
    """Final minus epoch-0 held-out of one run, with paired and unpaired standard errors."""
    rows = run["epochs"]
    if len(rows) < 2 or rows[0]["epoch"] != 0:
        return None
    first, last = rows[0], rows[-1]
    p0, p1 = first["heldout"].get(bench), last["heldout"].get(bench)
    if p0 is None or p1 is None:
        return None
    before, after = run["_correct"].get(0, {}).get(bench), run["_correct"].get(last["epoch"], {}).get(bench)
    paired = paired_change(before, after) if before and after else None
    n = len(before) if before else run["heldout_size"]
    levels = by_level(before, after, run.get("_levels", {}).get(bench)) if before and after else {}
    return {"epoch0": p0, "final": p1, "final_epoch": last["epoch"], "delta": p1 - p0,
            "paired_se": paired[1] if paired else None, "by_level": levels,
            "unpaired_se": math.sqrt(binomial_se(p0, n) ** 2 + binomial_se(p1, n) ** 2)}


def first_in_band(series: list[tuple[int, float | None]], alpha: float, band: float = BAND) -> int | None:
    """First epoch whose mean p-hat lies in [alpha - band, alpha + band].

    >>> first_in_band([(1, 0.2), (2, 0.45), (3, 0.5)], 0.5)
    2
    >>> first_in_band([(1, 0.2)], 0.5) is None
    True
    """
    for epoch, p in series:
        if p is not None and in_band(p, alpha, band):
            return epoch
    return None


def data_efficiency(genenv: list[tuple[int, float]], static: list[tuple[int, float]]) -> float | None:
    """Agent training tasks GenEnv needs to reach Static's final held-out, over Static's total.

    Series are (cumulative tasks trained, held-out) per epoch, mean over seeds, epoch 0 first. None when GenEnv
    never gets there, or when Static's final held-out is not above its epoch 0 (then there is nothing to reach).

    >>> data_efficiency([(0, .5), (96, .6), (192, .7)], [(0, .5), (96, .55), (192, .6)])
    0.5
    >>> data_efficiency([(0, .5), (96, .52)], [(0, .5), (96, .6)]) is None
    True
    >>> data_efficiency([(0, .5), (96, .45)], [(0, .5), (96, .4)]) is None   # Static got worse
    True
    """
    if not static or not genenv:
        return None
    target, total = static[-1][1], static[-1][0]
    if target <= static[0][1]:
        return None
    for tasks, value in genenv[1:]:
        if value >= target - 1e-12 and total:
            return tasks / total
    return None


def _cumulative(run: dict[str, Any], bench: str) -> list[tuple[int, float]]:
    out, tasks = [], 0
    for row in run["epochs"]:
        tasks += row["tasks_trained"] or 0
        if bench in row["heldout"]:
            out.append((tasks, row["heldout"][bench]))
    return out


def _mean_series(runs: list[dict[str, Any]], key: Any) -> list[tuple[int, float | None, float | None]]:
    """Per epoch: mean and sd over the runs of ``key(row)`` (epochs every run finished)."""
    epochs = sorted(set.intersection(*[{r["epoch"] for r in run["epochs"]} for run in runs])) if runs else []
    out = []
    for e in epochs:
        vals = [key(r) for run in runs for r in run["epochs"] if r["epoch"] == e]
        m, sd = mean_sd([v for v in vals if v is not None])
        out.append((e, m, sd))
    return out


PAIRS_REFERENCE = "off"
"""The arm every other arm is compared with head to head (the paper's baseline: base data only)."""


def comparison_pairs(arms: list[str]) -> list[tuple[str, str]]:
    """Which arms the bench compares head to head: every arm against Off, and GenEnv against every other arm.

    >>> comparison_pairs(["trained", "frozen", "off", "unseen"])
    [('trained', 'off'), ('frozen', 'off'), ('unseen', 'off'), ('trained', 'frozen'), ('trained', 'unseen')]
    >>> comparison_pairs(["frozen", "static"])
    []
    """
    pairs = [(a, PAIRS_REFERENCE) for a in arms if a != PAIRS_REFERENCE and PAIRS_REFERENCE in arms]
    if "trained" in arms:
        pairs += [("trained", b) for b in arms if b not in ("trained", PAIRS_REFERENCE)]
    return pairs


def head_to_head(a_run: dict[str, Any], b_run: dict[str, Any], bench: str) -> dict[str, Any] | None:
    """Arm a minus arm b on one seed, at the last epoch both have finished (on the same held-out tasks: a seed
    fixes its held-out split), with the paired standard error; None without a common epoch after 0."""
    epochs = ({r["epoch"] for r in a_run["epochs"]} & {r["epoch"] for r in b_run["epochs"]}) - {0}
    for epoch in sorted(epochs, reverse=True):
        a, b = a_run["_correct"].get(epoch, {}).get(bench), b_run["_correct"].get(epoch, {}).get(bench)
        paired = paired_change(b, a) if a and b else None
        if paired:
            levels = by_level(b, a, a_run.get("_levels", {}).get(bench))
            return {"epoch": epoch, "diff": paired[0], "paired_se": paired[1],
                    "by_level": {k: {"diff": v["delta"], "paired_se": v["paired_se"], "n": v["n"]}
                                 for k, v in levels.items()}}
    return None


def versus(runs: dict[str, dict[int, dict[str, Any]]], benchmarks: list[str]) -> list[dict[str, Any]]:
    """Every pair of `comparison_pairs` per benchmark: per seed the paired difference, then mean and sd over
    seeds and how many seeds put one arm above the other by more than twice the paired SE."""
    out = []
    for a, b in comparison_pairs([arm for arm in ARMS if arm in runs]):
        for bench in benchmarks:
            per_seed = []
            for seed in sorted(set(runs[a]) & set(runs[b])):
                h = head_to_head(runs[a][seed], runs[b][seed], bench)
                if h:
                    per_seed.append({"seed": seed, **h})
            if not per_seed:
                continue
            mean, sd = mean_sd([h["diff"] for h in per_seed])
            out.append({"a": a, "b": b, "benchmark": bench, "per_seed": per_seed, "mean": mean, "sd": sd,
                        "a_above_2se": sum(1 for h in per_seed if h["diff"] > 2 * h["paired_se"]),
                        "b_above_2se": sum(1 for h in per_seed if -h["diff"] > 2 * h["paired_se"])})
    return out


def summarise(runs: dict[str, dict[int, dict[str, Any]]], alpha: float, benchmarks: list[str]) -> dict[str, Any]:
    """The final table per arm and benchmark: mean and spread over seeds, plus the calibration and efficiency
    figures of the issue (first epoch in band, data-efficiency ratio against Static)."""
    table: dict[str, Any] = {}
    for arm, by_seed in runs.items():
        seeds = list(by_seed.values())
        row: dict[str, Any] = {"label": ARMS[arm][1], "seeds": sorted(by_seed)}
        for bench in benchmarks:
            changes = [{**c, "seed": seed} for seed, r in sorted(by_seed.items()) if (c := _change(r, bench))]
            e0, e0_sd = mean_sd([c["epoch0"] for c in changes])
            fin, fin_sd = mean_sd([c["final"] for c in changes])
            delta, delta_sd = mean_sd([c["delta"] for c in changes])
            row[bench] = {"epoch0": e0, "epoch0_sd": e0_sd, "final": fin, "final_sd": fin_sd, "delta": delta,
                          "delta_sd": delta_sd, "per_seed": changes,
                          "seeds_up_2se": sum(1 for c in changes if c["paired_se"] and c["delta"] > 2 * c["paired_se"]),
                          "seeds_up_2se_unpaired": sum(1 for c in changes if c["delta"] > 2 * c["unpaired_se"])}
        gen = [r for r in seeds if any(e["p_hat"] is not None for e in r["epochs"])]
        p_series = _mean_series(gen, lambda r: r["p_hat"])
        row["p_hat_by_epoch"] = [(e, m) for e, m, _ in p_series]
        row["first_epoch_in_band"] = first_in_band([(e, m) for e, m, _ in p_series], alpha)
        row["first_epoch_in_band_per_seed"] = [first_in_band([(e["epoch"], e["p_hat"]) for e in r["epochs"]], alpha)
                                               for r in seeds]
        last = [r["epochs"][-1] for r in seeds if r["epochs"]]
        for key in ("p_hat", "calibration_error", "in_band_fraction", "valid_fraction", "unique_fraction",
                    "pool_unique_fraction", "distinct_bigrams", "tasks_trained", "rollouts", "agent_steps",
                    "zero_advantage_share"):
            m, sd = mean_sd([r.get(key) for r in last])
            row[f"final_{key}"], row[f"final_{key}_sd"] = m, sd
        table[arm] = row
    if "trained" in runs and "static" in runs:
        for bench in benchmarks:
            def curve(arm: str) -> list[tuple[int, float]]:
                series = [_cumulative(r, bench) for r in runs[arm].values()]
                n = min(len(s) for s in series) if series else 0
                return [(series[0][i][0], sum(s[i][1] for s in series) / len(series)) for i in range(n)]
            table.setdefault("_efficiency", {})[bench] = data_efficiency(curve("trained"), curve("static"))
    table["_versus"] = versus(runs, benchmarks)
    return table


def collect(out: Path, arms: tuple[str, ...], seeds: tuple[int, ...], rescore: int | None = None,
            records: Path | None = None) -> dict[str, Any]:
    """Every arm x seed session of a bench folder, read back from its database, and the summary over seeds;
    with ``rescore``, held-out comes from the checkpoints re-scored on that many tasks (`genenv_engine.rescore`).

    With ``records`` (a folder of `genenv_engine.run_records`), each session read is recorded there, and an arm x
    seed with no session folder is read from its record if there is one."""
    from genenv_engine.run_records import read_record, record_path, write_record

    runs: dict[str, dict[int, dict[str, Any]]] = {}
    alpha, benchmarks, budgets = 0.5, [], []
    for arm in arms:
        for seed in seeds:
            data = read_session(out / folder_name(arm, seed))
            if data is None and records is not None:
                data = read_record(record_path(records, arm, seed))
            if data is not None:
                runs.setdefault(arm, {})[seed] = data
                alpha, benchmarks = data["alpha"], data["benchmarks"]
                budgets.append(data["_budget"])
    shown = runs
    if rescore:
        from genenv_engine.rescore import rescored_runs

        shown = rescored_runs(runs, rescore)
        budgets = [{**b, "heldout_size": rescore} for b in budgets]
    if records is not None:  # after re-scoring, so that each record carries what was just re-scored
        for arm, by_seed in runs.items():
            for seed, run in by_seed.items():
                if run["_folder"] is not None:
                    write_record(records, arm, seed, run)
    summary = summarise(shown, alpha, benchmarks)
    return {"arms": list(arms), "seeds": list(seeds), "alpha": alpha, "benchmarks": benchmarks, "rescore": rescore,
            "warm_start_mismatches": warm_start_mismatches(runs),
            "budget": budgets[0] if budgets and all(b == budgets[0] for b in budgets) else None,
            "runs": {arm: {str(s): {k: v for k, v in d.items() if not k.startswith("_")} for s, d in by.items()}
                     for arm, by in shown.items()},
            "summary": summary}


def _levels_text(change: dict[str, Any], key: str = "delta") -> str:
    """`` [L1 +0.000 (0.000, n 49), …]`` for a change with per-level numbers, else ``""``."""
    levels = change.get("by_level") or {}
    return (" [" + ", ".join(f"{lv} {v[key]:+.3f} ({v['paired_se']:.3f}, n {v['n']})" for lv, v in levels.items())
            + "]") if levels else ""


def _versus_cells(pair: dict[str, Any]) -> str:
    """``s0 +0.007 (0.015) @ 8, …``: a `versus` pair's per-seed differences."""
    return ", ".join(f"s{h['seed']} {h['diff']:+.3f} ({h['paired_se']:.3f}) @ {h['epoch']}" for h in pair["per_seed"])


def _f(value: Any, sd: Any = None, digits: int = 3) -> str:
    if value is None:
        return "–"
    text = f"{value:.{digits}f}" if isinstance(value, float) else str(value)
    return f"{text} ± {sd:.{digits}f}" if isinstance(sd, float) else text


def markdown(results: dict[str, Any]) -> str:
    """The bench's tables as Markdown: the final table (mean ± sd over seeds), then per-epoch rows per arm."""
    s, benches = results["summary"], results["benchmarks"]
    lines = ["# Ablation", ""]
    if results.get("rescore"):
        lines = [f"# Ablation, held-out re-scored on {results['rescore']} tasks per benchmark", "",
                 f"Each arm × seed's saved agent checkpoints of epoch 0 and of the last epochs compared, evaluated "
                 f"greedily on the first {results['rescore']} held-out tasks (what `heldout_size = "
                 f"{results['rescore']}` would have stored: the first tasks score as the run stored them). Only "
                 "those epochs appear below.", ""]
        checks = [c for by in results["runs"].values() for run in by.values()
                  for per in (run.get("rescore_check") or {}).values() for c in per.values()]
        if checks:
            lines += [f"Check against the runs' stored held-out: {sum(c[0] for c in checks)} of "
                      f"{sum(c[1] for c in checks)} task results differ (greedy float-level ties decoded in other "
                      "batches; a session above 2 % is refused).", ""]
    budget = results.get("budget")
    if budget:
        lines += [f"Agent compute per epoch, every arm: {budget['tasks_per_epoch']} tasks × {budget['rollouts']} "
                  f"rollouts = {budget['rollouts_per_epoch']} rollouts, {budget['steps_per_epoch']} optimizer steps × "
                  f"{budget['update_epochs']} passes (lr {budget['lr']}, KL {budget['kl_coef']}); held-out "
                  f"{budget['heldout_size']} tasks per benchmark, greedy."
                  + (f" Base replay from train levels {list(budget['base_levels'])} only."
                     if budget.get("base_levels") else ""), ""]
    recorded = [folder_name(arm, int(seed)) for arm, by in results["runs"].items() for seed, run in by.items()
                if run.get("recorded")]
    if recorded:
        lines += [f"Read from run records (no session folder here; `--records`): {', '.join(recorded)}.", ""]
    for seed, keys in (results.get("warm_start_mismatches") or {}).items():
        lines += [f"**Seed {seed}'s arms started from different warm starts** ("
                  + ", ".join(f"{arm}: `{key}`" for arm, key in keys.items()) + "): their differences include the "
                  "epoch-0 agents' (run them with the same model settings, threads included).", ""]
    if results.get("bench_seconds") is not None:
        lines += [f"Wall time of this bench run: {results['bench_seconds'] / 60:.1f} min "
                  "(arms already finished are not rerun).", ""]
    lines += [f"Seeds: {', '.join(map(str, results['seeds']))}. Mean ± sd over seeds; Δ = final − epoch 0; "
              "'up > 2 SE' counts seeds whose held-out rose by more than twice the paired standard error of "
              "the change (same tasks at both epochs; unpaired binomial SE in brackets).", ""]
    for bench in benches:
        lines += [f"## {bench}", "",
                  "| arm | held-out e0 | final | Δ | seeds up > 2 SE | mean p̂ (final) | abs(p̂−α) | in band | "
                  "valid | unique (pool) | distinct bigrams | first epoch p̂ in α±0.1 (seed-mean curve) | "
                  "tasks / rollouts / steps per epoch |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for arm in results["arms"]:
            row = s.get(arm)
            if not row or bench not in row:
                continue
            b = row[bench]
            n = len(b["per_seed"])
            lines.append(
                f"| {row['label']} ({arm}) | {_f(b['epoch0'], b['epoch0_sd'])} | {_f(b['final'], b['final_sd'])} | "
                f"{_f(b['delta'], b['delta_sd'])} | {b['seeds_up_2se']}/{n} [{b['seeds_up_2se_unpaired']}/{n}] | "
                f"{_f(row['final_p_hat'], row['final_p_hat_sd'])} | {_f(row['final_calibration_error'])} | "
                f"{_f(row['final_in_band_fraction'])} | {_f(row['final_valid_fraction'])} | "
                f"{_f(row['final_pool_unique_fraction'])} | {_f(row['final_distinct_bigrams'])} | "
                f"{_f(row['first_epoch_in_band'])} (per seed: "
                f"{', '.join(_f(x) for x in row['first_epoch_in_band_per_seed'])}) | "
                f"{_f(row['final_tasks_trained'], digits=0)} / "
                f"{_f(row['final_rollouts'], digits=0)} / {_f(row['final_agent_steps'], digits=0)} |")
        eff = (s.get("_efficiency") or {}).get(bench)
        if "_efficiency" in s:
            lines += ["", "Data efficiency (agent tasks GenEnv needs to reach Static's final held-out, over Static's): "
                      + ("undefined (GenEnv never reached it, or Static's final is not above epoch 0)" if eff is None
                         else f"{eff:.2f}")]
        lines += ["", "Per seed: Δ (paired SE):", ""]
        for arm in results["arms"]:
            row = s.get(arm)
            if row and bench in row:
                cells = ", ".join(f"s{c['seed']} {c['delta']:+.3f} ({_f(c['paired_se'])})" + _levels_text(c)
                                  for c in row[bench]["per_seed"])
                lines.append(f"- {arm}: {cells}")
        lines.append("")
        pairs = [v for v in s.get("_versus", []) if v["benchmark"] == bench]
        if pairs:
            lines += ["Arm against arm on the same seed and held-out tasks, at the last epoch both finished "
                      "(paired SE per seed):", "",
                      "| arm − arm | mean ± sd over seeds | per seed: difference (paired SE) @ epoch | "
                      "seeds first above by > 2 SE | seeds second above by > 2 SE |", "|---|---|---|---|---|"]
            for v in pairs:
                n = len(v["per_seed"])
                lines.append(f"| {v['a']} − {v['b']} | {_f(v['mean'], v['sd'])} | {_versus_cells(v)} | "
                             f"{v['a_above_2se']}/{n} | {v['b_above_2se']}/{n} |")
            lines.append("")
            per_level = [f"- {v['a']} − {v['b']}, s{h['seed']} @ {h['epoch']}:" + _levels_text(h, "diff")
                         for v in pairs for h in v["per_seed"] if h.get("by_level")]
            if per_level:
                lines += ["By level (difference, paired SE, tasks):", "", *per_level, ""]
    from genenv_engine.calibration_goals import markdown as goals_markdown  # it builds on first_in_band here

    lines += goals_markdown(results["runs"], results["alpha"])
    lines += ["## Per epoch (mean over seeds)", ""]
    for arm in results["arms"]:
        by_seed = results["runs"].get(arm, {})
        if not by_seed:
            continue
        runs = list(by_seed.values())
        lines += [f"### {ARMS[arm][1]} ({arm})", "",
                  "| epoch | " + " | ".join(f"held-out {b}" for b in benches) +
                  " | mean p̂ | abs(p̂−α) | in band | valid | unique (pool) | distinct bigrams | zero-adv. groups | "
                  "tasks | steps | difficulty mix | seed levels drawn |",
                  "|---|" + "---|" * (len(benches) + 11)]
        for e, _, _ in _mean_series(runs, lambda r: r["tasks_trained"]):
            rows = [r for run in runs for r in run["epochs"] if r["epoch"] == e]

            def avg(key: str) -> Any:
                return mean_sd([r.get(key) for r in rows])
            held = [mean_sd([r["heldout"].get(b) for r in rows]) for b in benches]
            mix: dict[str, int] = {}
            drawn: Counter[str] = Counter()
            for r in rows:
                for k, v in (r["difficulty_mix"] or {}).items():
                    mix[k] = mix.get(k, 0) + v
                drawn.update(r.get("seed_levels") or {})
            lines.append(f"| {e} | " + " | ".join(_f(m, sd) for m, sd in held) + " | " +
                         " | ".join(_f(avg(k)[0]) for k in ("p_hat", "calibration_error", "in_band_fraction",
                                                             "valid_fraction", "pool_unique_fraction",
                                                             "distinct_bigrams", "zero_advantage_share")) +
                         f" | {_f(avg('tasks_trained')[0], digits=0)} | {_f(avg('agent_steps')[0], digits=0)} | "
                         + (" ".join(f"{k}:{v}" for k, v in sorted(mix.items())) or "–") + " | "
                         + (" ".join(f"{k}:{v}" for k, v in sorted(drawn.items())) or "–") + " |")
        lines.append("")
    if not results.get("rescore"):  # re-scored tables come without plots of their own
        lines += ["![calibration](calibration.png)", "", "![held-out](heldout.png)", ""]
    return "\n".join(lines)


def plots(results: dict[str, Any]) -> dict[str, bytes]:
    """Two PNGs with every arm: mean p-hat of generated tasks per epoch (band shaded) and the held-out change since
    each seed's epoch 0, mean over seeds with the spread as error bars; each arm has its own dash and width, so arms that coincide
    (trained and frozen when no batch reaches the band) stay visible."""
    from genenv_engine.reports.plots import COLORS, MARKERS, STYLES, _figure, _png

    out: dict[str, bytes] = {}
    alpha = results["alpha"]
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.axhspan(alpha - BAND, alpha + BAND, color="#2ca02c", alpha=0.12, label=f"α ± {BAND}")
    ax.axhline(alpha, color="#2ca02c", ls="--", lw=1)
    for i, arm in enumerate(results["arms"]):
        runs = [r for r in results["runs"].get(arm, {}).values()]
        series = [(e, m, sd) for e, m, sd in _mean_series(runs, lambda r: r["p_hat"]) if m is not None]
        if series:
            ax.errorbar([e for e, _, _ in series], [m for _, m, _ in series], yerr=[sd or 0 for *_, sd in series],
                        color=COLORS[i], marker=MARKERS[i], capsize=3, label=ARMS[arm][1], ls=STYLES[i % len(STYLES)],
                        lw=3.2 - 0.5 * i, ms=8 - i)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean p̂ of generated tasks")
    ax.set_ylim(0, 1)
    ax.set_title("Difficulty calibration, mean ± sd over seeds", fontsize=10)
    ax.legend(fontsize=8)
    out["calibration.png"] = _png(fig)
    benches = results["benchmarks"]
    fig = _figure(8.0, 3.6 * max(1, len(benches)))
    for j, bench in enumerate(benches):
        ax = fig.add_subplot(len(benches), 1, j + 1)
        for i, arm in enumerate(results["arms"]):
            runs = [r for r in results["runs"].get(arm, {}).values()]
            # each row's change since its own seed's epoch 0 (seeds start far apart)
            deltas = [{"epochs": [{"epoch": row["epoch"], "d": row["heldout"][bench] - run["epochs"][0]["heldout"][bench]}
                                  for row in run["epochs"] if bench in row["heldout"]]}
                      for run in runs if run["epochs"] and bench in run["epochs"][0]["heldout"]]
            series = [(e, m, sd) for e, m, sd in _mean_series(deltas, lambda r: r["d"]) if m is not None]
            if series:
                ax.errorbar([e for e, _, _ in series], [m for _, m, _ in series],
                            yerr=[sd or 0 for *_, sd in series], color=COLORS[i], marker=MARKERS[i], capsize=3,
                            label=ARMS[arm][1], ls=STYLES[i % len(STYLES)], lw=3.2 - 0.5 * i, ms=8 - i)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("epoch (0 = warm start)")
        ax.axhline(0.0, color="#7f7f7f", lw=1)
        ax.set_ylabel(f"held-out change since epoch 0 ({bench})")
        ax.set_title(f"Agent held-out minus its epoch 0, mean ± sd over seeds: {bench}", fontsize=10)
        ax.legend(fontsize=8)
    out["heldout.png"] = _png(fig)
    return out


def output_names(results: dict[str, Any]) -> tuple[str, str]:
    """The JSON and Markdown file names: ``ablation.*``, or ``rescore-<n>.*`` for re-scored held-out."""
    stem = f"rescore-{results['rescore']}" if results.get("rescore") else "ablation"
    return f"{stem}.json", f"{stem}.md"


def write_outputs(out: Path, results: dict[str, Any]) -> None:
    """``ablation.json``, ``ablation.md`` and the two plots, written into the bench folder (re-scored held-out:
    ``rescore-<n>.json`` and ``.md`` only, the plots of the full run stay)."""
    out.mkdir(parents=True, exist_ok=True)
    json_name, md_name = output_names(results)
    (out / json_name).write_text(json.dumps(results, indent=1, default=str))
    (out / md_name).write_text(markdown(results))
    if results["runs"] and not results.get("rescore"):
        for name, png in plots(results).items():
            (out / name).write_bytes(png)


def print_summary(results: dict[str, Any]) -> None:
    """The final table on the terminal (rich)."""
    from rich.console import Console
    from rich.table import Table

    s = results["summary"]
    for bench in results["benchmarks"]:
        table = Table(title=f"ablation: {bench}, seeds {','.join(map(str, results['seeds']))} (mean ± sd)")
        for col in ("arm", "held-out e0", "final", "Δ", "up>2SE", "p̂ final", "first in band", "tasks/epoch"):
            table.add_column(col)
        for arm in results["arms"]:
            row = s.get(arm)
            if not row or bench not in row:
                continue
            b = row[bench]
            table.add_row(arm, _f(b["epoch0"], b["epoch0_sd"]), _f(b["final"], b["final_sd"]),
                          _f(b["delta"], b["delta_sd"]), f"{b['seeds_up_2se']}/{len(b['per_seed'])}",
                          _f(row["final_p_hat"]), _f(row["first_epoch_in_band"]),
                          _f(row["final_tasks_trained"], digits=0))
        Console().print(table)
        pairs = [v for v in s.get("_versus", []) if v["benchmark"] == bench]
        if pairs:
            versus_table = Table(title=f"arm − arm on the same held-out tasks: {bench}")
            for col in ("pair", "mean ± sd", "per seed (paired SE) @ epoch", "first > 2SE", "second > 2SE"):
                versus_table.add_column(col)
            for v in pairs:
                n = len(v["per_seed"])
                versus_table.add_row(f"{v['a']} − {v['b']}", _f(v["mean"], v["sd"]), _versus_cells(v),
                                     f"{v['a_above_2se']}/{n}", f"{v['b_above_2se']}/{n}")
            Console().print(versus_table)
