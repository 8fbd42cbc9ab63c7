"""Comparing 2-4 sessions: which folders to compare, each run's curves read read-only, and the Markdown report.

`expand_compare` turns folders the user named (session folders, or a folder of sessions such as the one
``genenv bench ablation --out DIR`` writes, one sub-folder per arm and seed) into the sessions to compare, or
raises `CompareError` with a message fit for the command line. `read_run` reads one session through
`genenv_engine.storage.session_view.SessionView` on a read-only connection (no lease taken, nothing written) and derives
the curves exactly as the dashboard does (`genenv_console.state.RunState`: mean p̂ of each epoch's generated
tasks per benchmark, held-out success per benchmark) and its funnel (`genenv_engine.storage.store.read_only_funnel`).
`comparison_markdown` and `write_report` give the exported report, its funnel tables built by
`genenv_console.compare_funnel`. Nothing here imports Textual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_console.compare_funnel import TOTAL_COLUMNS, funnel_epoch_rows, funnel_total_rows
from genenv_console.safe import clean
from genenv_console.state import RunState
from genenv_engine.ablation.arms import ARMS
from genenv_engine.reports.blocks import Block, Bullets, Heading, Para, Table
from genenv_engine.reports.markdown import render_markdown
from genenv_engine.storage.session_view import SessionView
from genenv_engine.storage.store import read_only_funnel

MIN_RUNS = 2
"""The fewest sessions a comparison takes."""

MAX_RUNS = 4
"""The most sessions a comparison takes (one plot line each, told apart by colour)."""

Points = list[tuple[int, float]]


class CompareError(ValueError):
    """The folders given cannot be compared (not sessions, too few or too many); the message says why."""


def is_session(folder: Path) -> bool:
    """Whether ``folder`` holds a session with a database (``config.toml`` and ``genenv.db``)."""
    return (folder / "config.toml").is_file() and (folder / "genenv.db").is_file()


def sessions_in(folder: Path) -> list[Path]:
    """The session folders directly inside ``folder``, by name (a bench folder's arm-seed runs)."""
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []
    return [p for p in children if is_session(p)]


def _names(paths: list[Path]) -> str:
    return ", ".join(clean(p.name, 60, one_line=True) for p in paths)


def expand_compare(folders: list[str | Path]) -> list[Path]:
    """The sessions to compare, in the order given: each folder is a session, or a folder of sessions that stands
    for all of them (by name). Duplicates are dropped. CompareError when a folder is neither, or when the result
    is not `MIN_RUNS`-`MAX_RUNS` sessions (the message names them).
    """
    out: list[Path] = []
    for raw in folders:
        folder = Path(raw)
        if is_session(folder):
            found = [folder]
        elif not folder.is_dir():
            raise CompareError(f"{clean(folder, 300, one_line=True)}: no such folder")
        else:
            found = sessions_in(folder)
            if not found:
                raise CompareError(
                    f"{clean(folder, 300, one_line=True)} is neither a genenv session (config.toml "
                    "and genenv.db) nor a folder of sessions"
                )
        for path in found:
            if path.resolve() not in {p.resolve() for p in out}:
                out.append(path)
    if len(out) > MAX_RUNS:
        raise CompareError(
            f"{len(out)} sessions to compare ({_names(out)}); at most {MAX_RUNS} fit: name up to "
            f"{MAX_RUNS} of them, e.g. --compare {' '.join(clean(p, 200, one_line=True) for p in out[:2])}"
        )
    if len(out) < MIN_RUNS:
        raise CompareError(
            f"a comparison needs {MIN_RUNS} to {MAX_RUNS} sessions; got {len(out)}"
            + (f" ({_names(out)})" if out else "")
        )
    return out


_ARM_FOLDER = re.compile(r"^(?P<arm>.+)-s(?P<seed>\d+)$")


def _setting(settings: dict[str, Any], dotted: str) -> Any:
    """A dotted key's value in a nested settings dict (None when absent).

    >>> _setting({"a": {"b": 1}}, "a.b"), _setting({}, "a.b")
    (1, None)
    """
    value: Any = settings
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def arm_of(name: str, settings: dict[str, Any]) -> str:
    """The ablation arm a session's settings (`RunConfig.to_dict`) make: the arm its folder name says
    (``genenv bench ablation`` names them ``<arm>-s<seed>``) when the settings match it, else the first arm they
    match, else the simulator mode (with a non-alpha reward appended).

    >>> arm_of("trained-s1", {"simulator": {"mode": "trained"}, "curriculum": {"reward": "alpha"}})
    'trained'
    >>> arm_of("off-s1", {"simulator": {"mode": "trained"}, "curriculum": {"reward": "uniform"}})
    'uniform'
    >>> arm_of("run", {"simulator": {"mode": "x"}, "curriculum": {"reward": "y"}})
    'x/y'
    """

    def fits(arm: str) -> bool:
        overrides = ARMS[arm][0]
        if "agent.base_source" not in overrides and _setting(settings, "agent.base_source") == "unseen":
            return False
        return all(_setting(settings, k) == v for k, v in overrides.items())

    match = _ARM_FOLDER.match(name)
    if match and match.group("arm") in ARMS and fits(match.group("arm")):
        return match.group("arm")
    for arm in ARMS:
        if fits(arm):
            return arm
    mode, reward = _setting(settings, "simulator.mode"), _setting(settings, "curriculum.reward")
    return f"{mode}" + ("" if reward in (None, "alpha") else f"/{reward}")


@dataclass(frozen=True)
class CompareRun:
    """One session of a comparison: who it is and its two curves (per benchmark, (epoch, value) points)."""

    path: Path
    preset: str
    arm: str
    seed: int
    epochs_done: int
    """The highest finished epoch (0: only the warm start; -1: none)."""
    target: int
    alpha: float
    k_min: float
    calibration: dict[str, Points]
    """Per benchmark, (epoch, mean p̂ of that epoch's generated tasks): the dashboard's calibration plot."""
    heldout: dict[str, Points]
    """Per benchmark, (epoch, held-out success), epoch 0 the warm start: the dashboard's held-out plot."""
    funnel: list[dict[str, Any]] = field(default_factory=list)
    """`genenv_engine.storage.store.Store.funnel` entries of every epoch: drafts → admitted → trained per
    benchmark."""

    @property
    def name(self) -> str:
        """The session's folder name (for a bench run it says arm and seed), as stored on disk."""
        return self.path.name


def read_run(path: Path) -> CompareRun:
    """One session read read-only (`SessionView.open` with ``read_only``) into its comparison curves."""
    view = SessionView.open(path, read_only=True, batches=False)  # the curves come from the epochs' metrics
    state = RunState.from_view(path.name, view)
    cfg = view.config
    return CompareRun(
        path=Path(path),
        preset=cfg.preset,
        arm=arm_of(path.name, cfg.to_dict()),
        seed=cfg.seed,
        epochs_done=state.epochs_done(),
        target=cfg.epochs,
        alpha=cfg.curriculum.alpha,
        k_min=cfg.curriculum.k_min,
        calibration=state.calibration().points,
        heldout=state.heldout(),
        funnel=read_only_funnel(Path(path) / "genenv.db"),
    )


def read_runs(paths: list[Path]) -> list[CompareRun]:
    """Every session of a comparison, in the order given."""
    return [read_run(p) for p in paths]


@dataclass(frozen=True)
class Series:
    """One line of a comparison plot: its label (the session's folder name, made safe to draw) and its points."""

    label: str
    points: Points


def series(runs: list[CompareRun], curve: str) -> list[Series]:
    """The lines of one plot, ``curve`` being ``calibration`` or ``heldout``: one per session in order, labelled
    with its folder name; when the sessions cover more than one benchmark, one per session and benchmark, the
    label followed by the benchmark."""
    benches = sorted({b for r in runs for b in getattr(r, curve)})
    out = []
    for run in runs:
        data = getattr(run, curve)
        for bench in sorted(data):
            label = clean(run.name, 40, one_line=True) + (f" {bench}" if len(benches) > 1 else "")
            out.append(Series(label, list(data[bench])))
    return out


def _value_at(points: Points, epoch: int) -> float | None:
    return next((v for e, v in points if e == epoch), None)


@dataclass(frozen=True)
class SummaryRow:
    """One row of the comparison table: a session's held-out success on one benchmark at epoch 0 and last."""

    session: str
    preset_arm: str
    seed: int
    epochs: str
    benchmark: str
    start: float | None
    last_epoch: int | None
    last: float | None

    @property
    def change(self) -> float | None:
        """Held-out success at the last epoch minus at epoch 0 (None without both)."""
        return None if self.start is None or self.last is None else self.last - self.start


def summary_rows(runs: list[CompareRun]) -> list[SummaryRow]:
    """The comparison table: per session (in order) and benchmark, held-out at epoch 0 and at its last epoch."""
    rows = []
    for run in runs:
        for bench in sorted(run.heldout) or [""]:
            points = run.heldout.get(bench, [])
            last_epoch, last = points[-1] if points else (None, None)
            rows.append(
                SummaryRow(
                    run.name,
                    f"{run.preset}/{run.arm}",
                    run.seed,
                    f"{max(run.epochs_done, 0)}/{run.target}",
                    bench,
                    _value_at(points, 0),
                    last_epoch,
                    last,
                )
            )
    return rows


def _num(value: float | None, signed: bool = False) -> str:
    """A table value with three decimals, '-' for None.

    >>> _num(0.25), _num(None), _num(0.125, signed=True), _num(-0.5, signed=True)
    ('0.250', '-', '+0.125', '-0.500')
    """
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


TABLE_COLUMNS = ("session", "preset/arm", "seed", "epochs", "bench", "held-out e0", "held-out last", "change")
"""Column labels of the comparison table."""


def table_cells(row: SummaryRow) -> tuple[str, ...]:
    """The cells of one comparison-table row (the session name made safe to draw)."""
    last = "-" if row.last is None else f"{row.last:.3f} (e{row.last_epoch})"
    return (
        clean(row.session, 60, one_line=True),
        clean(row.preset_arm, 40, one_line=True),
        str(row.seed),
        row.epochs,
        clean(row.benchmark, 20, one_line=True),
        _num(row.start),
        last,
        _num(row.change, True),
    )


def _curve_table(runs: list[CompareRun], curve: str) -> Table | Para:
    """Per-epoch values of one curve: one row per epoch, one column per session (and benchmark)."""
    lines = series(runs, curve)
    epochs = sorted({e for s in lines for e, _ in s.points})
    if not lines or not epochs:
        return Para(["(no values yet)"])
    rows = [[str(e)] + [_num(_value_at(s.points, e)) for s in lines] for e in epochs]
    return Table(["epoch"] + [s.label for s in lines], rows)


def _funnel_blocks(runs: list[CompareRun]) -> list[Block]:
    """The funnel section: totals per session and benchmark, then kept/drafts → trained per epoch."""
    names, funnels = [r.name for r in runs], [r.funnel for r in runs]
    headers, rows = funnel_epoch_rows(names, funnels)
    return [
        Heading(2, "Funnel: drafts → admitted → trained", "funnel"),
        Para(
            [
                "Per session and benchmark over its epochs: the drafts its simulator wrote, those the validator "
                "passed, those the duplicate cap kept, and the tasks its agent trained on (distinct tasks each epoch, "
                "added up), with the rejection reasons and where the trained tasks came from."
            ]
        ),
        Table(list(TOTAL_COLUMNS), funnel_total_rows(names, funnels)),
        Para(["Per epoch: kept/drafts → trained."]),
        Table(headers, rows) if rows else Para(["(no epoch wrote or trained on a task yet)"]),
    ]


def comparison_markdown(runs: list[CompareRun]) -> str:
    """The comparison report: the sessions, the summary table, the per-epoch values of both curves and the funnels,
    written by the session reports' Markdown renderer (its escaping keeps names with pipes or markup inside their
    cells)."""
    alphas = sorted({(r.alpha, r.k_min) for r in runs})
    blocks: list[Block] = [
        Para(["Sessions, in order:"]),
        Bullets([str(r.path) for r in runs]),
        Heading(2, "Summary", "summary"),
        Table(list(TABLE_COLUMNS), [list(table_cells(row)) for row in summary_rows(runs)]),
        Heading(2, "Calibration: mean p̂ of each epoch's generated tasks", "calibration"),
        Para(["Target " + "; ".join(f"α={a:g} ± {k:g}" for a, k in alphas) + "."]),
        _curve_table(runs, "calibration"),
        Heading(2, "Held-out success per epoch (epoch 0: the warm start)", "heldout"),
        _curve_table(runs, "heldout"),
        *_funnel_blocks(runs),
    ]
    return render_markdown("Comparison of " + ", ".join(r.name for r in runs), blocks, {})


def _file_part(name: str, limit: int = 40) -> str:
    """A folder name as a safe piece of a file name.

    >>> _file_part("trained-s0"), _file_part("[x] ../é")
    ('trained-s0', '_x_.._')
    """
    part = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip(".") or "session"
    return part[:limit]


def report_path(runs: list[CompareRun]) -> Path:
    """Where the report goes: ``compare-<name>-<name>….md`` in the first session's parent folder (for a bench,
    the bench folder)."""
    stem = "compare-" + "-".join(_file_part(r.name) for r in runs)
    return runs[0].path.parent / (stem[:200] + ".md")


def write_report(runs: list[CompareRun]) -> Path:
    """Write `comparison_markdown` to `report_path`; return the path."""
    path = report_path(runs)
    path.write_text(comparison_markdown(runs), encoding="utf-8")
    return path
