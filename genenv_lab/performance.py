"""The README's performance table, generated from the speed benchmarks' JSON under ``docs/results/performance/``.

`performance_rows` reads each benchmark's newest dated folder (`dated`: where a benchmark's file exists in several
dated folders, the newest is the source and the older ones are cited with their date) and renders its measurement
against its goal; `performance_table` is the README's section, `performance_finding` and `performance_span` the
results index's row on the benchmarks. `warmstart_multiple` and `epoch_multiple` turn a result into its multiple of
the compute bound. It reads only JSON: no torch, no training code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from genenv_lab.figure_text import DATED_FOLDER, day, minutes, thousands

RESULTS = "docs/results"
PERFORMANCE = "docs/results/performance"
FAST_WARMSTART = "bench-warmstart-smol-fused-lg4.json"
"""The `smol` warm start with the float32 settings that shorten it (fused forward, length-grouped SFT), opt-in when
measured and the defaults since."""
FAST_EPOCH = "bench-epoch-smol-l34-fused.json"
"""The `smol-l34` epoch with every opt-in float32 setting when measured (fused forward, static decode, whole-step
micro-batches; the first two are the defaults since)."""


# ---- reading the JSON ------------------------------------------------------------------------------------------


def load(root: Path, rel: str) -> Any:
    return json.loads((root / rel).read_text())


def dated(root: Path, name: str) -> list[str]:
    """The dated folders under ``docs/results/performance/`` that hold ``name``, newest first (the first is the
    source of the figure, the others are older measurements of it)."""
    base = root / PERFORMANCE
    folders = [p.name for p in base.iterdir() if p.is_dir() and DATED_FOLDER.match(p.name) and (p / name).is_file()]
    if not folders:
        raise FileNotFoundError(f"no dated folder under {PERFORMANCE} holds {name}")
    return sorted(folders, reverse=True)


def _perf(root: Path, name: str) -> tuple[str, dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """(newest folder, its JSON, [(older folder, its JSON), ...]) for one benchmark file."""
    folders = dated(root, name)
    data = [(f, load(root, f"{PERFORMANCE}/{f}/{name}")) for f in folders]
    return folders[0], data[0][1], data[1:]


def _goal(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in data["goals"] if g["name"] == name)


# ---- the README's performance table ----------------------------------------------------------------------------


def _link(folder: str, name: str, prefix: str) -> str:
    return f"[JSON]({prefix}{folder}/{name})"


def _older(olders: list[tuple[str, Any]], text: Callable[[Any], str]) -> str:
    return "".join(f"; {f}: {text(d)}" for f, d in olders)


def _yes(met: bool) -> str:
    return "yes" if met else "no"


def _worst_page_ms(store: dict[str, Any]) -> float:
    """The slowest of a store benchmark's page, filter and search times."""
    return max(store["page_ms"], store["filter_ms"], store["search_ms"])


def _slowest_view_ms(views: dict[str, Any]) -> float:
    """The slowest median of the console's drill-down views."""
    return max(v["median"] for v in views["ms"].values())


