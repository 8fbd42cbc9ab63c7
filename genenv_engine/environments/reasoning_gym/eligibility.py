"""Whether a reasoning-gym dataset can be a genenv benchmark, and how its replies are scored.

`check_eligibility` runs `probe` in two child processes at once (their ``PYTHONHASHSEED`` differs), each bounded by
`PROBE_SECONDS`; each generates the entries of `PROBE_SEEDS` at every level, under the sandbox's containment where
the machine allows (so a generator that needs to write or spawn is refused here rather than mid-run). A dataset is
refused with one line when its generator fails or does not finish, a gold does not score 1.0 with the dataset's own
``score_answer``, the two processes' entries differ, its scorer accepts wrong answers (another entry's different
gold, or the constant `CONSTANT_REPLY`, on more than `MAX_WRONG_SHARE` of the entries, unless `WRONG_SHARE_EXCEPTIONS`
names why another gold may be right), or its scorer evaluates text (`genenv_engine.environments.reasoning_gym.scan`)
where the sandbox is not available. Provides `Eligibility` (the verdict: ``scoring`` is ``sandboxed`` for a scorer
that evaluates text, ``direct`` otherwise; the shares and scan findings), `check_eligibility` and `probe`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_engine.core.errors import ConfigError
from genenv_engine.environments.reasoning_gym.spec import config_of

PROBE_SEEDS = (0, 1, 2)
"""The seeds whose entries at every level the probe generates and scores."""
PROBE_SECONDS = 300.0
"""How long the probe's child processes may take together."""
CONSTANT_REPLY = "0"
"""A reply that no dataset should accept on most entries (entries whose gold it is are not asked)."""
MAX_WRONG_SHARE = 0.5
"""The largest share of entries on which a wrong answer may score 1.0 before the dataset is refused."""
WRONG_SHARE_EXCEPTIONS: dict[str, str] = {}
"""Datasets admitted although another entry's gold scores 1.0 on most entries, with why (an answer space in which
one answer is right for many questions); their share is shown. None is named for reasoning-gym 0.1.25."""
RESULT_TAG = "eligibility-probe "
"""The prefix of the probe's result line (after whatever the generator prints)."""


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
    stops it knows where it was."""
    from genenv_engine.environments.reasoning_gym.calls import materialize, read_curriculum, score

    attributes = read_curriculum(dataset)
    if contained:
        from genenv_engine.environments.sandbox import contain

        contain()
    digest = hashlib.sha256()
    made = []
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
        "entries": len(made),
        "longest_gold": max(len(g) for _, _, g in made),
        "other": [other, asked_other],
        "constant": [constant, asked_constant],
    }


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
    code = (
        "import json, sys\nfrom genenv_engine.environments.reasoning_gym.eligibility import probe, RESULT_TAG\n"
        "print('\\n' + RESULT_TAG + json.dumps(probe(sys.argv[1], sys.argv[2] == '1')), flush=True)"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, dataset, "1" if contained else "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _results(dataset: str, contained: bool, seconds: float) -> list[dict[str, Any]]:
    """Both children's results; a one-line `ConfigError` when one times out, dies or answers nothing."""
    children = [_start(dataset, contained, seed) for seed in ("0", "1")]
    deadline = time.monotonic() + seconds
    outputs = []
    try:
        for child in children:
            try:
                out, err = child.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for c in children:
                    c.kill()
                out, _ = child.communicate()
                where = re.findall(r"^level \d+ seed \d+$", out or "", flags=re.MULTILINE)
                at = f" (it was generating {where[-1]})" if where else ""
                raise ConfigError(
                    "benchmarks", f"rg:{dataset}: the eligibility probe did not finish within {seconds:g} s{at}"
                ) from None
            found = [line[len(RESULT_TAG) :] for line in out.splitlines() if line.startswith(RESULT_TAG)]
            if child.returncode != 0 or not found:
                tail = (err.strip().splitlines() or [f"exit status {child.returncode}"])[-1]
                raise ConfigError(
                    "benchmarks", f"rg:{dataset}: the eligibility probe failed in a child process ({_line(tail)})"
                )
            outputs.append(json.loads(found[-1]))
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.communicate()
    return outputs


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
    first, second = _results(dataset, sandbox_missing is None, seconds)
    for result in (first, second):
        if "error" in result:
            raise ConfigError("benchmarks", f"rg:{dataset}: {result['error']}")
    if first["digest"] != second["digest"]:
        raise ConfigError(
            "benchmarks",
            f"rg:{dataset}: not deterministic: its entries differ in a process with another PYTHONHASHSEED",
        )
    other, constant = _share(first["other"]), _share(first["constant"])
    if constant > MAX_WRONG_SHARE:
        raise ConfigError(
            "benchmarks",
            f"rg:{dataset}: its score_answer accepts the constant reply "
            f"{CONSTANT_REPLY!r} on {first['constant'][0]} of {first['constant'][1]} "
            "probed entries",
        )
    if other > MAX_WRONG_SHARE and dataset not in WRONG_SHARE_EXCEPTIONS:
        raise ConfigError(
            "benchmarks",
            f"rg:{dataset}: its score_answer accepts another entry's different gold on "
            f"{first['other'][0]} of {first['other'][1]} probed entries",
        )
    notes = (WRONG_SHARE_EXCEPTIONS[dataset],) if other > MAX_WRONG_SHARE else ()
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
