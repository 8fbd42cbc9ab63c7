"""The rows of the results index, ``docs/results/README.md``: each study and its main finding, the figures read from
its run records and JSON under ``docs/results/``.

`held_out`, `change` and `versus` read a run record's held-out answers into a change or a difference with its
paired SE; a study's finding is rendered from them (`index_rows`), and a study whose finding has no JSON source gets
a cell without figures that links to its page. `results_index` is the index's table; `findings` the README's
generated findings (the grounded and chain studies) and `chain_section` the chain page's paragraph on its lead over
all levels. It reads only JSON.
"""

from __future__ import annotations

import statistics
import textwrap
from pathlib import Path
from typing import Any

from genenv_engine.ablation.stats import paired_change
from genenv_lab.figure_text import bare, joined, rounded, seed_spread, signed, t_two_sided
from genenv_lab.performance import RESULTS, load, performance_finding, performance_span
from genenv_lab.reading import answers, grounded_finding, grounded_summary
from genenv_lab.trainers import trainers_finding


def held_out(root: Path, rel: str, benchmark: str = "bfcl") -> tuple[str, str]:
    """A run record's 0/1 held-out string at epoch 0 and at its last epoch: the largest re-score when the record
    has one, else the run's own held-out sample."""
    found = answers(load(root, rel), benchmark=benchmark)
    assert found is not None
    return found


def change(root: Path, rel: str) -> tuple[float, float]:
    """One run's held-out change, epoch 0 to its last epoch, with its paired SE."""
    result = paired_change(*held_out(root, rel))
    assert result is not None
    return result


def versus(root: Path, a: str, b: str) -> tuple[float, float]:
    """Run ``a`` minus run ``b`` at their last epoch on the same held-out tasks, with its paired SE."""
    result = paired_change(held_out(root, b)[1], held_out(root, a)[1])
    assert result is not None, (a, b)
    return result


def _with_se(pair: tuple[float, float]) -> str:
    return f"{signed(pair[0])} ({bare(pair[1])})"


def _se_range(pairs: list[tuple[float, float]]) -> str:
    ratios = sorted(d / se for d, se in pairs)
    return f"{ratios[0]:.1f}–{ratios[-1]:.1f} SE"


# ---- the results index ---------------------------------------------------------------------------------------


def epoch0_differ(root: Path, a: str, b: str) -> int:
    """On how many held-out tasks the epoch-0 agents of runs ``a`` and ``b`` answered differently (the pair's
    difference then includes the two epoch-0 agents')."""
    a0, b0 = held_out(root, a)[0], held_out(root, b)[0]
    assert len(a0) == len(b0), (a, b)
    return sum(x != y for x, y in zip(a0, b0, strict=True))


def _flagged(root: Path, a: str, b: str) -> tuple[float, float, int]:
    """Run ``a`` minus run ``b`` with its paired SE and the epoch-0 answers that differ."""
    return (*versus(root, a, b), epoch0_differ(root, a, b))


def _marked(pairs: list[tuple[float, float, int]]) -> str:
    """Differences listed, each marked ⚠ where the epoch-0 agents differ."""
    return joined([signed(d) + (" ⚠" if n else "") for d, _, n in pairs])


