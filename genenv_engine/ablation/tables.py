"""The ablation bench's numbers: every run of a bench folder collected and summarised over seeds.

`collect` reads every ``<arm>-s<seed>`` session of a bench folder (or its run record) into plain rows; `summarise`
turns them into the final table (mean and spread over seeds), the paired standard error of each arm's held-out
change on the same tasks, arm against arm on one seed's held-out tasks (`versus`: every arm against Off, GenEnv
against every other arm, a study's challenger arms against their controls, each pairing flagged when the two runs'
epoch-0 agents differ), the first epoch at which mean p-hat enters the calibration target, the data-efficiency
ratio against Static, and the simulator's validity per benchmark (`genenv_engine.ablation.validity.arm_validity`:
drafts, valid, rejections by reason).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from genenv_engine.ablation.arms import ARMS, folder_name
from genenv_engine.ablation.rescore import rescored_runs
from genenv_engine.ablation.run_records import read_record, record_path, write_record
from genenv_engine.ablation.runs import epoch0_difference, read_session, warm_start_mismatches
from genenv_engine.ablation.stats import binomial_se, by_level, data_efficiency, mean_sd, mean_series, paired_change
from genenv_engine.ablation.validity import arm_validity
from genenv_engine.core.curriculum import first_in_band


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
    return {
        "epoch0": p0,
        "final": p1,
        "final_epoch": last["epoch"],
        "delta": p1 - p0,
        "paired_se": paired[1] if paired else None,
        "by_level": levels,
        "unpaired_se": math.sqrt(binomial_se(p0, n) ** 2 + binomial_se(p1, n) ** 2),
    }


def _cumulative(run: dict[str, Any], bench: str) -> list[tuple[int, float]]:
    out, tasks = [], 0
    for row in run["epochs"]:
        tasks += row["tasks_trained"] or 0
        if bench in row["heldout"]:
            out.append((tasks, row["heldout"][bench]))
    return out


PAIRS_REFERENCE = "off"
"""The arm every other arm is compared with head to head (the paper's baseline: base data only)."""


CHALLENGERS: dict[str, tuple[str, ...] | None] = {"grounded": None, "controller": ("trained", "frozen", "unseen")}
"""Arms a study compares with others head to head (None: with every other arm), first in their pairs."""


def comparison_pairs(arms: list[str]) -> list[tuple[str, str]]:
    """Which arms the bench compares head to head: every arm against Off, each of the `CHALLENGERS` against its
    controls, and GenEnv against every other arm (a challenger already paired with it excepted).

    >>> comparison_pairs(["trained", "frozen", "off", "unseen"])
    [('trained', 'off'), ('frozen', 'off'), ('unseen', 'off'), ('trained', 'frozen'), ('trained', 'unseen')]
    >>> comparison_pairs(["frozen", "static"])
    []
    >>> comparison_pairs(["trained", "frozen", "grounded", "controller"])
    ... # doctest: +NORMALIZE_WHITESPACE
    [('grounded', 'trained'), ('grounded', 'frozen'), ('grounded', 'controller'), ('controller', 'trained'),
     ('controller', 'frozen'), ('trained', 'frozen')]
    """
    pairs = [(a, PAIRS_REFERENCE) for a in arms if a != PAIRS_REFERENCE and PAIRS_REFERENCE in arms]
    for challenger, controls in CHALLENGERS.items():
        if challenger in arms:
            pairs += [
                (challenger, b)
                for b in arms
                if b not in (challenger, PAIRS_REFERENCE)
                and (controls is None or b in controls)
                and (b, challenger) not in pairs
            ]
    if "trained" in arms:
        pairs += [
            ("trained", b)
            for b in arms
            if b not in ("trained", PAIRS_REFERENCE) and ("trained", b) not in pairs and (b, "trained") not in pairs
        ]
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
            return {
                "epoch": epoch,
                "diff": paired[0],
                "paired_se": paired[1],
                "by_level": {
                    k: {"diff": v["delta"], "paired_se": v["paired_se"], "n": v["n"]} for k, v in levels.items()
                },
            }
    return None


def level_summary(values: list[dict[str, dict[str, float]]], key: str) -> dict[str, dict[str, Any]]:
    """Per difficulty bucket, the mean and sd over seeds of ``key`` in each seed's by-level figures, with the
    seeds counted and those above zero (seeds are the unit of a claim across them).

    >>> level_summary([{"L6": {"diff": 0.1}}, {"L6": {"diff": 0.3}}, {"L6": {"diff": -0.1}}], "diff")["L6"]
    {'mean': 0.1, 'sd': 0.2, 'seeds': 3, 'positive': 2}
    """
    out: dict[str, dict[str, Any]] = {}
    for level in sorted({lv for v in values for lv in v}):
        xs = [v[level][key] for v in values if level in v and not math.isnan(v[level][key])]
        mean, sd = mean_sd(xs)
        out[level] = {
            "mean": None if mean is None else round(mean, 10),
            "sd": None if sd is None else round(sd, 10),
            "seeds": len(xs),
            "positive": sum(1 for x in xs if x > 0),
        }
    return out


def versus(runs: dict[str, dict[int, dict[str, Any]]], benchmarks: list[str]) -> list[dict[str, Any]]:
    """Every pair of `comparison_pairs` per benchmark: per seed the paired difference, then mean and sd over
    seeds and how many seeds put one arm above the other by more than twice the paired SE. A seed whose two runs
    started from different epoch-0 agents carries what differs (`epoch0_difference`) as ``epoch0_differs``
    (None when they do not), since its difference then includes theirs."""
    out = []
    for a, b in comparison_pairs([arm for arm in ARMS if arm in runs]):
        for bench in benchmarks:
            per_seed = []
            for seed in sorted(set(runs[a]) & set(runs[b])):
                h = head_to_head(runs[a][seed], runs[b][seed], bench)
                if h:
                    per_seed.append(
                        {"seed": seed, **h, "epoch0_differs": epoch0_difference(runs[a][seed], runs[b][seed])}
                    )
            if not per_seed:
                continue
            mean, sd = mean_sd([h["diff"] for h in per_seed])
            out.append(
                {
                    "a": a,
                    "b": b,
                    "benchmark": bench,
                    "per_seed": per_seed,
                    "mean": mean,
                    "sd": sd,
                    "by_level": level_summary([h["by_level"] for h in per_seed], "diff"),
                    "a_above_2se": sum(1 for h in per_seed if h["diff"] > 2 * h["paired_se"]),
                    "b_above_2se": sum(1 for h in per_seed if -h["diff"] > 2 * h["paired_se"]),
                }
            )
    return out


def summarise(runs: dict[str, dict[int, dict[str, Any]]], alpha: float, benchmarks: list[str]) -> dict[str, Any]:
    """The final table per arm and benchmark: mean and spread over seeds, plus the calibration and efficiency
    figures (first epoch in band, data-efficiency ratio against Static) and the simulator's validity per
    benchmark over epochs from 1 and all seeds (``validity``)."""
    table: dict[str, Any] = {}
    for arm, by_seed in runs.items():
        seeds = list(by_seed.values())
        row: dict[str, Any] = {"label": ARMS[arm][1], "seeds": sorted(by_seed)}
        for bench in benchmarks:
            changes = [{**c, "seed": seed} for seed, r in sorted(by_seed.items()) if (c := _change(r, bench))]
            e0, e0_sd = mean_sd([c["epoch0"] for c in changes])
            fin, fin_sd = mean_sd([c["final"] for c in changes])
            delta, delta_sd = mean_sd([c["delta"] for c in changes])
            row[bench] = {
                "epoch0": e0,
                "epoch0_sd": e0_sd,
                "final": fin,
                "final_sd": fin_sd,
                "delta": delta,
                "final_by_level": level_summary([c["by_level"] for c in changes], "after"),
                "delta_sd": delta_sd,
                "per_seed": changes,
                "seeds_up_2se": sum(1 for c in changes if c["paired_se"] and c["delta"] > 2 * c["paired_se"]),
                "seeds_up_2se_unpaired": sum(1 for c in changes if c["delta"] > 2 * c["unpaired_se"]),
            }
        gen = [r for r in seeds if any(e["p_hat"] is not None for e in r["epochs"])]
        p_series = mean_series(gen, lambda r: r["p_hat"])
        row["p_hat_by_epoch"] = [(e, m) for e, m, _ in p_series]
        row["first_epoch_in_band"] = first_in_band([(e, m) for e, m, _ in p_series], alpha)
        row["first_epoch_in_band_per_seed"] = [
            first_in_band([(e["epoch"], e["p_hat"]) for e in r["epochs"]], alpha) for r in seeds
        ]
        last = [r["epochs"][-1] for r in seeds if r["epochs"]]
        for key in (
            "p_hat",
            "calibration_error",
            "in_band_fraction",
            "valid_fraction",
            "unique_fraction",
            "pool_unique_fraction",
            "distinct_bigrams",
            "tasks_trained",
            "rollouts",
            "agent_steps",
            "zero_advantage_share",
        ):
            m, sd = mean_sd([r.get(key) for r in last])
            row[f"final_{key}"], row[f"final_{key}_sd"] = m, sd
        row["validity"] = arm_validity(seeds, benchmarks)
        table[arm] = row
    if "trained" in runs and "static" in runs:
        for bench in benchmarks:

            def curve(arm: str, bench: str = bench) -> list[tuple[int, float]]:
                series = [_cumulative(r, bench) for r in runs[arm].values()]
                n = min(len(s) for s in series) if series else 0
                return [(series[0][i][0], sum(s[i][1] for s in series) / len(series)) for i in range(n)]

            table.setdefault("_efficiency", {})[bench] = data_efficiency(curve("trained"), curve("static"))
    table["_versus"] = versus(runs, benchmarks)
    return table


def collect(
    out: Path, arms: tuple[str, ...], seeds: tuple[int, ...], rescore: int | None = None, records: Path | None = None
) -> dict[str, Any]:
    """Every arm x seed session of a bench folder, read back from its database, and the summary over seeds;
    with ``rescore``, held-out comes from the checkpoints re-scored on that many tasks
    (`genenv_engine.ablation.rescore`).

    With ``records`` (a folder of `genenv_engine.ablation.run_records`), each session read is recorded there, and an
    arm x
    seed with no session folder is read from its record if there is one.

    ``warm_start_mismatches`` lists the compared pairs of arms (`comparison_pairs`) whose runs of one seed started
    from different epoch-0 agents (`genenv_engine.ablation.runs.warm_start_mismatches`), on the held-out results
    the tables compare (re-scored ones with ``rescore``)."""
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
        shown = rescored_runs(runs, rescore)
        budgets = [{**b, "heldout_size": rescore} for b in budgets]
    if records is not None:  # after re-scoring, so that each record carries what was just re-scored
        for arm, by_seed in runs.items():
            for seed, run in by_seed.items():
                if run["_folder"] is not None:
                    write_record(records, arm, seed, run)
    summary = summarise(shown, alpha, benchmarks)
    if rescore:  # re-scored rows keep only the compared epochs; validity counts every epoch of the run
        for arm, by_seed in runs.items():
            summary[arm]["validity"] = arm_validity(list(by_seed.values()), benchmarks)
    return {
        "arms": list(arms),
        "seeds": list(seeds),
        "alpha": alpha,
        "benchmarks": benchmarks,
        "rescore": rescore,
        "warm_start_mismatches": warm_start_mismatches(shown, comparison_pairs([a for a in ARMS if a in shown])),
        "budget": budgets[0] if budgets and all(b == budgets[0] for b in budgets) else None,
        "runs": {
            arm: {str(s): {k: v for k, v in d.items() if not k.startswith("_")} for s, d in by.items()}
            for arm, by in shown.items()
        },
        "summary": summary,
    }
