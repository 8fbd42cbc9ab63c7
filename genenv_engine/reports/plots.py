"""Report figures as PNG bytes: matplotlib on its Agg canvas, imported only when a report is drawn.

Figures are drawn on a `matplotlib.figure.Figure` with an explicit Agg canvas, never through
pyplot's global state, so drawing a report in a worker thread of the console touches no GUI backend.
Partial epochs (stopped, crashed, still running) are drawn hollow and shaded, with a "partial" label.
"""

from __future__ import annotations

import io
from typing import Any

from genenv_engine.reports.data import EpochData, SessionData

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
STYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
PHASE_COLORS = {
    "warm_start": "#7f7f7f",
    "generate": "#1f77b4",
    "validate": "#aec7e8",
    "rollout": "#ff7f0e",
    "agent_update": "#d62728",
    "simulator_update": "#2ca02c",
    "heldout_eval": "#9467bd",
    "checkpoint": "#8c564b",
}


def _t(text: str) -> str:
    """Text for matplotlib with ``$`` escaped, so a name never turns into mathtext."""
    return str(text).replace("$", r"\$")


def _figure(width: float = 8.0, height: float = 4.0) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def _shade_partial(ax: Any, epochs: list[EpochData]) -> None:
    for e in epochs:
        if not e.complete:
            ax.axvspan(e.epoch - 0.4, e.epoch + 0.4, color="#f5c542", alpha=0.25, lw=0)
            ax.text(
                e.epoch,
                1.0,
                "partial",
                ha="center",
                va="bottom",
                fontsize=8,
                color="#8a6d00",
                transform=ax.get_xaxis_transform(),
            )


def _band(ax: Any, s: SessionData) -> None:
    ax.axhspan(
        s.alpha - s.k_min,
        s.alpha + s.k_min,
        color="#2ca02c",
        alpha=0.12,
        lw=0,
        label=f"band [{s.alpha - s.k_min:.2f}, {s.alpha + s.k_min:.2f}]",
    )
    ax.axhline(s.alpha, color="#2ca02c", ls="--", lw=1, label=f"alpha = {s.alpha}")


def _int_ticks(ax: Any, epochs: list[int]) -> None:
    if epochs:
        ax.set_xticks(sorted(set(epochs)))


def _line(
    ax: Any, points: list[tuple[int, float, bool]], color: str, label: str, marker: str = "o", style: str = "-"
) -> None:
    """A line over (epoch, value, complete) points; incomplete points hollow. Lines that may overlap get
    distinct styles and markers so each stays visible."""
    if not points:
        return
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    ax.plot(xs, ys, color=color, lw=1.8, ls=style, marker=marker, ms=6, label=_t(label))
    part = [(x, y) for x, y, c in points if not c]
    if part:
        ax.plot([p[0] for p in part], [p[1] for p in part], ls="none", marker=marker, ms=7, mfc="white", color=color)