def _smol_l34(root: Path) -> str:
    r = "docs/results/smol-l34"
    seeds = range(3)
    unseen = [change(root, f"{r}/records/unseen-s{s}.json") for s in seeds]

    def against(off: str) -> list[tuple[float, float, int]]:
        return [_flagged(root, f"{r}/records/unseen-s{s}.json", f"{r}/{off}/off-s{s}.json") for s in seeds]

    vs_off, vs_80, vs_20 = against("records"), against("pool80/records"), against("pool20/records")
    off20 = [change(root, f"{r}/pool20/records/off-s{s}.json")[0] for s in seeds]
    mean, sd, _ = seed_spread([d for d, _, _ in vs_off])
    counts = sorted({n for pairs in (vs_off, vs_80, vs_20) for _, _, n in pairs if n})
    size = len(held_out(root, f"{r}/records/unseen-s0.json")[0])
    span = "" if not counts else str(counts[0]) if counts[0] == counts[-1] else f"{counts[0]}–{counts[-1]}"
    legend = f"; ⚠ epoch-0 agents differ on {span} of {size} tasks" if counts else ""

    def passing(pairs: list[tuple[float, float, int]]) -> int:
        return sum(d >= 0.03 and d > 2 * se for d, se, _ in pairs)

    return (
        f"the oracle `unseen` arm rises by more than 2 paired SE on {sum(d > 2 * se for d, se in unseen)} seeds "
        f"of 3 ({joined([signed(d) for d, _ in unseen])}); its Off control: new tasks beat replayed ones on "
        f"{passing(vs_off)} seed of 3 ({_marked(vs_off)}{legend}; mean {signed(mean)} ± {bare(sd)}), and on "
        f"{passing(vs_80)} of 3 with the base pool capped at 80 tasks ({_marked(vs_80)}); at 20 tasks ahead on "
        f"{passing(vs_20)} of 3 ({_marked(vs_20)}; {_se_range([(d, se) for d, se, _ in vs_20])}), where replay "
        f"changes held-out by {signed(statistics.mean(off20), 2)}: the setting for the GenEnv arms"
    )


def _genenv20(root: Path) -> str:
    r = "docs/results/smol-l34"

    def rec(arm: str, s: int) -> str:
        return f"{r}/genenv20/records/{arm}-s{s}.json"

    seeds = range(2)
    parts = []
    for arm in ("trained", "frozen", "static"):
        parts.append(
            f"{arm} "
            + " / ".join(signed(versus(root, rec(arm, s), f"{r}/pool20/records/off-s{s}.json")[0]) for s in seeds)
        )
    tf = [versus(root, rec("trained", s), rec("frozen", s))[0] for s in seeds]
    ts = [versus(root, rec("trained", s), rec("static", s))[0] for s in seeds]
    off = [
        versus(root, rec(arm, s), f"{r}/pool20/records/off-s{s}.json")
        for arm in ("trained", "frozen", "static")
        for s in seeds
    ]
    return (
        f"every SmolLM2 simulator arm beats replaying the 20 base tasks ({joined(parts)}; {_se_range(off)}) "
        f"and none is apart from another (trained − frozen {' / '.join(signed(x) for x in tf)}, trained − "
        f"static {' / '.join(signed(x) for x in ts)}); all stay below the oracle. By the plan's 2-of-3-seeds "
        "rule, fixed after two seeds: GenEnv beats `off(20)`, not Random or Static"
    )


CHAIN = f"{RESULTS}/chain"
CHAIN_PAGE = f"{CHAIN}/README.md"
CHAIN_ARMS = ("target", "uniform-levels", "schedule", "learnability", "controller", "trained", "frozen")
CHAIN_SEEDS = range(5)


def chain_levels(root: Path) -> dict[str, list[float]]:
    """`trained` minus each other chain arm over all levels at the last epoch, one paired difference per seed."""

    def final(arm: str, s: int) -> str:
        return held_out(root, f"{CHAIN}/records/{arm}-s{s}.json", "chain")[1]

    return {
        arm: [
            (final("trained", s).count("1") - final(arm, s).count("1")) / len(final("trained", s)) for s in CHAIN_SEEDS
        ]
        for arm in CHAIN_ARMS
        if arm != "trained"
    }


def chain_test(diffs: list[float]) -> bool:
    """The chain plan's test, either way: the mean over seeds beyond twice its SE over seeds, on the side of at least
    4 of 5 seeds."""
    mean, _, ratio = seed_spread(diffs)
    return abs(ratio) > 2 and sum((x > 0) if mean > 0 else (x < 0) for x in diffs) >= len(diffs) - 1


