"""The dashboard's live plots (textual-plotext): calibration, held-out success, p-hat histogram, phases, throughput,
and the warm start's loss curves (shown in the throughput plot's place until epoch 1 has a throughput); and the
comparison screen's overlays of several sessions' calibration and held-out curves (`CompareCurvePlot`).

Each plot has one reactive ``data`` attribute that its parent sets ("attributes down"); setting it
redraws the figure in `replot`. The data objects come from `genenv_console.state.RunState`, so a
test can read exactly what a plot shows from ``plot.data``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual_plotext import PlotextPlot

from genenv_console.state import Calibration, Histogram, WarmStart
from genenv_engine.core.curriculum import alpha_reward

COLORS = ("cyan", "magenta", "green", "orange", "blue", "red")
"""Series colours, one per benchmark or phase (in order)."""


def _epoch_ticks(plt: Any, epochs: list[int]) -> None:
    """Integer epoch ticks on the x axis, padded half an epoch either side."""
    if epochs:
        lo, hi = min(epochs), max(epochs)
        plt.xlim(lo - 0.5, hi + 0.5)
        step = max(1, (hi - lo + 1) // 8)
        plt.xticks(list(range(lo, hi + 1, step)))


class MetricPlot(PlotextPlot):
    """A plot redrawn from its ``data`` attribute; the drawn figure is cached until data, size or theme change."""

    data: reactive[Any] = reactive(None, always_update=True, layout=False)

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self._version = 0
        self._cached: tuple[tuple[Any, ...], Any] | None = None

    def watch_data(self) -> None:
        """Redraw whenever the parent sets new data."""
        self.plt.clear_figure()
        self.replot(self.plt, self.data)
        self._version += 1
        self.refresh()

    def render(self) -> Any:
        """The figure, rebuilt only when it changed (plotext's build is the slow part of a repaint)."""
        key = (self._version, self.size, self.app.theme, self.theme)
        if self._cached is None or self._cached[0] != key:
            self._cached = (key, super().render())
        return self._cached[1]

    def replot(self, plt: Any, data: Any) -> None:
        """Draw ``data`` on the cleared figure ``plt``."""
        raise NotImplementedError


class PlotPicked(Message):
    """``enter`` on a focused plot: open what is behind the ``epoch`` its cursor marks."""

    def __init__(self, plot: str, epoch: int) -> None:
        super().__init__()
        self.plot, self.epoch = plot, epoch


class EpochCursor(MetricPlot):
    """A plot that can be focused (tab or a click): left/right move a cursor along its epochs, drawn as a vertical
    line, and enter posts `PlotPicked` for the marked epoch."""

    can_focus = True
    BINDINGS = [
        Binding("left", "move(-1)", "earlier epoch", show=False),
        Binding("right", "move(1)", "later epoch", show=False),
        Binding("enter", "pick", "open epoch"),
    ]

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.cursor: int | None = None

    def epochs(self) -> list[int]:
        """The epochs the plot shows points for, in order."""
        raise NotImplementedError

    def action_move(self, step: int) -> None:
        """Move the cursor to the previous or next epoch with a point (the last one first)."""
        epochs = self.epochs()
        if not epochs:
            return
        if self.cursor not in epochs:
            self.cursor = epochs[-1]
        else:
            self.cursor = epochs[max(0, min(len(epochs) - 1, epochs.index(self.cursor) + step))]
        self.watch_data()

    def action_pick(self) -> None:
        """Open the marked epoch (the last one when no cursor was moved)."""
        epochs = self.epochs()
        if not epochs:
            return
        if self.cursor not in epochs:
            self.cursor = epochs[-1]
            self.watch_data()
        self.post_message(PlotPicked(self.id or "", self.cursor))

    def draw_cursor(self, plt: Any) -> None:
        if self.cursor is not None and self.cursor in self.epochs():
            plt.vline(self.cursor, "white")


class CalibrationPlot(EpochCursor):
    """Mean p-hat of each epoch's generated tasks per benchmark, against the alpha line and its band."""

    def epochs(self) -> list[int]:
        data = self.data
        return sorted({e for pts in data.points.values() for e, _ in pts}) if data is not None else []

    def replot(self, plt: Any, data: Calibration | None) -> None:
        if data is None:
            plt.title("calibration")
            return
        self.draw_cursor(plt)
        epochs = sorted({e for pts in data.points.values() for e, _ in pts})
        span = [min(epochs) - 0.5, max(epochs) + 0.5] if epochs else [0.5, 1.5]
        plt.plot(span, [data.alpha] * 2, color="gray", label=f"α={data.alpha:g}")
        for edge in (data.alpha - data.k_min, data.alpha + data.k_min):
            plt.plot(span, [edge] * 2, color="gray", marker="dot")
        for i, (bench, pts) in enumerate(sorted(data.points.items())):
            if pts:
                plt.plot(
                    [e for e, _ in pts], [p for _, p in pts], color=COLORS[i % len(COLORS)], marker="hd", label=bench
                )
                plt.scatter([e for e, _ in pts], [p for _, p in pts], color=COLORS[i % len(COLORS)], marker="o")
        last = {b: pts[-1][1] for b, pts in data.points.items() if pts}
        status = " ".join(f"{b} {p:.2f}" for b, p in sorted(last.items())) or "waiting for epoch 1"
        plt.title(f"calibration p̂ vs α±{data.k_min:g}: {status}")
        plt.ylim(0, 1)
        _epoch_ticks(plt, epochs or [1])


class HeldoutPlot(EpochCursor):
    """Held-out success per benchmark per epoch (epoch 0 is the warm start)."""

    def epochs(self) -> list[int]:
        return sorted({e for pts in (self.data or {}).values() for e, _ in pts})

    def replot(self, plt: Any, data: dict[str, list[tuple[int, float]]] | None) -> None:
        data = data or {}
        self.draw_cursor(plt)
        epochs = sorted({e for pts in data.values() for e, _ in pts})
        for i, (bench, pts) in enumerate(sorted(data.items())):
            if pts:
                plt.plot(
                    [e for e, _ in pts], [p for _, p in pts], color=COLORS[i % len(COLORS)], marker="hd", label=bench
                )
                plt.scatter([e for e, _ in pts], [p for _, p in pts], color=COLORS[i % len(COLORS)], marker="o")
        last = {b: pts[-1][1] for b, pts in data.items() if pts}
        status = " ".join(f"{b} {p:.2f}" for b, p in sorted(last.items())) or "waiting for epoch 0"
        plt.title(f"held-out success: {status}")
        plt.ylim(0, 1)
        _epoch_ticks(plt, epochs or [0])


class PHatHistogram(MetricPlot):
    """Histogram of the latest epoch's batch p-hats, with the R_env curve on the right axis."""

    bins = 10

    def replot(self, plt: Any, data: Histogram | None) -> None:
        if data is None or data.epoch is None:
            plt.title("p̂ per variation batch: waiting for scored batches")
            plt.xlim(0, 1)
            return
        width = 1 / self.bins
        centers = [round((i + 0.5) * width, 3) for i in range(self.bins)]
        plt.bar(centers, data.counts(self.bins), width=width * 0.9, color="cyan", label="batches", reset_ticks=False)
        plt.xticks([0, 0.25, 0.5, 0.75, 1])
        xs = [i / 40 for i in range(41)]
        plt.plot(
            xs,
            [alpha_reward(x, data.alpha, data.beta) for x in xs],
            yside="right",
            color="orange",
            marker="braille",
            label="R_env",
        )
        plt.ylim(0, 1.05, yside="right")
        plt.xlim(0, 1)
        mean = data.r_env_mean()
        band = data.in_band_fraction()
        if mean is not None and band is not None:
            plt.title(f"batch p̂ e{data.epoch}: R_env {mean:.2f}, {band:.0%} in band")
        else:
            plt.title(f"batch p̂ e{data.epoch}")


class PhasePlot(MetricPlot):
    """Seconds per phase, stacked per epoch."""

    def replot(self, plt: Any, data: tuple[list[int], dict[str, list[float]]] | None) -> None:
        epochs, table = data or ([], {})
        if not epochs or not table:
            plt.title("phase seconds: waiting for an epoch")
            return
        phases = list(table)
        plt.stacked_bar(
            [str(e) for e in epochs],
            [table[p] for p in phases],
            labels=phases,
            color=[COLORS[i % len(COLORS)] if i < len(COLORS) else "white" for i in range(len(phases))],
        )
        total = sum(table[p][-1] for p in phases)
        plt.title(f"phase seconds per epoch (last {total:.1f}s)")


class ThroughputPlot(MetricPlot):
    """Generated tokens per second of busy time, per epoch."""

    def replot(self, plt: Any, data: list[tuple[int, float]] | None) -> None:
        data = data or []
        if not data:
            plt.title("throughput tokens/s: waiting for epoch 1")
            return
        plt.plot([e for e, _ in data], [t for _, t in data], color="green", marker="hd")
        plt.scatter([e for e, _ in data], [t for _, t in data], color="green", marker="o")
        plt.ylim(0, max(t for _, t in data) * 1.2 or 1)
        _epoch_ticks(plt, [e for e, _ in data])
        plt.title(f"throughput: {data[-1][1]:.0f} tokens/s")


class WarmStartPlot(MetricPlot):
    """SFT loss per step of each role during the warm start, titled with steps/s and the ETA."""

    def replot(self, plt: Any, data: WarmStart | None) -> None:
        if data is None or not any(data.points.values()):
            plt.title("warm start loss: waiting for the first steps")
            return
        for i, (role, pts) in enumerate(data.points.items()):
            if pts:
                plt.plot(
                    [s for s, _ in pts],
                    [loss for _, loss in pts],
                    color=COLORS[i % len(COLORS)],
                    marker="hd",
                    label=role,
                )
        plt.title(f"warm start loss: {data.summary()}")


@dataclass(frozen=True)
class CompareCurves:
    """What a comparison plot draws: its title, one `genenv_console.compare.Series` per line (in order), and the
    alpha line with its band (None when the sessions' targets differ or the plot has none)."""

    title: str
    lines: tuple[Any, ...]
    alpha: float | None = None
    k_min: float | None = None


class CompareCurvePlot(MetricPlot):
    """Several sessions' curves overlaid: one line per session, coloured in order and labelled by its name."""

    def render(self) -> Any:
        """A line of text until the sessions are read: an empty plotext figure costs as much to draw as a full one,
        and the comparison should open in one drawing."""
        if self.data is None:
            return Text("reading the sessions…", style="dim")
        return super().render()

    def replot(self, plt: Any, data: CompareCurves | None) -> None:
        if data is None:
            return
        epochs = sorted({e for s in data.lines for e, _ in s.points})
        if data.alpha is not None:
            span = [min(epochs) - 0.5, max(epochs) + 0.5] if epochs else [0.5, 1.5]
            plt.plot(span, [data.alpha] * 2, color="gray", label=f"α={data.alpha:g}")
            if data.k_min:
                for edge in (data.alpha - data.k_min, data.alpha + data.k_min):
                    plt.plot(span, [edge] * 2, color="gray", marker="dot")
        for i, line in enumerate(data.lines):
            if line.points:
                color = COLORS[i % len(COLORS)]
                xs, ys = [e for e, _ in line.points], [v for _, v in line.points]
                plt.plot(xs, ys, color=color, marker="hd", label=line.label)
                plt.scatter(xs, ys, color=color, marker="o")
        plt.title(data.title if epochs else f"{data.title}: no epochs yet")
        plt.ylim(0, 1)
        _epoch_ticks(plt, epochs or [0])
