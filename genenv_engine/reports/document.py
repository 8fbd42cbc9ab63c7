"""The report's content as a list of format-neutral blocks (`genenv_engine.reports.blocks`), built once.

`build_document` says *what* a report holds: for one session its sections (`genenv_engine.reports.sections`), for
several a comparison table and curves, then each session's sections under its own heading. `markdown.py` and
`html.py` only say how each block is written, so both formats always carry the same sections and numbers. Also
`labels_for` (the sessions' legend labels) and `image_keys` (the figures a document refers to).
"""

from __future__ import annotations

from genenv_engine.reports.blocks import DASH, Block, Builder, Bullets, Heading, Image, Para, Table, duration, num
from genenv_engine.reports.data import SessionData
from genenv_engine.reports.sections import session_blocks


def _comparison(b: Builder, sessions: list[SessionData], labels: list[str]) -> None:
    b.add(Heading(2, "Comparison", "comparison"))
    b.add(
        Para(
            [
                "Sessions side by side, labelled by simulator mode (the paper's Fig. 6 compares GenEnv, "
                "GenEnv-Random and GenEnv-Static)."
            ]
        )
    )
    benches = sorted({x for s in sessions for x in s.benchmarks})
    headers = (
        ["session", "label", "preset", "seed", "epochs done / target", "partial epochs"]
        + [f"{x} epoch 0" for x in benches]
        + [f"{x} best" for x in benches]
        + [f"{x} final" for x in benches]
        + ["last mean p̂", "mean calibration error", "mean valid fraction", "tokens generated", "wall time"]
    )
    rows, marks = [], []
    for s, label in zip(sessions, labels, strict=False):
        done = [e for e in s.done_epochs if e.epoch > 0]
        cal = [e.calibration_error for e in done if e.calibration_error is not None]
        val = [e.valid_fraction for e in done if e.valid_fraction is not None]
        last_p = next((e.generated_success for e in reversed(done) if e.generated_success is not None), None)
        starts = [next((r for ep, r in s.heldout_series(x) if ep == 0), None) for x in benches]
        best = [s.heldout_best(x) for x in benches]
        final = [s.heldout_final(x) for x in benches]
        rows.append(
            [
                s.name,
                label,
                str(s.config.get("preset")),
                str(s.config.get("seed")),
                f"{len(done)} / {s.config.get('epochs')}",
                ", ".join(str(e.epoch) for e in s.incomplete_epochs) or DASH,
            ]
            + [num(v) for v in starts]
            + [f"{num(p[1])} (e{p[0]})" if p else DASH for p in best]
            + [f"{num(p[1])} (e{p[0]})" if p else DASH for p in final]
            + [
                num(last_p),
                num(sum(cal) / len(cal)) if cal else DASH,
                num(sum(val) / len(val)) if val else DASH,
                num(s.tokens_generated),
                duration(s.wall_seconds),
            ]
        )
        marks.append("partial" if s.incomplete_epochs else "")
    b.add(Table(headers, rows, "comparison-table", marks))
    b.add(Image("compare_heldout", "Held-out success per epoch, one line per session"))
    b.add(Image("compare_calibration", "Mean p̂ of generated tasks per epoch, one line per session"))


def labels_for(sessions: list[SessionData]) -> list[str]:
    """Legend labels: the simulator mode's paper name, with the session name where two would clash."""
    base = [s.label for s in sessions]
    return [f"{lab} [{s.name}]" if base.count(lab) > 1 else lab for lab, s in zip(base, sessions, strict=False)]


def build_document(sessions: list[SessionData]) -> tuple[str, list[Block]]:
    """The report's title and blocks for one session or a comparison of several."""
    b = Builder()
    if len(sessions) == 1:
        s = sessions[0]
        title = f"genenv session report: {s.name}"
        b.add(
            Para(
                [
                    ("b", s.label),
                    f" · preset {s.config.get('preset')} · seed {s.config.get('seed')} · "
                    f"benchmarks {', '.join(s.benchmarks)}",
                ]
            )
        )
        session_blocks(b, s, 2, "", "")
        return title, b.blocks
    labels = labels_for(sessions)
    title = f"genenv comparison report: {len(sessions)} sessions"
    b.add(Bullets([f"{lab}: {s.name}" for lab, s in zip(labels, sessions, strict=False)]))
    _comparison(b, sessions, labels)
    for i, (s, label) in enumerate(zip(sessions, labels, strict=False), start=1):
        b.add(Heading(2, f"Session {i}: {s.name} ({label})", f"s{i}"))
        session_blocks(b, s, 3, f"s{i}-", f"s{i}_")
    return title, b.blocks


def image_keys(sessions: list[SessionData]) -> list[str]:
    """Every image key a document for these sessions refers to."""
    per = ["time", "calibration", "phat_hist", "generation", "heldout"]
    if len(sessions) == 1:
        return per
    return ["compare_heldout", "compare_calibration"] + [f"s{i}_{k}" for i in range(1, len(sessions) + 1) for k in per]


__all__ = ["build_document", "image_keys", "labels_for"]