def chain_lead(root: Path) -> dict[str, Any]:
    """`learnability`'s lead over `trained` over all levels: the differences' mean, sd, SE ratio, the two-sided
    t-test's p over the seeds, the seeds below zero, and how many of the comparisons of `trained` pass the test."""
    levels = chain_levels(root)
    diffs = levels["learnability"]
    mean, sd, ratio = seed_spread(diffs)
    return {
        "mean": mean,
        "sd": sd,
        "ratio": ratio,
        "p": t_two_sided(ratio, len(diffs) - 1),
        "below": sum(x < 0 for x in diffs),
        "seeds": len(diffs),
        "passing": sum(chain_test(d) for d in levels.values()),
        "comparisons": len(levels),
    }


def chain_marginal(root: Path) -> str:
    """How the pages qualify `learnability`'s lead: its p-value and how many comparisons it is one of."""
    lead = chain_lead(root)
    return f"p ≈ {rounded(lead['p'], 2)}, {_count_word(lead['passing'])} of {lead['comparisons']} comparisons"


def _count_word(n: int) -> str:
    """Small counts as words.

    >>> _count_word(1), _count_word(12)
    ('one', '12')
    """
    return {0: "none", 1: "one", 2: "two", 3: "three"}.get(n, str(n))


def _chain(root: Path) -> str:
    r = CHAIN
    k6 = 0
    for arm in CHAIN_ARMS:
        for s in CHAIN_SEEDS:
            record = load(root, f"{r}/records/{arm}-s{s}.json")
            levels = record["levels"]["chain"]
            k6 += sum(
                c == "1" and lv == "L6"
                for e in record["correct"].values()
                for c, lv in zip(e["chain"], levels, strict=False)
            )
    gate = load(root, f"{r}/gate/attempt16-s0.json")
    levels_gate = gate["benchmarks"]["chain"]["levels"]
    k3 = levels_gate["L3"]["pass_at_n"]
    above = [lv for lv in ("L4", "L5", "L6", "L7", "L8") if levels_gate[lv]["pass_at_n"] > 0]
    lead = chain_lead(root)
    gate_text = f"pass@{gate['n']} {bare(k3, 2)} at k = 3, " + ("0 at k ≥ 4" if not above else "above 0 at k ≥ 4")
    return (
        f"the gate before RL is met on seed 0 at the sixteenth attempt ({gate_text}), with hint-free long "
        f"chains cut after their first calls added to the warm start; all five seeds, all seven arms: "
        f"{k6} k = 6 tasks solved at any epoch of any seed, so GenEnv does not beat any controller there; over "
        f"all levels `learnability` is ahead of it, marginally (trained − learnability {signed(lead['mean'], 4)} ± "
        f"{bare(lead['sd'], 4)}, below zero on {lead['below']} of {lead['seeds']} seeds, {abs(lead['ratio']):.1f} SE "
        f"over seeds, {chain_marginal(root)}); GenEnv's simulator admits almost none of its drafts"
    )


