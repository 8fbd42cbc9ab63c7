"""A study's pre-registered reading rule applied to its run records, rendered as the verdict table of its page.

The rule every smol-l34 plan fixes before its runs: arm A beats control B when A − B at the last epoch, on the same
re-scored held-out tasks, is at least `MIN_DIFFERENCE` and above 2 paired SE on every seed read; where the seeds
split, a third seed decides (2 of 3). A pair is refused, not read, when the two runs' epoch-0 agents answered any of
those tasks differently (their difference would include the epoch-0 agents'), and waits while either record is
missing or lacks the re-score. `pair` reads one arm × seed pair, `verdict` (text) and `outcome` (yes / no / not yet)
the seeds of one comparison, `grounded_table`, `grounded_finding` and `grounded_summary` the grounded-reward study's
table, results-index cell and README line. It reads only JSON.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from genenv_engine.ablation.stats import paired_change
from genenv_lab.figure_text import bare, signed, thousands

MIN_DIFFERENCE = 0.03
"""The smallest difference the rule counts as a win, on top of 2 paired SE."""
RESCORE = "400"
"""The re-score every pair is read on: the first 400 held-out tasks."""
BENCHMARK = "bfcl"

SMOL_L34 = "docs/results/smol-l34"
GROUNDED_PAGE = f"{SMOL_L34}/grounded/README.md"
STUDY_RECORDS = f"{SMOL_L34}/grounded/records"
"""Where the study's own run records are."""
SAME_START = f"{SMOL_L34}/grounded/records-genenv20-start"
"""The study's runs that started from genenv20's warm starts (a warm start's weights depend on the machine that
builds it): read for a comparison × seed only where the pair from `STUDY_RECORDS` is refused or missing."""
SAME_START_MARK = "†"
"""How the verdict table marks a pair read from `SAME_START`."""
REBUILT_MARK = "§"
"""How the verdict table marks a pair whose two runs started from one warm start (one key) built apart: their
agents' weight fingerprints differ."""
THREADS_MARK = "‡"
"""How the verdict table marks a pair whose two runs finished at different thread counts (``model.threads``)."""
_COMMITTED = {"trained": f"{SMOL_L34}/genenv20/records", "static": f"{SMOL_L34}/genenv20/records"}
"""The committed records the study reads where it has no run of its own: genenv20's `trained` and `static`."""
LABELS = {"off": "off(20)"}
"""How the table names an arm whose bench name is not the one the pages use."""
GROUNDED_COMPARISONS = (
    ("grounded", "frozen"),
    ("grounded", "off"),
    ("grounded", "trained"),
    ("grounded", "static"),
    ("grounded", "controller"),
    ("controller", "trained"),
    ("controller", "frozen"),
    ("controller", "unseen"),
)
"""The study's comparisons, A − B: the grounded simulator against each control, the controller against its three."""


