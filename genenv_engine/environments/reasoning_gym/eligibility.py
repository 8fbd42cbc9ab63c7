"""Whether a reasoning-gym dataset can be a genenv benchmark, and how its replies are scored.

`check_eligibility` runs `probe` in two child processes at once (their ``PYTHONHASHSEED`` differs), each bounded by
`PROBE_SECONDS`; each generates the entries of `PROBE_SEEDS` at every level, under the sandbox's containment where
the machine allows (so a generator that needs to write or spawn is refused here rather than mid-run), then, for
`CROSS_SECONDS` at most, the entries of `CROSS_SEEDS` at every level, which only the comparison across the two
processes reads. A dataset is refused with one line when its generator fails or does not finish, a gold does not
score 1.0 with the dataset's own ``score_answer``, the two processes' entries differ (the line names the first
level and seed), its scorer accepts wrong answers (another entry's different gold on more than
`MAX_OTHER_GOLD_SHARE` of the entries, unless `WRONG_SHARE_EXCEPTIONS` names why another gold may be right, or the
constant `CONSTANT_REPLY` on more than `MAX_WRONG_SHARE`), or its scorer evaluates text
(`genenv_engine.environments.reasoning_gym.scan`) where the sandbox is not available. Provides `Eligibility` (the
verdict: ``scoring`` is ``sandboxed`` for a scorer that evaluates text, ``direct`` otherwise; the shares and scan
findings), `check_eligibility`, `probe`, `cross_digests` and `child` (what each child process runs).

`checked_or_kept` keeps an admitted verdict on disk, one small JSON file under
``$GENENV_CACHE/reasoning-gym/<release>/eligibility/`` named by the dataset and a digest of what decides the verdict
(the scan's findings, whether the probe ran contained, the Python version and the source of the probe's modules),
so that another process (a run's worker, ``genenv env check``'s children) reads it instead of probing again. It is
written to a temporary file and renamed, so concurrent writers leave one whole file; a refusal is never kept (a
probe that ran out of time on a loaded machine may pass on the next try).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_engine.core.errors import ConfigError
from genenv_engine.environments.reasoning_gym.spec import config_of

PROBE_SEEDS = (0, 1, 2)
"""The seeds whose entries at every level the probe generates and scores."""
CROSS_SEEDS = range(3, 18)
"""More seeds whose entries at every level each child generates after the probe, only to compare them across the two
processes, as env check compares its splits (at least 18 tasks of each level): a generator whose entries follow the
hash seed on a few seeds only (``intermediate_integration``'s level 4, seed 3) is refused here, not by env check."""
CROSS_SECONDS = 30.0
"""How long each child may spend on `CROSS_SEEDS` (a round of every level per seed); the entries both children made
in that time are compared."""
PROBE_SECONDS = 300.0
"""How long the probe's child processes may take together."""
CONSTANT_REPLY = "0"
"""A reply that no dataset should accept on most entries (entries whose gold it is are not asked)."""
MAX_WRONG_SHARE = 0.5
"""The largest share of entries on which `CONSTANT_REPLY` may score 1.0 before the dataset is refused."""
MAX_OTHER_GOLD_SHARE = 0.1
"""The largest share of entries on which another entry's different gold may score 1.0 before the dataset is refused:
the share env check's ``corrupted_fails`` allows (``SWAP_PASS_LIMIT``), so a dataset admitted here does not break
that contract on this ground (``game_of_life``'s scorer compares only the expected grid's cells, so a larger grid
whose corner matches scores 1.0)."""
WRONG_SHARE_EXCEPTIONS: dict[str, str] = {
    "n_queens": "a puzzle has several solutions: another entry's gold scores 1.0 only where it is one of this "
    "puzzle's valid answers",
}
"""Datasets admitted although another entry's gold scores 1.0 on more than `MAX_OTHER_GOLD_SHARE` of the entries,
with why (an answer space in which one answer is right for many questions); their share is shown."""
RESULT_TAG = "eligibility-probe "
"""The prefix of the probe's result line (after whatever the generator prints)."""
CROSS_TAG = "eligibility-cross "
"""The prefix of each `CROSS_SEEDS` entry's line: ``<level> <seed> <digest>``."""


@dataclass(frozen=True)
class Eligibility:
    """A dataset's verdict: ``scoring`` (``sandboxed``: its scorer evaluates text and runs only in the contained
    worker; ``direct``: nothing it runs evaluates text), the scan's ``findings``, the share of entries on which
    another entry's different gold (``other_gold_share``) and `CONSTANT_REPLY` (``constant_share``) scored 1.0,
    and whether the probe ran ``contained``."""

    dataset: str
    scoring: str
    findings: tuple[str, ...] = ()
    other_gold_share: float = 0.0
    constant_share: float = 0.0
    contained: bool = False
    entries: int = 0
    longest_gold: int = 0
    """The most characters a probed entry's gold has (the environment's reply bound follows it)."""
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())