def chain_summary(root: Path) -> str:
    """The README's line on the chain study."""
    line = (
        "- **Chain**: no arm reaches the target level; over all levels `learnability` leads GenEnv, marginally "
        f"({chain_marginal(root)}) ([chain](docs/results/chain/README.md))."
    )
    return textwrap.fill(line, 118, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


def chain_section(root: Path) -> str:
    """The chain page's paragraph on the lead over all levels: every comparison of `trained` with another arm and
    `learnability`'s lead, with its t-test over the seeds."""
    levels = chain_levels(root)
    lead = chain_lead(root)
    each = ", ".join(
        f"`{arm}` {signed(mean, 4)} ± {bare(sd, 4)} ({sum(x > 0 for x in d)}/{len(d)})"
        for arm, d in levels.items()
        for mean, sd, _ in [seed_spread(d)]
    )
    text = (
        f"**Over all levels at epoch 8**, `trained` minus each arm (mean ± sd over seeds of the paired differences; "
        f"seeds above zero): {each}. The plan's test (mean beyond twice its SE over seeds, on the side of at least 4 "
        f"of 5 seeds) passes for {_count_word(lead['passing'])} of the {lead['comparisons']}: `learnability` ahead "
        f"of `trained`, {abs(lead['ratio']):.1f} times its SE over seeds, below zero on {lead['below']} of "
        f"{lead['seeds']}. That lead is marginal: a t-test over the {lead['seeds']} seeds gives p ≈ "
        f"{rounded(lead['p'], 2)} (two-sided, {lead['seeds'] - 1} degrees of freedom), on one of "
        f"{lead['comparisons']} comparisons read without a correction for their number."
    )
    return textwrap.fill(text, 118, break_long_words=False, break_on_hyphens=False)


RELIABILITY_PAGE = f"{RESULTS}/reliability/README.md"
RELIABILITY_SETTINGS = {"tiny-s0": 8, "rg-letter_counting-s0": 8}
"""Each reliability record on the page (its folder under ``docs/results/reliability/``) -> the attempts per task its
preset trains with (``agent.rollouts``), the k the page reads its estimators at."""
PRESET_K = RELIABILITY_SETTINGS["tiny-s0"]
ESTIMATES = (("p_hat", "p̂"), ("shrunk", "`shrunk`"), ("predicted", "`predicted`"))
"""The estimates of a batch's success the reliability bench reports, as the page names them."""


def reliability_record(setting: str) -> str:
    """The JSON of one reliability record (``docs/results/reliability/<setting>/``)."""
    return f"{RESULTS}/reliability/{setting}/bench-reliability.json"


RELIABILITY_RECORD = reliability_record("tiny-s0")


def reliability_estimates(
    root: Path, tasks_per_batch: int = 0, k: int = PRESET_K, setting: str = "tiny-s0"
) -> dict[str, dict[str, Any]]:
    """A reliability record's figures of each estimate in one (B, k) cell (B 0: each batch's own tasks)."""
    cells = load(root, reliability_record(setting))["cells"]
    cell = next(c for c in cells if c["tasks_per_batch"] == tasks_per_batch and c["k"] == k)
    return dict(cell["estimators"])


def _figure(value: float | None) -> str:
    return "—" if value is None else rounded(value, 3)


def reliability_section(root: Path, setting: str = "tiny-s0") -> str:
    """A reliability record's table of each estimate at its preset's k, on each batch's tasks and on its first
    (the smallest batch's size in the record, when that is more), and a line on how the estimators moved R_env's
    agreement and the RWR weights' from the raw p̂'s."""
    k = RELIABILITY_SETTINGS[setting]
    lines = [
        "| B | estimate | ICC | R_env ICC | RWR rank | validity | bias |",
        "|---|---|---|---|---|---|---|",
    ]
    sizes = sorted({c["tasks_per_batch"] for c in load(root, reliability_record(setting))["cells"]})
    whole = reliability_estimates(root, 0, k, setting)
    for b in sizes:
        figures = reliability_estimates(root, b, k, setting)
        if b and figures == whole:  # every batch has b tasks: the same cell as B = all
            continue
        for name, label in ESTIMATES:
            f = figures[name]
            row = [f["icc"], f["reward_icc"], f["weights_rank"], f["validity"], f["bias"]]
            lines.append(f"| {b or 'all'} | {label} | " + " | ".join(_figure(v) for v in row) + " |")
    moves = _reliability_moves(root, setting)
    return "\n".join(lines) + "\n\n" + textwrap.fill(moves, 118, break_long_words=False)


def _reliability_moves(root: Path, setting: str = "tiny-s0") -> str:
    """How each estimator moved R_env's ICC and the RWR rank agreement from p̂'s at the preset's k, all tasks."""
    k = RELIABILITY_SETTINGS[setting]
    figures = reliability_estimates(root, 0, k, setting)
    raw = figures["p_hat"]
    parts = []
    for name, label in ESTIMATES[1:]:
        f = figures[name]
        moves = [
            f"{what} {_figure(raw[key])} → {_figure(f[key])}"
            for key, what in (("icc", "ICC"), ("reward_icc", "R_env ICC"), ("weights_rank", "RWR rank"))
        ]
        parts.append(f"{label}: {', '.join(moves)}")
    return f"At k = {k} on each batch's tasks, from p̂ to each estimator: " + "; ".join(parts) + "."


def _reliability(root: Path) -> str:
    """The index's finding of the reliability study."""
    figures = reliability_estimates(root)
    each = ", ".join(
        f"{label} {_figure(figures[name]['reward_icc'])} and {_figure(figures[name]['weights_rank'])}"
        for name, label in ESTIMATES
    )
    rg = reliability_estimates(root, 0, RELIABILITY_SETTINGS["rg-letter_counting-s0"], "rg-letter_counting-s0")
    on_rg = ", ".join(
        f"{label} {_figure(rg[name]['reward_icc'])} and {_figure(rg[name]['weights_rank'])}"
        for name, label in ESTIMATES
    )
    return (
        "tiny, seed 0, epoch 1: from k = 4 attempts per task p̂ is as reliable as binomial sampling allows, but R_env "
        "and the order of the RWR weights agree below 0.5 between rounds at the preset's k = 8; from the same "
        f"attempts, R_env's ICC and the RWR rank agreement there: {each}; on `rg:letter_counting` (tiny, 16 batches "
        f"of 4 tasks): {on_rg} "
        "(figures on [its page](reliability/README.md))"
    )


def findings(root: Path) -> str:
    """The README's generated findings: the grounded study's line and the chain study's."""
    return f"{grounded_summary(root)}\n{chain_summary(root)}"


def _first_run(root: Path) -> str:
    d = load(root, f"{RESULTS}/first-run/records.json")

    def last(key: str) -> dict[str, Any]:
        return d[key]["epochs"][-1]

    finals = [last(k) for k in ("s0-final", "s1-final")]
    return (
        f"every GRPO step of the tiny agent lowers greedy held-out, the more the larger the learning rate "
        f"(seed 0, 6 epochs: {signed(last('s0-default')['delta'])} at 5e-5, {signed(last('s0-lr1e5')['delta'])} "
        f"at 1e-5); neither a stronger KL nor the warm start's SFT loss stops it; the default now (lr 2.5e-7, "
        f"T 0.7) changes held-out by {' / '.join(signed(e['delta'], 4) for e in finals)} on seeds 0 / 1 (SE "
        f"{' / '.join(bare(e['paired_se'], 4) for e in finals)}), {signed(last('s2-final')['delta'], 4)} on "
        "seed 2"
    )


def _reasoning_gym(root: Path) -> str:
    status = load(root, f"{RESULTS}/reasoning-gym/status.json")
    epochs = [e for e in status["epochs"] if e["validity"]]
    counts = []
    for name in sorted(epochs[0]["validity"]):
        valid = sum(e["validity"][name]["valid"] for e in epochs)
        drafts = sum(e["validity"][name]["drafts"] for e in epochs)
        counts.append(f"{valid} of {drafts} on `{name.replace('rg_', 'rg:', 1)}`")
    return (
        f"through the `rg:` adapter the tiny simulator writes task specifications that reasoning-gym's own "
        f"generator turns into valid tasks: over {len(epochs)} epochs the validator admitted "
        f"{', '.join(counts)}; a check of the adapter and the simulator's side, not of learning"
    )


def index_rows(root: Path) -> list[tuple[str, str]]:
    """The results index's rows: (study, main finding); the figures come from the records and JSON, and a study
    without a JSON source for its finding links to its page instead."""
    return [
        (
            "[tiny](tiny/README.md): GenEnv against its ablations, `ablation` preset, 3 seeds",
            "no arm × seed raises held-out bfcl by more than twice its paired SE; any update that moves the "
            "1.1M-parameter model lowers it (figures on [its page](tiny/README.md))",
        ),
        (
            "[tiny-grouped](tiny-grouped/README.md): the same on the stronger, length-grouped warm starts",
            "no arm moves either, the oracle included: the negative result is not an artefact of the weak warm start",
        ),
        (
            "[options](options/README.md): calibration options for the tiny simulator",
            "no option meets every calibration goal on any seed, and GenEnv is not above Off, Random and Static by "
            "more than the seed spread under any of them; the best combination calibrates through the prompt, not "
            "the RWR update ([the summary table](options/README.md#every-option-against-its-goals))",
        ),
        (
            "[steer](steer/README.md): a steer word as the success note",
            "the word steers one way (`easier` works, `harder` rarely); the RWR update makes calibration worse, not "
            "better; GenEnv is not above any ablation",
        ),
        (
            "[smol](smol/README.md): SmolLM2-135M, `smol-ablation` and `smol-l3`",
            "the α-curriculum does not beat Off; on `smol-l3` the oracle clears 2 paired SE on some seeds, and `off` "
            "on replayed L3 tasks rises about as much (figures on [its page](smol/README.md))",
        ),
        (
            "[smol-l3-replication](smol-l3-replication/README.md): `smol-l3` seed 2 rerun on another machine",
            "reproduced exactly (Δ {} on the 400-task re-score, {:.2f} SE); later warm starts built on other machines "
            "differ in their weights and a few epoch-0 answers ([smol-l34](smol-l34/README.md), "
            "[grounded](smol-l34/grounded/README.md)), so runs are not deterministic across machines and a rerun "
            "elsewhere can be a new draw".format(
                *(lambda c: (signed(c[0]), c[0] / c[1]))(
                    change(root, f"{RESULTS}/smol-l3-replication/records/unseen-s2.json")
                )
            ),
        ),
        ("[smol-l34](smol-l34/README.md): L4 in the training mix", _smol_l34(root)),
        (
            "[smol-l34 at N = 20, the GenEnv arms](smol-l34/genenv20/README.md) (seeds 0 and 1: every verdict fixed)",
            _genenv20(root),
        ),
        (
            "[smol-l34 at N = 20, a grounded simulator reward](smol-l34/grounded/README.md): the simulator rewarded by "
            "the agent's measured progress, and the procedural controller",
            grounded_finding(root),
        ),
        (
            "[chain](chain/README.md): a benchmark where the target level needs the levels below it, with "
            "difficulty-sampler arms",
            _chain(root),
        ),
        (
            "[five](five/README.md): the paper's five benchmarks at once",
            "the agent side is an experiment on all five; no arm separates. Grammar-constrained drafts with repairs "
            "([grammar](five/grammar/README.md)) raise the simulator's valid fraction on four benchmarks, alfworld "
            "stays at 0; with the answer check off and mended drafts admitted every benchmark gets valid tasks "
            "(figures on the pages)",
        ),
        (
            "[five with mended drafts, 3 seeds](five/mended/README.md)",
            "every benchmark gets valid tasks and mean p̂ near α; GenEnv beats neither `off` nor `frozen` beyond the "
            "seed spread: no benchmark's held-out moves apart in 3 epochs "
            "(figures on [its page](five/mended/README.md))",
        ),
        ("[first-run](first-run/README.md): the default run's agent settings, seeds 0–2", _first_run(root)),
        (
            "[reasoning-gym](reasoning-gym/README.md): three reasoning-gym families as genenv benchmarks",
            _reasoning_gym(root),
        ),
        (
            "[reliability](reliability/README.md): is the simulator's reward a signal? Its batches scored again",
            _reliability(root),
        ),
        (
            "[trainers](trainers/README.md): genenv's GRPO against TRL's GRPOTrainer, tiny, seeds 0 and 1",
            trainers_finding(root),
        ),
        (
            f"[performance](performance/README.md): the speed benchmarks, {performance_span(root)}",
            performance_finding(root),
        ),
    ]


def results_index(root: Path) -> str:
    lines = ["| study | main finding |", "|---|---|"]
    lines += [f"| {study} | {finding} |" for study, finding in index_rows(root)]
    return "\n".join(lines)