@dataclass(frozen=True)
class Pair:
    """One seed's A − B: the difference and its paired SE at the last epoch, or why it is not read."""

    diff: float | None = None
    se: float | None = None
    epoch0_differ: int = 0
    tasks: int = 0
    missing: str | None = None
    same_start: bool = False
    rebuilt: bool = False
    threads_differ: bool = False
    sources: tuple[Path, Path] | None = field(default=None, compare=False, repr=False)

    @property
    def mark(self) -> str:
        """`SAME_START_MARK` after a space for a pair read from `SAME_START`, else nothing."""
        return f" {SAME_START_MARK}" if self.same_start else ""

    @property
    def flags(self) -> str:
        """The study page's marks of how the two runs were made: `REBUILT_MARK` when their warm starts were built
        apart (unless the pair is refused), `THREADS_MARK` when they ran at different thread counts.

        >>> Pair(0.01, 0.01, tasks=400, rebuilt=True, threads_differ=True).flags, Pair(0.01, 0.01, tasks=400).flags
        (' § ‡', '')
        """
        rebuilt = self.rebuilt and not self.epoch0_differ  # a refused pair says more
        return (f" {REBUILT_MARK}" if rebuilt else "") + (f" {THREADS_MARK}" if self.threads_differ else "")

    @property
    def read(self) -> bool:
        return self.missing is None and self.epoch0_differ == 0

    @property
    def passes(self) -> bool:
        """Whether this seed counts as a win for A.

        >>> Pair(0.03, 0.014, tasks=400).passes, Pair(0.05, 0.03, tasks=400).passes, Pair(0.04, 0.01, 1, 400).passes
        (True, False, False)
        """
        return (
            self.read
            and self.diff is not None
            and self.se is not None
            and round(self.diff, 4) >= MIN_DIFFERENCE
            and self.diff > 2 * self.se
        )

    def text(self, counted: bool = True) -> str:
        """The table cell: the difference (paired SE), bold when it passes on a seed the rule counts.

        >>> Pair(0.135, 0.0201, tasks=400).text(), Pair(missing="no record yet").text()
        ('**+0.135 (.020)**', 'no record yet')
        >>> Pair(0.025, 0.016, 2, 400).text(), Pair(0.053, 0.016, tasks=400, same_start=True).text()
        ('+0.025 (.016), refused: epoch-0 answers differ on 2 of 400', '**+0.053 (.016)** †')
        >>> Pair(0.053, 0.016, tasks=400, threads_differ=True).text(counted=False)
        '+0.053 (.016) ‡, not counted'
        """
        mark = self.mark + self.flags
        if self.missing is not None:
            return self.missing + mark
        assert self.diff is not None and self.se is not None
        body = f"{signed(self.diff)} ({bare(self.se)})"
        if self.epoch0_differ:
            body = f"{body}, refused: epoch-0 answers differ on {self.epoch0_differ} of {self.tasks}{mark}"
        else:
            body = (f"**{body}**" if self.passes and counted else body) + mark
        return body if counted else f"{body}, not counted"


def answers(record: dict, rescore: str | None = None, benchmark: str = BENCHMARK) -> tuple[str, str] | None:
    """A run record's 0/1 held-out answers at epoch 0 and at its last epoch: on the re-score of ``rescore`` tasks
    (None without it), or, with ``rescore`` None, on its largest re-score, else on the run's own held-out sample.

    >>> r = {"correct": {"0": {"bfcl": "01"}, "8": {"bfcl": "11"}}}
    >>> answers(r), answers(r, "400"), answers({**r, "rescored": {"400": {"0": {"bfcl": "0"}, "8": {"bfcl": "1"}}}})
    (('01', '11'), None, ('0', '1'))
    """
    rescored = record.get("rescored") or {}
    if rescore is None:
        by_epoch = rescored[max(rescored, key=int)] if rescored else record["correct"]
    else:
        by_epoch = rescored.get(rescore)
        if not by_epoch:
            return None
    last = max(by_epoch, key=int)
    return by_epoch["0"][benchmark], by_epoch[last][benchmark]


def threads(data: dict) -> int | None:
    """The thread count a run record's config gives (``model.threads``: the count the run finished at), None where
    the record does not hold it."""
    return ((data.get("config") or {}).get("model") or {}).get("threads")


def warm_start(data: dict) -> tuple[str | None, float | None]:
    """A run record's warm-start key and its agent's weight fingerprint (None where the record does not hold them)."""
    start = data.get("warm_start") or {}
    return start.get("key"), (start.get("fingerprints") or {}).get("agent")


def pair(a: Path, b: Path) -> Pair:
    """A − B on the re-scored tasks from two run records, with how the two runs were made: warm starts of one key
    built apart (their agents' fingerprints differ) and thread counts that differ."""
    found, data = [], []
    for path in (a, b):
        loaded = json.loads(path.read_text()) if path.is_file() else None
        got = answers(loaded, RESCORE) if loaded is not None else None
        if got is None:
            return Pair(missing="no record yet" if not path.is_file() else "waiting for the re-score")
        found.append(got)
        data.append(loaded)
    (a0, a_last), (b0, b_last) = found
    result = paired_change(b_last, a_last)
    assert result is not None and len(a0) == len(b0), (a, b)
    (key_a, print_a), (key_b, print_b) = (warm_start(d) for d in data)
    threads_a, threads_b = (threads(d) for d in data)
    return Pair(
        result[0],
        result[1],
        sum(x != y for x, y in zip(a0, b0, strict=True)),
        len(a0),
        rebuilt=key_a is not None and key_a == key_b and None not in (print_a, print_b) and print_a != print_b,
        threads_differ=None not in (threads_a, threads_b) and threads_a != threads_b,
        sources=(a, b),
    )