def probe(dataset: str, contained: bool) -> dict[str, Any]:
    """The entries of `PROBE_SEEDS` at every level, generated and scored in this process (contained first when
    ``contained``): their digest, the first gold that does not score 1.0, and how many entries accept another
    entry's different gold or `CONSTANT_REPLY`. Prints ``level <k> seed <s>`` before each entry so a parent that
    stops it knows where it was. ``digests`` are each entry's ``[level, seed, digest]``."""
    from genenv_engine.environments.reasoning_gym.calls import materialize, read_curriculum, score

    attributes = read_curriculum(dataset)
    if contained:
        from genenv_engine.environments.sandbox import contain

        contain()
    digest = hashlib.sha256()
    made, digests = [], []
    for level in range(1, len(attributes[0].levels) + 1):
        config = config_of(attributes, [a.levels[level - 1] for a in attributes])
        for seed in PROBE_SEEDS:
            print(f"level {level} seed {seed}", flush=True)
            try:
                data, entry = materialize(dataset, config, seed)
                gold = str(entry["answer"])
                points = score(data, gold, entry)
            except Exception as exc:  # noqa: BLE001 - the dataset's own generator, reported in one line
                return {"error": f"its generator fails at level {level} ({type(exc).__name__}: {_line(exc)})"}
            if points != 1.0:
                return {
                    "error": f"its gold answer does not score 1.0 with its own score_answer (level {level}, "
                    f"seed {seed}: {points})"
                }
            digest.update(json.dumps([entry["question"], gold]).encode())
            digests.append([level, seed, _digest(entry["question"], gold)])
            made.append((data, entry, gold))
    other = constant = asked_other = asked_constant = 0
    for i, (data, entry, gold) in enumerate(made):
        wrong = next((g for _, _, g in made[i + 1 :] + made[:i] if g != gold), None)
        for reply, is_other in ((wrong, True), (None if gold == CONSTANT_REPLY else CONSTANT_REPLY, False)):
            if reply is None:
                continue
            try:
                accepted = score(data, reply, entry) == 1.0
            except Exception:  # noqa: BLE001 - a scorer that raises on a wrong answer refuses it
                accepted = False
            if is_other:
                asked_other += 1
                other += accepted
            else:
                asked_constant += 1
                constant += accepted
    return {
        "digest": digest.hexdigest(),
        "digests": digests,
        "entries": len(made),
        "longest_gold": max(len(g) for _, _, g in made),
        "other": [other, asked_other],
        "constant": [constant, asked_constant],
    }


def _digest(question: Any, gold: str) -> str:
    return hashlib.sha256(json.dumps([str(question), gold]).encode()).hexdigest()[:16]


def cross_digests(dataset: str, seconds: float = CROSS_SECONDS) -> Iterator[tuple[int, int, str]]:
    """``(level, seed, digest)`` of the entry of each of `CROSS_SEEDS` at every level, a round of the levels per
    seed, until ``seconds`` have passed (checked between entries); an entry the generator fails on is digested as
    its error's type, which the other process should meet too."""
    from genenv_engine.environments.reasoning_gym.calls import materialize, read_curriculum

    attributes = read_curriculum(dataset)
    configs = [config_of(attributes, [a.levels[k] for a in attributes]) for k in range(len(attributes[0].levels))]
    deadline = time.monotonic() + seconds
    for seed in CROSS_SEEDS:
        for level, config in enumerate(configs, 1):
            if time.monotonic() > deadline:
                return
            try:
                _, entry = materialize(dataset, config, seed)
                yield level, seed, _digest(entry["question"], str(entry["answer"]))
            except Exception as exc:  # noqa: BLE001 - the dataset's own generator; its error is what is compared
                yield level, seed, f"raised-{type(exc).__name__}"