def performance_rows(root: Path, prefix: str = "docs/results/performance/") -> list[tuple[str, str, str, str]]:
    """The performance table's rows: (what, measured, goal, met), every figure read from its JSON."""
    rows = [
        (
            "first run (`make run`): first calibration point",
            "[timed by hand](docs/guide/first-run.md), no JSON",
            "≤ 3 min",
            "yes",
        )
    ]
    f, d, old = _perf(root, "bench-rollouts-tiny-1thread.json")
    g = _goal(d, "ratio (engine / naive tokens/s)")
    rows.append(
        (
            "rollouts vs one `generate` per prompt",
            f"{d['ratio']:.1f}× ({f}, {_link(f, 'bench-rollouts-tiny-1thread.json', prefix)})"
            + _older(old, lambda o: f"{o['ratio']:.1f}×"),
            f"≥ {g['target']:.0f}×",
            _yes(g["met"]),
        )
    )
    f1, d1, old1 = _perf(root, "bench-grpo-1thread.json")
    f2, d2, _ = _perf(root, "bench-grpo-2threads.json")
    rows.append(
        (
            "GRPO step vs TRL's `GRPOTrainer`, same work",
            f"TRL {d1['ratio']:.2f}× slower (1 thread), {d2['ratio']:.2f}× (2 threads) ({f1}, "
            f"{_link(f1, 'bench-grpo-1thread.json', prefix)})"
            + _older(old1, lambda o: f"{o['ratio']:.2f}× (TRL's bfloat16 default)"),
            "≥ 1×",
            _yes(d1["ratio"] >= 1 and d2["ratio"] >= 1),
        )
    )
    f, d, old = _perf(root, "bench-store.json")
    rows.append(
        (
            "console page, search or filter over 100k tasks",
            f"≤ {_worst_page_ms(d):.1f} ms ({f}, {_link(f, 'bench-store.json', prefix)})"
            + _older(old, lambda o: f"≤ {_worst_page_ms(o):.1f} ms"),
            "≤ 50 ms",
            _yes(all(g["met"] for g in d["goals"])),
        )
    )
    f, d, _ = _perf(root, "console-views.json")
    rows.append(
        (
            "console views on a 100k-task session, median",
            f"≤ {_slowest_view_ms(d):.0f} ms ({f}, {_link(f, 'console-views.json', prefix)})",
            f"≤ {d['goal_ms']:.0f} ms",
            _yes(d["all_met"]),
        )
    )
    f, d, _ = _perf(root, "console-latency.json")
    p95 = d["key_to_screen"]["p95_ms"]
    rows.append(
        (
            "console key-to-screen while training, p95",
            f"{p95:.1f} ms ({f}, {_link(f, 'console-latency.json', prefix)})",
            "≤ 100 ms",
            _yes(p95 <= 100),
        )
    )
    f, d, old = _perf(root, "bench-epoch.json")
    five = load(root, f"{PERFORMANCE}/{f}/bench-epoch-5.json")
    rows.append(
        (
            "tiny epoch, median, peak RSS (quiet cores)",
            f"{d['median_seconds']:.1f} s, {thousands(d['peak_rss_mb'])} MB (median of 5: "
            f"{five['median_seconds']:.1f} s) ({f}, {_link(f, 'bench-epoch.json', prefix)})"
            + _older(old, lambda o: f"{o['median_seconds']:.1f} s"),
            "≤ 15 s, ≤ 1.5 GB",
            _yes(all(g["met"] for g in d["goals"])),
        )
    )
    name, f, d, old = _tiny_warmstart(root)
    g = _goal(d, "seconds")
    rows.append(
        (
            "tiny warm start trained afresh",
            f"{minutes(d['seconds'])} ({f}, {_link(f, name, prefix)})" + _older(old, lambda o: minutes(o["seconds"])),
            f"≤ {g['target'] / 60:.0f} min",
            f"{_yes(g['met'])} (seed 0 ships)",
        )
    )
    f, d, _ = _perf(root, "bench-warmstart-five.json")
    rows.append(
        (
            "`five` warm start (quiet cores)",
            f"{minutes(d['seconds'])} ({f}, {_link(f, 'bench-warmstart-five.json', prefix)}); seed 0 ships",
            "< 30 min",
            _yes(d["seconds"] < 1800),
        )
    )
    f, d, _ = _perf(root, "bench-warmstart-smol.json")
    b = d["bounds"]
    fast = load(root, f"{PERFORMANCE}/{f}/{FAST_WARMSTART}")
    rows.append(
        (
            "`smol` warm start, float32, over its compute bound",
            f"{minutes(d['seconds'])}; its SFT and held-out {warmstart_multiple(d):.2f}× (agent "
            f"{b['agent_sft']['multiple']:.1f}×, simulator {b['simulator_sft']['multiple']:.1f}×); defaults now: "
            f"{minutes(fast['seconds'])}, {warmstart_multiple(fast):.2f}× ({f}, "
            f"{_link(f, 'bench-warmstart-smol.json', prefix)}, {_link(f, FAST_WARMSTART, prefix)})",
            "≤ 2×",
            _yes(min(warmstart_multiple(d), warmstart_multiple(fast)) <= 2),
        )
    )
    f = dated(root, "bench-epoch-smol.json")[0]
    runs = {
        stem: [load(root, f"{PERFORMANCE}/{f}/bench-epoch-{stem}{v}.json") for v in ("", "-static", "-bf16")]
        for stem in ("smol", "smol-l34")
    }
    cells = [
        " / ".join(f"{runs[stem][i]['median_seconds']:.0f}" for stem in runs)
        + " s"
        + (" (" + " / ".join(f"{epoch_multiple(runs[stem][i]):.2f}×" for stem in runs) + ")" if i < 2 else "")
        for i in range(3)
    ]
    fast = load(root, f"{PERFORMANCE}/{f}/{FAST_EPOCH}")
    met = all(min(epoch_multiple(r) for r in runs[stem][:2]) <= 2 for stem in runs)  # float32 or static, each preset
    rows.append(
        (
            "`smol` / `smol-l34` epoch: float32; static decode; bfloat16",
            f"{cells[0]}; {cells[1]}; {cells[2]}; `smol-l34` opt-in: {fast['median_seconds']:.0f} s "
            f"({epoch_multiple(fast):.2f}×) ({f}, {_link(f, 'bench-epoch-smol.json', prefix)}, "
            f"{_link(f, 'bench-epoch-smol-l34.json', prefix)}, {_link(f, FAST_EPOCH, prefix)})",
            "≤ 2× (float32)",
            _yes(met or epoch_multiple(fast) <= 2),
        )
    )
    return rows