def third_needed(pairs: list[Pair]) -> bool:
    """Whether seeds 0 and 1 were both read and split (one passes, one does not), so a third seed decides."""
    first = pairs[:2]
    return len(first) == 2 and all(p.read for p in first) and sum(p.passes for p in first) == 1


def _state(pairs: list[Pair]) -> str:
    """Where the rule stands on one comparison: waiting, refused, split (the third seed not in yet), or its answer
    (beats / not, with "-3" when a third seed decided it)."""
    first = pairs[:2]
    if any(p.missing for p in first):
        return "waiting"
    if not all(p.read for p in first):
        return "refused"
    if not third_needed(pairs):
        return "beats" if all(p.passes for p in first) else "not"
    third = pairs[2] if len(pairs) > 2 else None
    if third is None or third.missing:
        return "split"
    if not third.read:
        return "refused"
    return "beats-3" if third.passes else "not-3"


def outcome(pairs: list[Pair]) -> bool | None:
    """Whether A beats B by the rule: True or False once decided, None while waiting, split or refused."""
    return {"beats": True, "beats-3": True, "not": False, "not-3": False}.get(_state(pairs))


def verdict(a: str, b: str, pairs: list[Pair]) -> str:
    """The rule's answer over the seeds read so far: seeds 0 and 1 decide when they agree; when they split, a third
    seed (``pairs[2]``) decides, 2 of 3.

    >>> win, flat = Pair(0.05, 0.01, tasks=400), Pair(0.01, 0.01, tasks=400)
    >>> verdict("grounded", "frozen", [win, win]), verdict("grounded", "frozen", [flat, flat])
    ('`grounded` beats `frozen`', '`grounded` does not beat `frozen`')
    >>> verdict("a", "b", [win, flat]), verdict("a", "b", [win, Pair(missing="no record yet")])
    ('split: a third seed decides', 'not yet read')
    >>> verdict("a", "b", [Pair(0.05, 0.01, 2, 400), win])
    'not read: a pair is refused'
    >>> verdict("a", "b", [win, flat, win]), verdict("a", "b", [win, flat, flat])
    ('`a` beats `b` on 2 of 3 seeds', '`a` does not beat `b` (1 of 3 seeds)')
    """
    return {
        "waiting": "not yet read",
        "refused": "not read: a pair is refused",
        "split": "split: a third seed decides",
        "beats": f"`{a}` beats `{b}`",
        "not": f"`{a}` does not beat `{b}`",
        "beats-3": f"`{a}` beats `{b}` on 2 of 3 seeds",
        "not-3": f"`{a}` does not beat `{b}` (1 of 3 seeds)",
    }[_state(pairs)]


def counted(pairs: list[Pair]) -> list[Pair]:
    """The seeds the rule reads: 0 and 1, and the third where they split."""
    return pairs if third_needed(pairs) else pairs[:2]


def record(root: Path, arm: str, seed: int) -> Path:
    """Where the grounded study reads ``arm`` × ``seed``: its own run (made on the study's code) where there is one,
    else the committed record of that arm."""
    own = root / STUDY_RECORDS / f"{arm}-s{seed}.json"
    return own if own.is_file() or arm not in _COMMITTED else root / _COMMITTED[arm] / f"{arm}-s{seed}.json"


SEEDS = (0, 1, 2)
"""The seeds the grounded study reads: 0 and 1 for every comparison, 2 where they split."""


def seed_pair(root: Path, a: str, b: str, seed: int) -> Pair:
    """A − B on one seed: from the study's records (`record`), or, only where that pair is refused or missing and
    both runs are in `SAME_START`, from those two runs, marked."""
    own = pair(record(root, a, seed), record(root, b, seed))
    start = root / SAME_START
    paths = [start / f"{arm}-s{seed}.json" for arm in (a, b)]
    if own.read or not all(path.is_file() for path in paths):
        return own
    return replace(pair(*paths), same_start=True)


def grounded_pairs(root: Path, seeds: tuple[int, ...] = SEEDS) -> list[tuple[str, str, list[Pair]]]:
    """Every comparison of the grounded study, by the names the pages use, with its seeds' pairs."""
    return [
        (LABELS.get(a, a), LABELS.get(b, b), [seed_pair(root, a, b, s) for s in seeds]) for a, b in GROUNDED_COMPARISONS
    ]