def child(dataset: str, contained: bool) -> None:
    """What each probe process runs: `probe`'s result line, then a line for each entry of `cross_digests`."""
    result = probe(dataset, contained)
    print("\n" + RESULT_TAG + json.dumps(result), flush=True)
    if "error" not in result:
        for level, seed, digest in cross_digests(dataset):
            print(f"\n{CROSS_TAG}{level} {seed} {digest}", flush=True)


def _line(exc: BaseException | str) -> str:
    return " ".join(str(exc).split())[:160]


def _share(pair: list[int]) -> float:
    """``accepted / asked`` (0.0 when nothing was asked).

    >>> _share([3, 4]), _share([0, 0])
    (0.75, 0.0)
    """
    return pair[0] / pair[1] if pair[1] else 0.0


def _start(dataset: str, contained: bool, hash_seed: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    code = "import sys\nfrom genenv_engine.environments.reasoning_gym.eligibility import child\n"
    code += "child(sys.argv[1], sys.argv[2] == '1')"
    return subprocess.Popen(
        [sys.executable, "-c", code, dataset, "1" if contained else "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _results(dataset: str, contained: bool, seconds: float) -> list[tuple[dict[str, Any], dict[tuple[int, int], str]]]:
    """Both children's results and their `cross_digests` by ``(level, seed)``; a one-line `ConfigError` when one
    times out before its result, dies or answers nothing (a child past the limit after its result is stopped, and
    the entries it compared so far count)."""
    children = [_start(dataset, contained, seed) for seed in ("0", "1")]
    deadline = time.monotonic() + seconds
    outputs, late = [], False
    try:
        for child in children:
            try:
                out, err = child.communicate(timeout=0.1 if late else max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for c in children:
                    c.kill()
                out, err = child.communicate()
                late = True
            found = [line[len(RESULT_TAG) :] for line in out.splitlines() if line.startswith(RESULT_TAG)]
            if late and not found:
                where = re.findall(r"^level \d+ seed \d+$", out or "", flags=re.MULTILINE)
                at = f" (it was generating {where[-1]})" if where else ""
                raise ConfigError(
                    "benchmarks", f"rg:{dataset}: the eligibility probe did not finish within {seconds:g} s{at}"
                )
            if (child.returncode != 0 and not late) or not found:
                tail = (err.strip().splitlines() or [f"exit status {child.returncode}"])[-1]
                raise ConfigError(
                    "benchmarks", f"rg:{dataset}: the eligibility probe failed in a child process ({_line(tail)})"
                )
            cross = [line[len(CROSS_TAG) :].split() for line in out.splitlines() if line.startswith(CROSS_TAG)]
            outputs.append((json.loads(found[-1]), {(int(r[0]), int(r[1])): r[2] for r in cross if len(r) == 3}))
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.communicate()
    return outputs


def _same_across_processes(
    dataset: str,
    first: dict[str, Any],
    second: dict[str, Any],
    first_cross: dict[tuple[int, int], str],
    second_cross: dict[tuple[int, int], str],
) -> None:
    """A one-line `ConfigError` when the two children's entries differ: the probed ones, then those of
    `CROSS_SEEDS` both made (how many of those compared differ, and the first).

    >>> _same_across_processes("x", {"digests": [[1, 0, "a"]]}, {"digests": [[1, 0, "a"]]}, {(1, 3): "b"}, {})
    >>> _same_across_processes("x", {"digests": [[1, 0, "a"]]}, {"digests": [[1, 0, "a"]]}, {(2, 3): "b"},
    ...                        {(2, 3): "c"})
    Traceback (most recent call last):
    ...
    genenv_engine.core.errors.ConfigError: config error in 'benchmarks': rg:x: not deterministic: its entries differ \
in a process with another PYTHONHASHSEED (1 of 2 compared, the first at level 2 seed 3): its generator follows a \
set's order or hash() of text, so another process makes other tasks from the same specification
    """
    pairs = [((a[0], a[1]), a[2], b[2]) for a, b in zip(first["digests"], second["digests"], strict=True)]
    both = sorted(set(first_cross) & set(second_cross), key=lambda key: (key[1], key[0]))
    pairs += [(key, first_cross[key], second_cross[key]) for key in both]
    differ = [key for key, a, b in pairs if a != b]
    if differ:
        raise ConfigError(
            "benchmarks",
            f"rg:{dataset}: not deterministic: its entries differ in a process with another PYTHONHASHSEED "
            f"({len(differ)} of {len(pairs)} compared, the first at level {differ[0][0]} seed {differ[0][1]}): its "
            "generator follows a set's order or hash() of text, so another process makes other tasks from the same "
            "specification",
        )


def check_eligibility(
    dataset: str, findings: tuple[str, ...], sandbox_missing: str | None, seconds: float = PROBE_SECONDS
) -> Eligibility:
    """The verdict on ``dataset`` given its scorer's scan ``findings`` and why the sandbox is missing here (None
    when it works); a one-line `ConfigError` naming the first condition that refuses it."""
    if findings and sandbox_missing:
        raise ConfigError(
            "benchmarks",
            f"rg:{dataset}: its score_answer runs the reply as code ({findings[0]}) "
            f"and the sandbox cannot contain it here ({sandbox_missing})",
        )
    started = time.monotonic()
    (first, first_cross), (second, second_cross) = _results(dataset, sandbox_missing is None, seconds)
    for result in (first, second):
        if "error" in result:
            raise ConfigError("benchmarks", f"rg:{dataset}: {result['error']}")
    _same_across_processes(dataset, first, second, first_cross, second_cross)
    other, constant = _share(first["other"]), _share(first["constant"])
    if constant > MAX_WRONG_SHARE:
        raise ConfigError(
            "benchmarks",
            f"rg:{dataset}: its score_answer accepts the constant reply "
            f"{CONSTANT_REPLY!r} on {first['constant'][0]} of {first['constant'][1]} "
            "probed entries",
        )
    if other > MAX_OTHER_GOLD_SHARE and dataset not in WRONG_SHARE_EXCEPTIONS:
        raise ConfigError(
            "benchmarks",
            f"rg:{dataset}: its score_answer accepts another entry's different gold on "
            f"{first['other'][0]} of {first['other'][1]} probed entries",
        )
    notes = (WRONG_SHARE_EXCEPTIONS[dataset],) if other > MAX_OTHER_GOLD_SHARE else ()
    return Eligibility(
        dataset,
        "sandboxed" if findings else "direct",
        tuple(findings),
        other,
        constant,
        sandbox_missing is None,
        int(first["entries"]),
        int(first["longest_gold"]),
        round(time.monotonic() - started, 2),
        notes,
    )


KEY_MODULES = ("eligibility", "calls", "spec", "scan")
"""The modules of this package whose source is part of a kept verdict's key (the probe and what it calls)."""


def verdict_path(dataset: str, version: str, findings: tuple[str, ...], contained: bool, root: Path) -> Path:
    """Where ``dataset``'s admitted verdict is kept under ``root`` (``$GENENV_CACHE/reasoning-gym``) for
    reasoning-gym ``version``: its name holds a digest of the findings, containment, Python version and the source
    of `KEY_MODULES`, so a change to any of them probes again."""
    digest = hashlib.sha256(json.dumps([list(findings), contained, sys.version_info[:2]]).encode())
    here = Path(__file__).resolve().parent
    for module in KEY_MODULES:
        digest.update((here / f"{module}.py").read_bytes())
    return root / version / "eligibility" / f"{dataset}-{digest.hexdigest()[:16]}.json"


def read_kept(path: Path) -> Eligibility | None:
    """The verdict kept at ``path``, or None when there is none or it does not read whole."""
    try:
        row = json.loads(path.read_text(encoding="utf-8"))
        return Eligibility(**{**row, "findings": tuple(row["findings"]), "notes": tuple(row["notes"])})
    except (OSError, ValueError, TypeError, KeyError):
        return None


def keep(path: Path, verdict: Eligibility) -> None:
    """Write ``verdict`` to ``path`` whole: to a temporary file beside it, then renamed over it (a cache that
    cannot be written only costs the probe again)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(dataclasses.asdict(verdict), file)
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    except OSError:
        pass


def checked_or_kept(
    dataset: str, findings: tuple[str, ...], sandbox_missing: str | None, version: str, root: Path
) -> Eligibility:
    """`check_eligibility`'s verdict on ``dataset``, read from ``root`` when an earlier process kept it (see the
    module docstring); a verdict it admits is kept there."""
    path = verdict_path(dataset, version, findings, sandbox_missing is None, root)
    kept = read_kept(path)
    if kept is not None and kept.dataset == dataset:
        return kept
    verdict = check_eligibility(dataset, findings, sandbox_missing)
    keep(path, verdict)
    return verdict
