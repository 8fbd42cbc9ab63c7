"""The ablation bench's tables as Markdown (``ablation.md``, ``rescore-<n>.md``) and their cell formats; the
training-signal table per epoch comes from `genenv_engine.ablation.signals`.

A pairing of two arms on one seed whose epoch-0 agents differ (`genenv_engine.ablation.runs.warm_start_mismatches`)
is flagged three times: a paragraph at the top naming every such pairing, a ``⚠`` on its cell of the arm-against-arm
table, and a line under that table naming the pair, the seed and what differs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from genenv_engine.ablation import goals, signals, validity
from genenv_engine.ablation.arms import ARMS, folder_name
from genenv_engine.ablation.stats import mean_sd, mean_series


def levels_text(change: dict[str, Any], key: str = "delta") -> str:
    """`` [L1 +0.000 (0.000, n 49), …]`` for a change with per-level numbers, else ``""``."""
    levels = change.get("by_level") or {}
    return (
        (" [" + ", ".join(f"{lv} {v[key]:+.3f} ({v['paired_se']:.3f}, n {v['n']})" for lv, v in levels.items()) + "]")
        if levels
        else ""
    )


def versus_cells(pair: dict[str, Any]) -> str:
    """``s0 +0.007 (0.015) @ 8, …``: a `versus` pair's per-seed differences, ``⚠`` after a seed whose two runs
    started from different epoch-0 agents."""
    return ", ".join(
        f"s{h['seed']} {h['diff']:+.3f} ({h['paired_se']:.3f}) @ {h['epoch']}"
        + (" ⚠" if h.get("epoch0_differs") else "")
        for h in pair["per_seed"]
    )


def epoch0_text(differs: dict[str, Any], a: str, b: str, bench: str | None = None) -> str:
    """What differs between the epoch-0 agents of arms ``a`` and ``b`` (an `epoch0_difference`), in words; with
    ``bench``, the epoch-0 held-out count of that benchmark only.

    >>> epoch0_text({"differs": ["agent fingerprint", "epoch-0 held-out"], "agent_fingerprints": [10.5, 10.25],
    ...              "warm_start_keys": [None, None], "epoch0_heldout": {"bfcl": {"differ": 3, "tasks": 400}}},
    ...             "unseen", "off")
    'agent fingerprints differ (unseen 10.5, off 10.25); epoch-0 held-out scored differently on 3 of 400 bfcl tasks'
    >>> epoch0_text({"differs": ["epoch-0 held-out"], "agent_fingerprints": [None, None],
    ...              "warm_start_keys": [None, None], "epoch0_heldout": {"bfcl": {"differ": 2, "tasks": 400}},
    ...              "built_on": ["CPU A", "CPU B"]}, "x", "y").split("; ", 1)[1]
    'warm starts built on different machines (x: CPU A; y: CPU B)'
    """
    parts = []
    if "agent fingerprint" in differs["differs"]:
        fa, fb = differs["agent_fingerprints"]
        parts.append(f"agent fingerprints differ ({a} {fa:.10g}, {b} {fb:.10g})")
    heldout = {k: v for k, v in differs["epoch0_heldout"].items() if bench is None or k == bench}
    if heldout:
        parts.append(
            "epoch-0 held-out scored differently on "
            + ", ".join(f"{v['differ']} of {v['tasks']} {k} tasks" for k, v in heldout.items())
        )
    if "warm-start key" in differs["differs"]:
        ka, kb = differs["warm_start_keys"]
        parts.append(f"warm-start keys differ ({a} `{ka}`, {b} `{kb}`)")
    ma, mb = differs.get("built_on") or (None, None)
    if ma and mb and ma != mb:
        parts.append(f"warm starts built on different machines ({a}: {ma}; {b}: {mb})")
    return "; ".join(parts) or ", ".join(differs["differs"])


def fmt(value: Any, sd: Any = None, digits: int = 3) -> str:
    if value is None:
        return "–"
    text = f"{value:.{digits}f}" if isinstance(value, float) else str(value)
    return f"{text} ± {sd:.{digits}f}" if isinstance(sd, float) else text


def level_lines(results: dict[str, Any], bench: str) -> list[str]:
    """Held-out per difficulty level at the final epoch, and each compared pair's difference per level, as mean ± sd
    over seeds (the seeds above zero counted): the figures a claim at one level (a target level) rests on."""
    s = results["summary"]
    rows = [
        (arm, s[arm][bench]["final_by_level"])
        for arm in results["arms"]
        if arm in s and bench in s[arm] and s[arm][bench].get("final_by_level")
    ]
    if not rows:
        return []
    levels = sorted({lv for _, by in rows for lv in by}, key=lambda lv: (len(lv), lv))
    lines = [
        "",
        "Held-out by level at the final epoch (mean ± sd over seeds):",
        "",
        "| arm | " + " | ".join(levels) + " |",
        "|---|" + "---|" * len(levels),
    ]
    for arm, by in rows:
        lines.append(
            f"| {arm} | " + " | ".join(fmt(by[lv]["mean"], by[lv]["sd"]) if lv in by else "–" for lv in levels) + " |"
        )
    pairs = [v for v in s.get("_versus", []) if v["benchmark"] == bench and v.get("by_level")]
    if pairs:
        lines += [
            "",
            "Arm − arm by level (mean ± sd over seeds of the per-seed paired differences; seeds above zero):",
            "",
            "| arm − arm | " + " | ".join(levels) + " |",
            "|---|" + "---|" * len(levels),
        ]
        for v in pairs:
            by = v["by_level"]
            lines.append(
                f"| {v['a']} − {v['b']} | "
                + " | ".join(
                    f"{fmt(by[lv]['mean'], by[lv]['sd'])} ({by[lv]['positive']}/{by[lv]['seeds']})" if lv in by else "–"
                    for lv in levels
                )
                + " |"
            )
    return lines


def markdown(results: dict[str, Any]) -> str:
    """The bench's tables as Markdown: the final table (mean ± sd over seeds), then per-epoch rows per arm."""
    s, benches = results["summary"], results["benchmarks"]
    lines = ["# Ablation", ""]
    if results.get("rescore"):
        lines = [
            f"# Ablation, held-out re-scored on {results['rescore']} tasks per benchmark",
            "",
            f"Each arm × seed's saved agent checkpoints of epoch 0 and of the last epochs compared, evaluated "
            f"greedily on the first {results['rescore']} held-out tasks (what `heldout_size = "
            f"{results['rescore']}` would have stored: the first tasks score as the run stored them). Only "
            "those epochs appear below.",
            "",
        ]
        checks = [
            c
            for by in results["runs"].values()
            for run in by.values()
            for per in (run.get("rescore_check") or {}).values()
            for c in per.values()
        ]
        if checks:
            lines += [
                f"Check against the runs' stored held-out: {sum(c[0] for c in checks)} of "
                f"{sum(c[1] for c in checks)} task results differ (greedy float-level ties decoded in other "
                "batches; a session above 2 % is refused).",
                "",
            ]
    budget = results.get("budget")
    if budget:
        lines += [
            f"Agent compute per epoch, every arm: {budget['tasks_per_epoch']} tasks × {budget['rollouts']} "
            f"rollouts = {budget['rollouts_per_epoch']} rollouts, {budget['steps_per_epoch']} optimizer steps × "
            f"{budget['update_epochs']} passes (lr {budget['lr']}, KL {budget['kl_coef']}); held-out "
            f"{budget['heldout_size']} tasks per benchmark, greedy."
            + (
                f" Base replay from train levels {list(budget['base_levels'])} only."
                if budget.get("base_levels")
                else ""
            ),
            "",
        ]
    recorded = [
        folder_name(arm, int(seed))
        for arm, by in results["runs"].items()
        for seed, run in by.items()
        if run.get("recorded")
    ]
    if recorded:
        lines += [f"Read from run records (no session folder here; `--records`): {', '.join(recorded)}.", ""]
    for m in results.get("warm_start_mismatches") or []:
        lines += [
            f"**⚠ Seed {m['seed']}: {m['a']} and {m['b']} started from different epoch-0 agents** "
            f"({epoch0_text(m, m['a'], m['b'])}): every {m['a']} − {m['b']} difference of this seed includes "
            "the difference between their epoch-0 agents (a warm start made on another CPU, or with other "
            "model settings such as the thread count, rounds differently).",
            "",
        ]
    if results.get("bench_seconds") is not None:
        lines += [
            f"Wall time of this bench run: {results['bench_seconds'] / 60:.1f} min "
            "(arms already finished are not rerun).",
            "",
        ]
    lines += [
        f"Seeds: {', '.join(map(str, results['seeds']))}. Mean ± sd over seeds; Δ = final − epoch 0; "
        "'up > 2 SE' counts seeds whose held-out rose by more than twice the paired standard error of "
        "the change (same tasks at both epochs; unpaired binomial SE in brackets).",
        "",
    ]
    for bench in benches:
        lines += [
            f"## {bench}",
            "",
            "| arm | held-out e0 | final | Δ | seeds up > 2 SE | mean p̂ (final) | abs(p̂−α) | in band | "
            "valid | unique (pool) | distinct bigrams | first epoch p̂ in α±0.1 (seed-mean curve) | "
            "tasks / rollouts / steps per epoch |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for arm in results["arms"]:
            row = s.get(arm)
            if not row or bench not in row:
                continue
            b = row[bench]
            n = len(b["per_seed"])
            lines.append(
                f"| {row['label']} ({arm}) | {fmt(b['epoch0'], b['epoch0_sd'])} | {fmt(b['final'], b['final_sd'])} | "
                f"{fmt(b['delta'], b['delta_sd'])} | {b['seeds_up_2se']}/{n} [{b['seeds_up_2se_unpaired']}/{n}] | "
                f"{fmt(row['final_p_hat'], row['final_p_hat_sd'])} | {fmt(row['final_calibration_error'])} | "
                f"{fmt(row['final_in_band_fraction'])} | {fmt(row['final_valid_fraction'])} | "
                f"{fmt(row['final_pool_unique_fraction'])} | {fmt(row['final_distinct_bigrams'])} | "
                f"{fmt(row['first_epoch_in_band'])} (per seed: "
                f"{', '.join(fmt(x) for x in row['first_epoch_in_band_per_seed'])}) | "
                f"{fmt(row['final_tasks_trained'], digits=0)} / "
                f"{fmt(row['final_rollouts'], digits=0)} / {fmt(row['final_agent_steps'], digits=0)} |"
            )
        eff = (s.get("_efficiency") or {}).get(bench)
        if "_efficiency" in s:
            lines += [
                "",
                "Data efficiency (agent tasks GenEnv needs to reach Static's final held-out, over Static's): "
                + (
                    "undefined (GenEnv never reached it, or Static's final is not above epoch 0)"
                    if eff is None
                    else f"{eff:.2f}"
                ),
            ]
        lines += level_lines(results, bench)
        lines += ["", "Per seed: Δ (paired SE):", ""]
        for arm in results["arms"]:
            row = s.get(arm)
            if row and bench in row:
                cells = ", ".join(
                    f"s{c['seed']} {c['delta']:+.3f} ({fmt(c['paired_se'])})" + levels_text(c)
                    for c in row[bench]["per_seed"]
                )
                lines.append(f"- {arm}: {cells}")
        lines.append("")
        pairs = [v for v in s.get("_versus", []) if v["benchmark"] == bench]
        if pairs:
            lines += [
                "Arm against arm on the same seed and held-out tasks, at the last epoch both finished "
                "(paired SE per seed):",
                "",
                "| arm − arm | mean ± sd over seeds | per seed: difference (paired SE) @ epoch | "
                "seeds first above by > 2 SE | seeds second above by > 2 SE |",
                "|---|---|---|---|---|",
            ]
            for v in pairs:
                n = len(v["per_seed"])
                lines.append(
                    f"| {v['a']} − {v['b']} | {fmt(v['mean'], v['sd'])} | {versus_cells(v)} | "
                    f"{v['a_above_2se']}/{n} | {v['b_above_2se']}/{n} |"
                )
            lines.append("")
            flagged = [
                f"- ⚠ **{v['a']} − {v['b']}, seed {h['seed']}: the epoch-0 agents differ** ("
                f"{epoch0_text(h['epoch0_differs'], v['a'], v['b'], bench)}); this difference includes "
                "theirs."
                for v in pairs
                for h in v["per_seed"]
                if h.get("epoch0_differs")
            ]
            if flagged:
                lines += [*flagged, ""]
            per_level = [
                f"- {v['a']} − {v['b']}, s{h['seed']} @ {h['epoch']}:" + levels_text(h, "diff")
                for v in pairs
                for h in v["per_seed"]
                if h.get("by_level")
            ]
            if per_level:
                lines += ["By level (difference, paired SE, tasks):", "", *per_level, ""]
    lines += goals.markdown(results["runs"], results["alpha"])
    lines += validity.markdown(results)
    lines += signals.markdown(results)
    lines += ["## Per epoch (mean over seeds)", ""]
    for arm in results["arms"]:
        by_seed = results["runs"].get(arm, {})
        if not by_seed:
            continue
        runs = list(by_seed.values())
        lines += [
            f"### {ARMS[arm][1]} ({arm})",
            "",
            "| epoch | "
            + " | ".join(f"held-out {b}" for b in benches)
            + " | mean p̂ | abs(p̂−α) | in band | valid | unique (pool) | distinct bigrams | zero-adv. groups | "
            "RWR examples | tasks | steps | difficulty mix | seed levels drawn |",
            "|---|" + "---|" * (len(benches) + 12),
        ]
        for e, _, _ in mean_series(runs, lambda r: r["tasks_trained"]):
            rows = [r for run in runs for r in run["epochs"] if r["epoch"] == e]

            def avg(key: str, rows: list = rows) -> Any:
                return mean_sd([r.get(key) for r in rows])

            held = [mean_sd([r["heldout"].get(b) for r in rows]) for b in benches]
            mix: dict[str, int] = {}
            drawn: Counter[str] = Counter()
            for r in rows:
                for k, v in (r["difficulty_mix"] or {}).items():
                    mix[k] = mix.get(k, 0) + v
                drawn.update(r.get("seed_levels") or {})
            lines.append(
                f"| {e} | "
                + " | ".join(fmt(m, sd) for m, sd in held)
                + " | "
                + " | ".join(
                    fmt(avg(k)[0])
                    for k in (
                        "p_hat",
                        "calibration_error",
                        "in_band_fraction",
                        "valid_fraction",
                        "pool_unique_fraction",
                        "distinct_bigrams",
                        "zero_advantage_share",
                    )
                )
                + f" | {fmt(avg('simulator_examples')[0], digits=0)}"
                + f" | {fmt(avg('tasks_trained')[0], digits=0)} | {fmt(avg('agent_steps')[0], digits=0)} | "
                + (" ".join(f"{k}:{v}" for k, v in sorted(mix.items())) or "–")
                + " | "
                + (" ".join(f"{k}:{v}" for k, v in sorted(drawn.items())) or "–")
                + " |"
            )
        lines.append("")
    if not results.get("rescore"):  # re-scored tables come without plots of their own
        lines += ["![calibration](calibration.png)", "", "![held-out](heldout.png)", ""]
    return "\n".join(lines)