def _cell(pairs: list[Pair], i: int) -> str:
    """Seed ``i``'s cell: seeds 0 and 1 always; a third seed counted where they split, and shown but not counted
    where they agree ("not run: not needed" where it has no pair, "—" while seeds 0 and 1 are not both read)."""
    if i < 2 or third_needed(pairs):
        return pairs[i].text()
    if not all(p.read for p in pairs[:2]):
        return "—"
    extra = pairs[i] if i < len(pairs) else None
    if extra is None or extra.diff is None:
        return "not run: not needed"
    return extra.text(counted=False)


def uncounted(pairs: list[Pair]) -> list[Pair]:
    """The pairs past seeds 0 and 1 that have a difference but that the rule does not count (seeds 0 and 1 agree)."""
    if third_needed(pairs) or not all(p.read for p in pairs[:2]):
        return []
    return [p for p in pairs[2:] if p.diff is not None]


def _reversed(p: Pair) -> Pair:
    """B − A from A − B."""
    assert p.diff is not None
    return replace(p, diff=-p.diff)


def _name(path: Path) -> str:
    """A run record as the notes name it: ``grounded-s2.json`` -> `grounded`-s2."""
    arm, _, seed = path.stem.rpartition("-")
    return f"`{LABELS.get(arm, arm)}`-{seed}"


def _order(path: Path) -> tuple[str, int]:
    """Runs in the notes' order: by seed, then by the order of the study's comparisons."""
    arm, _, seed = path.stem.rpartition("-")
    arms = [x for pair in GROUNDED_COMPARISONS for x in pair]
    return seed, arms.index(arm) if arm in arms else len(arms)


def _grouped(runs: dict[Path, Any], say: Any) -> str:
    """Runs grouped by one value each, "run, run <value> against run <value>", in the notes' order."""
    by: dict[Any, list[str]] = {}
    for path in sorted(runs, key=_order):
        by.setdefault(runs[path], []).append(_name(path))
    return " against ".join(f"{_listed(names)} {say(value)}" for value, names in by.items())


def _listed(names: list[str]) -> str:
    """Names the way prose lists them.

    >>> _listed(["a"]), _listed(["a", "b"]), _listed(["a", "b", "c"])
    ('a', 'a and b', 'a, b and c')
    """
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _notes(rows: list[tuple[str, str, list[Pair]]]) -> list[str]:
    """The notes under the verdict table: seed 2 where it is not counted, and each mark the table uses."""
    notes = []
    shown = [(a, b, p) for a, b, pairs in rows for p in uncounted(pairs)]
    if shown:
        against = [
            f"`{b}` − `{a}` {signed(-p.diff)} on seed 2 ({abs(p.diff) / p.se:.1f} paired SE)"
            for a, b, p in shown
            if p.diff is not None and p.se and _reversed(p).passes
        ]
        notes.append(
            "Seed 2 was run for the comparisons whose seeds 0 and 1 split; where they agree its pair is shown but not "
            "counted (the plan reads a third seed only on a split)"
            + (f", and it passes the rule the other way: {'; '.join(against)}." if against else ".")
        )
    marked = [p for _, _, pairs in rows for p in pairs if p.sources is not None and p.flags]
    rebuilt = [path for p in marked if p.rebuilt and p.read for path in p.sources]
    for seed in sorted({_order(path)[0] for path in rebuilt}):
        runs = {path: warm_start(json.loads(path.read_text()))[1] for path in rebuilt if _order(path)[0] == seed}
        built = [
            f"{_name(path)}'s record: built on {json.loads(path.read_text())['warm_start']['built_on']}"
            for path in sorted(runs, key=_order)
            if (json.loads(path.read_text()).get("warm_start") or {}).get("built_on")
        ]
        notes.append(
            f"{REBUILT_MARK} {seed.replace('s', 'seed ')}: the two runs started from one warm start (one key) built "
            f"twice, on different machines: their agents' weight fingerprints differ "
            f"({_grouped(runs, lambda v: f'{v:.3f}')}{''.join(f'; {b}' for b in built)}). Their epoch-0 answers "
            "agree on every task, so the rule reads the pair."
        )
    counts = {path: threads(json.loads(path.read_text())) for p in marked if p.threads_differ for path in p.sources}
    if counts:
        notes.append(
            f"{THREADS_MARK} the two runs finished at different thread counts (`model.threads` in their records: "
            f"{_grouped(counts, lambda v: f'at {v}')}): sums can round differently "
            "at another thread count, as on another machine; [RUNS.md](RUNS.md) logs which epochs ran at which."
        )
    if any(p.same_start for _, _, pairs in rows for p in pairs):
        notes.append(
            f"{SAME_START_MARK} read from two runs that started from genenv20's warm start of that seed "
            f"([{Path(SAME_START).name}/]({Path(SAME_START).name}/)), where the study's own pair is refused or "
            "missing."
        )
    return notes