def calibration(s: SessionData) -> bytes:
    """Fig. 7 style: mean p-hat of generated tasks per epoch (overall and per benchmark), batch p-hats as dots."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    epochs = [e for e in s.epochs if e.epoch > 0]
    scored = [e for e in epochs if e.generated_success is not None or e.batch_p_hats]
    if not scored:
        _empty(ax, "no generated task was scored (none valid, or none yet)")
        return _png(fig)
    _band(ax, s)
    for e in scored:
        if e.batch_p_hats:
            n = len(e.batch_p_hats)
            xs = [e.epoch + (0.24 * (i / max(1, n - 1) - 0.5) if n > 1 else 0.0) for i in range(n)]
            ax.scatter(
                xs,
                e.batch_p_hats,
                s=10,
                color="#999999",
                alpha=0.6,
                zorder=2,
                label="batch p̂" if e is scored[0] else None,
            )
    _line(
        ax,
        [(e.epoch, e.generated_success, e.complete) for e in scored if e.generated_success is not None],
        "#000000",
        "all benchmarks",
    )
    if len(s.benchmarks) > 1:
        for i, name in enumerate(s.benchmarks):
            pts = [
                (e.epoch, e.generated_success_by_benchmark[name], e.complete)
                for e in scored
                if e.generated_success_by_benchmark.get(name) is not None
            ]
            _line(
                ax, pts, COLORS[i % len(COLORS)], name, MARKERS[(i + 1) % len(MARKERS)], STYLES[(i + 1) % len(STYLES)]
            )
    _shade_partial(ax, epochs)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("epoch")
    ax.set_ylabel("success rate on generated tasks (p̂)")
    ax.set_title(_t(f"Difficulty calibration: {s.label}"), fontsize=10)
    _int_ticks(ax, [e.epoch for e in epochs])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _png(fig)


def phat_hist(s: SessionData) -> bytes:
    """Histograms of task p-hat in the first and last epochs that scored generated tasks."""
    scored = [e for e in s.epochs if e.epoch > 0 and (e.task_p_hats or e.batch_p_hats)]
    fig = _figure(8.0, 3.4)
    if not scored:
        _empty(fig.add_subplot(1, 1, 1), "no generated task was scored (none valid, or none yet)")
        return _png(fig)
    chosen = [scored[0]] if len(scored) == 1 else [scored[0], scored[-1]]
    bins = [i / 10 for i in range(11)]
    for i, e in enumerate(chosen):
        ax = fig.add_subplot(1, len(chosen), i + 1)
        values = e.task_p_hats or e.batch_p_hats
        ax.axvspan(s.alpha - s.k_min, s.alpha + s.k_min, color="#2ca02c", alpha=0.12, lw=0)
        ax.axvline(s.alpha, color="#2ca02c", ls="--", lw=1)
        ax.hist(values, bins=bins, color="#1f77b4" if e.complete else "#f5c542", edgecolor="white")
        kind = "task" if e.task_p_hats else "batch"
        mark = "" if e.complete else " (PARTIAL)"
        ax.set_title(f"epoch {e.epoch}{mark}: {len(values)} {kind} p̂", fontsize=9)
        ax.set_xlabel("p̂")
        ax.set_xlim(0, 1)
        if i == 0:
            ax.set_ylabel("tasks")
    return _png(fig)


def generation(s: SessionData) -> bytes:
    """Valid, unique and in-band fractions of each epoch's generations."""
    fig = _figure(8.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    epochs = [e for e in s.epochs if e.epoch > 0]
    series = {
        "valid fraction": "valid_fraction",
        "unique fraction": "unique_fraction",
        "in-band fraction": "in_band_fraction",
    }
    drawn = False
    for i, (label, attr) in enumerate(series.items()):
        pts = [(e.epoch, getattr(e, attr), e.complete) for e in epochs if getattr(e, attr) is not None]
        _line(ax, pts, COLORS[i], label, MARKERS[i], STYLES[i])
        drawn = drawn or bool(pts)
    if not drawn:
        _empty(ax, "no generations recorded")
        return _png(fig)
    _shade_partial(ax, epochs)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("epoch")
    ax.set_ylabel("fraction")
    _int_ticks(ax, [e.epoch for e in epochs])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def heldout(s: SessionData) -> bytes:
    """Held-out success per benchmark per epoch."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    drawn = False
    for i, name in enumerate(s.benchmarks):
        pts = [(ep, rate, True) for ep, rate in s.heldout_series(name)]
        _line(ax, pts, COLORS[i % len(COLORS)], name, MARKERS[i % len(MARKERS)], STYLES[i % len(STYLES)])
        best = s.heldout_best(name)
        if best:
            ax.annotate(
                f"best {best[1]:.3f}",
                best,
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize=7,
                color=COLORS[i % len(COLORS)],
            )
        drawn = drawn or bool(pts)
    if not drawn:
        _empty(ax, "no held-out evaluation recorded")
        return _png(fig)
    _shade_partial(ax, s.epochs)
    ax.set_ylim(-0.03, 1.12)
    ax.set_xlabel("epoch (0 = warm start)")
    ax.set_ylabel("held-out success")
    ax.set_title(_t(f"Agent progress: {s.label}"), fontsize=10)
    _int_ticks(ax, [e.epoch for e in s.epochs])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def time_split(s: SessionData) -> bytes:
    """Seconds per phase for each epoch, stacked; partial epochs hatched."""
    fig = _figure(8.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    epochs = [e for e in s.epochs if e.phase_seconds]
    if not epochs:
        _empty(ax, "no phase timings recorded")
        return _png(fig)
    phases = [p for p in PHASE_COLORS if any(p in e.phase_seconds for e in epochs)]
    phases += sorted({p for e in epochs for p in e.phase_seconds} - set(phases))
    bottoms = [0.0] * len(epochs)
    for i, phase in enumerate(phases):
        heights = [float(e.phase_seconds.get(phase, 0.0)) for e in epochs]
        bars = ax.bar(
            [e.epoch for e in epochs],
            heights,
            bottom=bottoms,
            label=_t(phase),
            color=PHASE_COLORS.get(phase, COLORS[i % len(COLORS)]),
        )
        for bar, e in zip(bars, epochs, strict=False):
            if not e.complete:
                bar.set_hatch("//")
                bar.set_edgecolor("#8a6d00")
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=False)]
    for e, top in zip(epochs, bottoms, strict=False):
        if not e.complete:
            ax.text(e.epoch, top, "partial", ha="center", va="bottom", fontsize=8, color="#8a6d00")
    ax.set_xlabel("epoch")
    ax.set_ylabel("seconds")
    _int_ticks(ax, [e.epoch for e in epochs])
    ax.legend(fontsize=7, ncol=2)
    return _png(fig)


def session_figures(s: SessionData, prefix: str = "") -> dict[str, bytes]:
    """Every per-session figure, keyed as the document refers to them."""
    return {
        f"{prefix}time": time_split(s),
        f"{prefix}calibration": calibration(s),
        f"{prefix}phat_hist": phat_hist(s),
        f"{prefix}generation": generation(s),
        f"{prefix}heldout": heldout(s),
    }


def compare_heldout(sessions: list[SessionData], labels: list[str]) -> bytes:
    """Fig. 6 style: held-out success per epoch, one line per session, one panel per benchmark."""
    benches = sorted({x for s in sessions for x in s.benchmarks})
    fig = _figure(8.0, 3.6 * len(benches))
    for j, name in enumerate(benches):
        ax = fig.add_subplot(len(benches), 1, j + 1)
        for i, (s, label) in enumerate(zip(sessions, labels, strict=False)):
            pts = [(ep, rate, True) for ep, rate in s.heldout_series(name)]
            _line(ax, pts, COLORS[i % len(COLORS)], label, MARKERS[i % len(MARKERS)], STYLES[i % len(STYLES)])
            for e in s.incomplete_epochs:
                ax.axvline(e.epoch, color=COLORS[i % len(COLORS)], ls=":", lw=1)
                ax.text(
                    e.epoch,
                    0.02,
                    _t(f"partial ({label})"),
                    rotation=90,
                    fontsize=7,
                    va="bottom",
                    color=COLORS[i % len(COLORS)],
                    transform=ax.get_xaxis_transform(),
                )
        ax.set_title(_t(f"{name}: held-out success"), fontsize=10)
        ax.set_xlabel("epoch (0 = warm start)")
        ax.set_ylabel("success")
        ax.set_ylim(-0.03, 1.05)
        _int_ticks(ax, [e.epoch for s in sessions for e in s.epochs])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _png(fig)


def compare_calibration(sessions: list[SessionData], labels: list[str]) -> bytes:
    """Mean p-hat of generated tasks per epoch, one line per session, with each session's band."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    first = sessions[0]
    _band(ax, first)
    drawn = False
    for i, (s, label) in enumerate(zip(sessions, labels, strict=False)):
        pts = [
            (e.epoch, e.generated_success, e.complete)
            for e in s.epochs
            if e.epoch > 0 and e.generated_success is not None
        ]
        _line(ax, pts, COLORS[i % len(COLORS)], label, MARKERS[i % len(MARKERS)], STYLES[i % len(STYLES)])
        drawn = drawn or bool(pts)
    if not drawn:
        ax.text(0.5, 0.5, "no generated task has been scored in any session", ha="center", transform=ax.transAxes)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("epoch")
    ax.set_ylabel("success rate on generated tasks (p̂)")
    _int_ticks(ax, [e.epoch for s in sessions for e in s.epochs if e.epoch > 0])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def comparison_figures(sessions: list[SessionData], labels: list[str]) -> dict[str, bytes]:
    """The overlaid figures of a multi-session report."""
    return {
        "compare_heldout": compare_heldout(sessions, labels),
        "compare_calibration": compare_calibration(sessions, labels),
    }
