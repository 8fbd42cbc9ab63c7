"""The ablation bench's two PNG plots with every arm: calibration (mean p-hat against the target band) and the
held-out change since epoch 0.
"""

from __future__ import annotations

from typing import Any

from genenv_engine.ablation.arms import ARMS
from genenv_engine.ablation.stats import mean_series
from genenv_engine.core.curriculum import TARGET_BAND


def plots(results: dict[str, Any]) -> dict[str, bytes]:
    """Two PNGs with every arm: mean p-hat of generated tasks per epoch (band shaded) and the held-out change since
    each seed's epoch 0, mean over seeds with the spread as error bars; each arm has its own dash and width, so arms
    that coincide
    (trained and frozen when no batch reaches the band) stay visible."""
    from genenv_engine.reports.plots import COLORS, MARKERS, STYLES, _figure, _png

    out: dict[str, bytes] = {}
    alpha = results["alpha"]
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.axhspan(alpha - TARGET_BAND, alpha + TARGET_BAND, color="#2ca02c", alpha=0.12, label=f"α ± {TARGET_BAND}")
    ax.axhline(alpha, color="#2ca02c", ls="--", lw=1)
    for i, arm in enumerate(results["arms"]):
        runs = [r for r in results["runs"].get(arm, {}).values()]
        series = [(e, m, sd) for e, m, sd in mean_series(runs, lambda r: r["p_hat"]) if m is not None]
        if series:
            ax.errorbar(
                [e for e, _, _ in series],
                [m for _, m, _ in series],
                yerr=[sd or 0 for *_, sd in series],
                color=COLORS[i % len(COLORS)],
                marker=MARKERS[i % len(MARKERS)],
                capsize=3,
                label=ARMS[arm][1],
                ls=STYLES[i % len(STYLES)],
                lw=max(0.8, 3.2 - 0.5 * i),
                ms=max(3, 8 - i),
            )
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
            deltas = [
                {
                    "epochs": [
                        {"epoch": row["epoch"], "d": row["heldout"][bench] - run["epochs"][0]["heldout"][bench]}
                        for row in run["epochs"]
                        if bench in row["heldout"]
                    ]
                }
                for run in runs
                if run["epochs"] and bench in run["epochs"][0]["heldout"]
            ]
            series = [(e, m, sd) for e, m, sd in mean_series(deltas, lambda r: r["d"]) if m is not None]
            if series:
                ax.errorbar(
                    [e for e, _, _ in series],
                    [m for _, m, _ in series],
                    yerr=[sd or 0 for *_, sd in series],
                    color=COLORS[i % len(COLORS)],
                    marker=MARKERS[i % len(MARKERS)],
                    capsize=3,
                    label=ARMS[arm][1],
                    ls=STYLES[i % len(STYLES)],
                    lw=max(0.8, 3.2 - 0.5 * i),
                    ms=max(3, 8 - i),
                )
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("epoch (0 = warm start)")
        ax.axhline(0.0, color="#7f7f7f", lw=1)
        ax.set_ylabel(f"held-out change since epoch 0 ({bench})")
        ax.set_title(f"Agent held-out minus its epoch 0, mean ± sd over seeds: {bench}", fontsize=10)
        ax.legend(fontsize=8)
    out["heldout.png"] = _png(fig)
    return out