def grounded_table(root: Path, seeds: tuple[int, ...] = SEEDS) -> str:
    """The grounded study's verdict table (Markdown), read from its run records, with notes under it: seed 2 where
    the rule does not count it, and where the pairs marked `REBUILT_MARK`, `THREADS_MARK` and `SAME_START_MARK`
    come from."""
    head = "| A − B | " + " | ".join(f"seed {s}" for s in seeds) + " | seeds that pass | reading |"
    lines = [head, "|" + "---|" * (len(seeds) + 3)]
    rows = grounded_pairs(root, seeds)
    for a, b, pairs in rows:
        cells = " | ".join(_cell(pairs, i) for i in range(len(seeds)))
        read = [p for p in counted(pairs) if p.missing is None]
        wins = sum(p.passes for p in read)
        lines.append(f"| `{a}` − `{b}` | {cells} | {wins} of {len(read)} | {verdict(a, b, pairs)} |")
    for note in _notes(rows):
        lines += ["", textwrap.fill(note, 118, break_long_words=False, break_on_hyphens=False)]
    return "\n".join(lines)


def _short(p: Pair) -> str:
    """A pair as the results index lists it: the difference, ⚠ when refused, † when read from genenv20's warm
    start, … while it waits.

    >>> _short(Pair(0.015, 0.012, tasks=400)), _short(Pair(0.02, 0.01, 2, 400)), _short(Pair(missing="no record yet"))
    ('+0.015', '+0.020 ⚠', '…')
    >>> _short(Pair(0.05, 0.01, tasks=400, same_start=True))
    '+0.050 †'
    """
    if p.missing is not None or p.diff is None:
        return "…"
    return signed(p.diff) + (" ⚠" if p.epoch0_differ else "") + p.mark


def probe_answers(root: Path, seeds: tuple[int, ...] = SEEDS) -> list[tuple[int, int]]:
    """(seed, count) of the grounded arm's probe answers: the agent's greedy answers to its siblings before and
    after each epoch's update (``eval_generations``, summed over the epochs), for each seed whose record holds them."""
    found = []
    for seed in seeds:
        path = root / STUDY_RECORDS / f"grounded-s{seed}.json"
        epochs = json.loads(path.read_text()).get("epochs") or [] if path.is_file() else []
        counts = [e["eval_generations"] for e in epochs if e.get("eval_generations") is not None]
        if counts:
            found.append((seed, int(sum(counts))))
    return found


def probes(root: Path) -> tuple[str, str] | None:
    """The probe answers as the index and the README quote them, the counts and the seeds they belong to
    ("2,992 / 2,672", "0 / 1"; "0–2" for three or more seeds), None where no record holds them."""
    found = probe_answers(root)
    if not found:
        return None
    names = f"{found[0][0]}–{found[-1][0]}" if len(found) > 2 else " / ".join(str(s) for s, _ in found)
    return " / ".join(thousands(n) for _, n in found), names


_LEGENDS = {
    "⚠": "⚠ refused: epoch-0 agents differ",
    SAME_START_MARK: f"{SAME_START_MARK} two runs from genenv20's warm start",
}
"""The index cell's marks, each explained once, by the first comparison that carries it."""