def warmstart_multiple(data: dict[str, Any]) -> float:
    """A `bench warmstart` result's SFT and epoch-0 held-out seconds over the float32 compute bound of their model
    work (its ``seconds``, the warm start alone, leaves the held-out out and counts its loading and saving).

    >>> warmstart_multiple({"agent_seconds": 30, "simulator_seconds": 50, "heldout_seconds": 20,
    ...                     "bounds": {"a": {"bound_seconds": 10}, "b": {"bound_seconds": 40}}})
    2.0
    """
    seconds = data["agent_seconds"] + data["simulator_seconds"] + data["heldout_seconds"]
    return seconds / sum(part["bound_seconds"] for part in data["bounds"].values())


def epoch_multiple(data: dict[str, Any]) -> float:
    """A `bench epoch` result's median epoch (every phase, also those without model work) over the float32
    compute bound of its phases' model work.

    >>> epoch_multiple({"median_seconds": 30.0, "phase_work": {"rollout": {"bound_seconds": 10.0}, "validate": {}}})
    3.0
    """
    return data["median_seconds"] / sum(w.get("bound_seconds") or 0 for w in data["phase_work"].values())


def _tiny_warmstart(root: Path) -> tuple[str, str, dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """The tiny warm start trained afresh at the default spin: the newest ``bench-warmstart-s<N>.json`` is the
    source; each older folder's first seed is cited."""
    found: list[tuple[str, str]] = []
    for folder in (root / PERFORMANCE).iterdir():
        if folder.is_dir() and DATED_FOLDER.match(folder.name):
            names = sorted(
                p.name
                for p in folder.glob("bench-warmstart-s*.json")
                if re.fullmatch(r"bench-warmstart-s\d+\.json", p.name)
            )
            if names:
                found.append((folder.name, names[0]))
    found.sort(reverse=True)
    (f, name), rest = found[0], found[1:]
    return (
        name,
        f,
        load(root, f"{PERFORMANCE}/{f}/{name}"),
        [(g, load(root, f"{PERFORMANCE}/{g}/{n}")) for g, n in rest],
    )


def performance_table(root: Path) -> str:
    lines = ["| what | measured | goal | met |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in performance_rows(root)]
    return "\n".join(lines)


def performance_finding(root: Path) -> str:
    _, roll, _ = _perf(root, "bench-rollouts-tiny-1thread.json")
    _, store, _ = _perf(root, "bench-store.json")
    _, views, _ = _perf(root, "console-views.json")
    _, lat, _ = _perf(root, "console-latency.json")
    _, epoch, _ = _perf(root, "bench-epoch.json")
    _, _, warm, _ = _tiny_warmstart(root)
    met = all(g["met"] for g in epoch["goals"])
    epoch_text = f"the tiny epoch ({epoch['median_seconds']:.1f} s, {thousands(epoch['peak_rss_mb'])} MB)"
    warm_met = _goal(warm, "seconds")["met"]
    return (
        f"rollouts {roll['ratio']:.1f}× over one `generate` per prompt, store pages ≤ "
        f"{_worst_page_ms(store):.1f} ms, the console's views on a 100k-task session ≤ "
        f"{_slowest_view_ms(views):.0f} ms, "
        f"key-to-screen p95 {lat['key_to_screen']['p95_ms']:.1f} ms"
        + (f" and {epoch_text}" if met else "")
        + " meet their goals; "
        + ("" if met else f"{epoch_text} and ")
        + f"the tiny warm start trained afresh ({minutes(warm['seconds'])}) "
        + ("meets its goal" if warm_met else "does not (seed 0's ships)")
    )


def performance_span(root: Path) -> str:
    days = sorted(day(p.name) for p in (root / PERFORMANCE).iterdir() if p.is_dir() and DATED_FOLDER.match(p.name))
    return f"{days[0]} to {days[-1]}"