def grounded_finding(root: Path, seeds: tuple[int, ...] = SEEDS) -> str:
    """The results index's cell for the grounded study: each comparison's difference on the seeds the rule reads and,
    in brackets, a seed 2 it does not count, each mark explained by the first comparison that carries it; the
    grounded arm's probe answers; then the rule's answers once every pair is read (until then, that the runs are
    under way)."""
    rows = grounded_pairs(root, seeds)
    listed, explained = [], set()
    for a, b, pairs in rows:
        text = f"{a} − {b} " + " / ".join(
            [_short(p) for p in counted(pairs)] + [f"({_short(p)})" for p in uncounted(pairs)]
        )
        new = [mark for mark in _LEGENDS if mark in text and mark not in explained]
        explained.update(new)
        listed.append(text + (f" ({'; '.join(_LEGENDS[m] for m in new)})" if new else ""))
    head = "seeds 0 / 1 on 400 tasks, and seed 2 where they split (in brackets where it is run but not counted)"
    counts = probes(root)
    read = f"; the grounded reward read {counts[0]} probe answers on seeds {counts[1]}" if counts else ""
    if any(_state(pairs) in ("waiting", "split") for _, _, pairs in rows):
        return f"{head}: {'; '.join(listed)} (… runs under way){read}; read when every pair is in"
    rule = "; ".join(verdict(a, b, pairs) for a, b, pairs in rows)
    return f"{head}: {'; '.join(listed)}{read}. By the plan's rule: {rule}"


def apart(root: Path, arms: tuple[str, ...], seeds: tuple[int, ...] = SEEDS) -> bool | None:
    """Whether the rule, read on every seed in both directions, puts any of ``arms`` ahead of another on a majority
    of the seeds; None while a pair of them is missing or refused on a seed."""
    for a in arms:
        for b in arms:
            if a == b:
                continue
            pairs = [seed_pair(root, a, b, s) for s in seeds]
            if not all(p.read for p in pairs):
                return None
            if 2 * sum(p.passes for p in pairs) > len(pairs):
                return True
    return False


_NAMED = {"frozen": "frozen", "trained": "α-trained"}
"""How the README's finding names the simulator arms the controller is compared with."""


def grounded_summary(root: Path) -> str:
    """The README's finding for the grounded study, one sentence from the rule's verdicts: whether training the
    simulator on the grounded reward beats the same simulator frozen (and, once decided, the α-trained one), and
    whether the procedural controller beats the simulator, is beaten by it, or, read on every seed both ways, is no
    more apart from the simulator arms than they are from each other; with the grounded arm's probe answers."""
    said = {(a, b): outcome(pairs) for a, b, pairs in grounded_pairs(root)}
    pays, alpha = said[("grounded", "frozen")], said[("grounded", "trained")]
    if pays is None:
        first = "whether the simulator trained on the agent's measured progress beats itself frozen is being measured"
    else:
        verdict = {
            (True, True): "beats itself frozen and α-trained",
            (True, False): "beats itself frozen but not α-trained",
            (False, True): "does not beat itself frozen but beats it α-trained",
            (False, False): "beats neither itself frozen nor α-trained",
        }
        first = "trained on the agent's measured progress, the simulator " + (
            verdict[pays, alpha]
            if alpha is not None
            else "beats itself frozen"
            if pays
            else "does not beat itself frozen"
        )
    beaten = [b for b in ("frozen", "trained") if said[("controller", b)]]
    if beaten:
        second = f"a procedural controller beats the {' and '.join(_NAMED[b] for b in beaten)} simulator" + (
            "s" if len(beaten) == 2 else ""
        )
    elif said[("grounded", "controller")]:
        second = "it beats a procedural controller"
    elif all(
        said[k] is False for k in (("controller", "frozen"), ("controller", "trained"), ("grounded", "controller"))
    ):
        second = (
            f"with a procedural controller, no arm is apart from another on {len(SEEDS)} seeds"
            if apart(root, ("grounded", "frozen", "trained", "controller")) is False
            else "neither it nor a procedural controller beats the other"
        )
    else:
        second = "whether a procedural controller is apart from it is still open"
    counts = probes(root)
    if counts:
        first = first.replace("trained on the agent's measured progress, the", "the", 1)
        head = f"**Grounded reward**, progress on {counts[0]} probe answers (seeds {counts[1]}):"
    else:
        head = "**Grounded reward**:"
    line = f"- {head} {first}; {second} ([grounded]({GROUNDED_PAGE}))."
    return textwrap.fill(line, 118, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
