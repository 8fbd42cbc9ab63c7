"""Crash-safety trials: SIGKILL a real `genenv run`/`genenv resume` at chosen moments, resume, check everything.

Each trial starts a fresh session (``genenv run --preset P --epochs E``) in a subprocess and kills it
with SIGKILL at one moment, chosen by the trial's mode (modes cycle):

- ``random``: after a uniform random delay within a warm-cache run's measured duration;
- ``checkpoint``: as soon as a checkpoint temp folder (``checkpoints/.tmp-epoch_*``) appears, i.e.
  in the middle of writing a checkpoint;
- ``commit``: right after the SQLite WAL file is written (size or mtime changes), i.e. during or just
  after a commit;
- ``warmstart``: while the warm start is being trained into its cache temp folder (cold cache only);
- ``resume``: a random kill of the first run and then a second random kill of the resume.

After each kill the script records what was committed (tasks, rollouts, batches, finished epochs and
events of the finished epochs), then runs ``genenv resume`` to the end and checks: exit 0;
``PRAGMA integrity_check`` and the FTS index's integrity check pass; epochs 0..E are all ``done``;
every checkpoint 0..E verifies (manifest and ``COMPLETE``); no temp folder is left; and every row
committed before the kill is unchanged (store-only statistics that later epochs legitimately update,
p̂/R_env/rollout counts/superseded_by, are left out of the comparison). Trials are bounded by a
per-command timeout. Results: one JSON line per trial on stdout (and in ``--out``), then a summary.

    python scripts/fault_injection.py --trials 20                 # micro preset, a throwaway cache
    GENENV_CACHE=~/.cache/genenv python scripts/fault_injection.py --preset tiny --trials 5 --epochs 2 \\
        --require-cached                                          # tiny, only if its warm start is cached
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from genenv_engine.storage.session import stale_temp_paths, verify_checkpoint  # noqa: E402

MODES = ("random", "checkpoint", "commit", "warmstart", "resume")
VOLATILE = ("p_hat", "r_env", "n_rollouts", "superseded_by")
"""Task columns that later epochs update on purpose (replayed tasks get new statistics)."""


def genenv(*args: str, env: dict[str, str]) -> list[str]:
    return [sys.executable, "-m", "genenv_engine", *args]


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    fh = log.open("a")
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def kill(proc: subprocess.Popen) -> bool:
    """SIGKILL the process group; False when the process had already exited."""
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def wait_for(proc: subprocess.Popen, predicate, timeout: float, poll: float = 0.002) -> bool:
    """Poll until ``predicate()`` holds (True) or the process exits / the timeout passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if predicate():
            return True
        time.sleep(poll)
    return False


def committed(db: Path) -> dict:
    """What is durably in the store now: rows of finished epochs, and events (read-only connection)."""
    if not db.exists():
        return {"done": -1, "tasks": {}, "rollouts": {}, "batches": {}, "epochs": {}, "events": {}}
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        done_row = conn.execute("SELECT max(epoch) FROM epochs WHERE status = 'done'").fetchone()[0]
        done = -1 if done_row is None else int(done_row)
        keep = lambda row: {k: row[k] for k in row.keys() if k not in VOLATILE}  # noqa: E731
        tasks = {
            r["id"]: keep(r)
            for r in conn.execute(
                "SELECT * FROM tasks WHERE origin NOT IN ('generated', 'static') OR epoch <= ?", [done]
            )
        }
        rollouts = {r["id"]: dict(r) for r in conn.execute("SELECT * FROM rollouts WHERE epoch <= ?", [done])}
        batches = {r["id"]: dict(r) for r in conn.execute("SELECT * FROM batches WHERE epoch <= ?", [done])}
        epochs = {r["epoch"]: dict(r) for r in conn.execute("SELECT * FROM epochs WHERE epoch <= ?", [done])}
        events = {r["id"]: dict(r) for r in conn.execute("SELECT * FROM events")}
    finally:
        conn.close()
    return {"done": done, "tasks": tasks, "rollouts": rollouts, "batches": batches, "epochs": epochs, "events": events}


def check(session: Path, epochs: int, before: list[dict], cache: Path) -> list[str]:
    """Every problem found in the finished session (empty list: the trial passed)."""
    problems = []
    db = session / "genenv.db"
    conn = sqlite3.connect(db, timeout=30)
    try:
        ok = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if ok != "ok":
            problems.append(f"integrity_check: {ok}")
        try:
            conn.execute("INSERT INTO tasks_fts(tasks_fts) VALUES('integrity-check')")
        except sqlite3.DatabaseError as exc:
            problems.append(f"fts integrity: {exc}")
        rows = conn.execute("SELECT epoch, status FROM epochs ORDER BY epoch").fetchall()
    finally:
        conn.close()
    if rows != [(e, "done") for e in range(epochs + 1)]:
        problems.append(f"epochs not contiguous/done: {rows}")
    for e in range(epochs + 1):
        bad = verify_checkpoint(session / "checkpoints" / f"epoch_{e:03d}")
        if bad:
            problems.append(f"checkpoint epoch_{e:03d}: {bad}")
    leftovers = [p.name for p in (session / "checkpoints").glob(".tmp-*")]
    if (cache / "warmstart").is_dir():  # a live process's temp folder (another run sharing the cache) is fine
        leftovers += [p.name for p in stale_temp_paths(cache / "warmstart", "*.tmp[0-9]*", ".tmp")]
    if leftovers:
        problems.append(f"temp folders left: {leftovers}")
    after = committed(db)
    for snap in before:
        for table in ("tasks", "rollouts", "batches", "epochs", "events"):
            lost = [k for k in snap[table] if k not in after[table]]
            changed = [k for k, v in snap[table].items() if k in after[table] and after[table][k] != v]
            if table == "epochs" and snap["done"] < 0:
                continue
            if lost or changed:
                problems.append(
                    f"{table}: {len(lost)} committed rows lost, {len(changed)} changed (e.g. {(lost or changed)[:2]})"
                )
    return problems


def trial(n: int, mode: str, opts, workdir: Path, est: float) -> dict:
    session = workdir / f"trial{n:03d}"
    cache = Path(os.environ["GENENV_CACHE"]) if opts.shared_cache else workdir / "cache"
    if mode == "warmstart" and not opts.shared_cache:
        cache = workdir / f"cache-cold-{n}"  # a cold cache, so there is a warm start to interrupt
    env = {**os.environ, "GENENV_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    log = workdir / f"trial{n:03d}.log"
    run_args = genenv(
        "run",
        "--preset",
        opts.preset,
        "--session",
        str(session),
        "--epochs",
        str(opts.epochs),
        "--seed",
        str(opts.seed),
        "--quiet",
        env=env,
    )
    rng = random.Random(opts.seed * 1000 + n)
    t0 = time.monotonic()
    proc = start(run_args, env, log)
    moment = mode
    if mode == "checkpoint":
        # skip a random number of checkpoint writes so kills land in different epochs
        skip = rng.randrange(opts.epochs + 1)
        seen: set[str] = set()

        def in_checkpoint() -> bool:
            names = {p.name for p in (session / "checkpoints").glob(".tmp-epoch_*")} if session.exists() else set()
            fresh = names - seen
            seen.update(names)
            return bool(fresh) and len(seen) > skip

        hit = wait_for(proc, in_checkpoint, opts.timeout)
        moment = f"checkpoint write #{len(seen)}" if hit else "checkpoint (none seen)"
    elif mode == "commit":
        wal = session / "genenv.db-wal"
        target = rng.uniform(0.1, 0.7) * est
        state: dict = {"seen": None}

        def written() -> bool:
            try:
                st = wal.stat()
                now = (st.st_size, st.st_mtime_ns)
            except FileNotFoundError:
                now = None
            changed = now is not None and state["seen"] is not None and now != state["seen"]
            state["seen"] = now
            return changed and time.monotonic() - t0 >= target

        hit = wait_for(proc, written, opts.timeout)
        moment = f"WAL written at {time.monotonic() - t0:.1f}s" if hit else "commit (not seen)"
    elif mode == "warmstart":

        def training() -> bool:
            return (cache / "warmstart").is_dir() and any((cache / "warmstart").glob("*.tmp*"))

        hit = wait_for(proc, training, opts.timeout)
        if hit:
            time.sleep(rng.uniform(0.0, 1.0))
        moment = "warm start" if hit else "warm start (cached: none)"
    else:
        delay = rng.uniform(0.3, max(1.0, 0.7 * est))  # runs vary with the machine's load: stay inside one
        wait_for(proc, lambda: False, delay)
        moment = f"random {delay:.1f}s"
    first_run = time.monotonic() - t0
    killed = kill(proc)
    before = [committed(session / "genenv.db")]
    kills = [moment] if killed else []
    resume_args = genenv("resume", str(session), "--quiet", env=env)
    if mode == "resume" and killed and (session / "config.toml").exists():
        proc = start(resume_args, env, log)
        delay = rng.uniform(0.5, max(1.0, est * 0.35))
        wait_for(proc, lambda: False, delay)
        if kill(proc):
            kills.append(f"resume random {delay:.1f}s")
            before.append(committed(session / "genenv.db"))
    if not (session / "config.toml").exists():  # killed before the session existed: start it again
        final = subprocess.run(run_args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=opts.timeout)
    else:
        final = subprocess.run(resume_args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=opts.timeout)
    with log.open("a") as fh:
        fh.write(final.stdout + final.stderr)
    problems = [] if final.returncode == 0 else [f"resume exited {final.returncode}: {final.stderr.strip()[-300:]}"]
    if final.returncode == 0:
        problems += check(session, opts.epochs, before, cache)
    snap = before[-1]
    result = {
        "trial": n,
        "mode": mode,
        "kills": kills,
        "done_at_kill": [b["done"] for b in before],
        "rows_checked": sum(len(b["tasks"]) + len(b["rollouts"]) + len(b["events"]) for b in before),
        "tasks_at_kill": len(snap["tasks"]),
        "rollouts_at_kill": len(snap["rollouts"]),
        "seconds": round(time.monotonic() - t0, 1),
        "passed": not problems,
        "problems": problems,
        "unkilled_run_seconds": None if killed else round(first_run, 1),
    }
    if not opts.keep and not problems:
        shutil.rmtree(session, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--preset", default="micro")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", default=",".join(MODES), help="comma list, cycled over the trials")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per command (bounds each trial)")
    parser.add_argument("--workdir", type=Path, help="where sessions go (default: a temp folder)")
    parser.add_argument("--out", type=Path, help="also write the JSON lines here")
    parser.add_argument("--keep", action="store_true", help="keep passed trials' sessions")
    parser.add_argument(
        "--shared-cache",
        action="store_true",
        help="use $GENENV_CACHE as is (e.g. tiny's cached warm start); no warm-start kills",
    )
    parser.add_argument(
        "--require-cached",
        action="store_true",
        help="exit 3 unless the preset's warm start is already cached in $GENENV_CACHE",
    )
    opts = parser.parse_args(argv)
    modes = [m for m in opts.modes.split(",") if m]
    if opts.shared_cache:
        modes = [m for m in modes if m != "warmstart"]
    if opts.require_cached:
        from genenv_engine.config import load_config
        from genenv_engine.training.warmstart import cache_key, cache_root

        key = cache_key(load_config(opts.preset, overrides={"seed": opts.seed, "epochs": opts.epochs}))
        if not (cache_root() / "warmstart" / key / "info.json").exists():
            print(f"no cached warm start {cache_root() / 'warmstart' / key}: not running", file=sys.stderr)
            return 3
    workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="genenv-faults-"))
    workdir.mkdir(parents=True, exist_ok=True)
    # two uninterrupted runs first: the first warms the cache, the second measures how long a run takes
    env = {
        **os.environ,
        "GENENV_CACHE": str(os.environ["GENENV_CACHE"] if opts.shared_cache else workdir / "cache"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
    }
    for name in ("reference-cold", "reference"):
        shutil.rmtree(workdir / name, ignore_errors=True)
        t0 = time.monotonic()
        ref = subprocess.run(
            genenv(
                "run",
                "--preset",
                opts.preset,
                "--session",
                str(workdir / name),
                "--epochs",
                str(opts.epochs),
                "--seed",
                str(opts.seed),
                "--quiet",
                env=env,
            ),
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=opts.timeout,
        )
        est = time.monotonic() - t0
        if ref.returncode != 0:
            print(ref.stdout + ref.stderr, file=sys.stderr)
            return 1
    print(json.dumps({"reference_run_seconds": round(est, 1), "workdir": str(workdir)}), flush=True)
    results = []
    out = opts.out.open("a") if opts.out else None
    for n in range(opts.trials):
        result = trial(n, modes[n % len(modes)], opts, workdir, est)
        results.append(result)
        if result["unkilled_run_seconds"]:  # the run beat the kill: runs are faster now, aim earlier
            est = min(est, result["unkilled_run_seconds"])
        line = json.dumps(result)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()
    passed = sum(r["passed"] for r in results)
    killed = sum(bool(r["kills"]) for r in results)
    summary = {
        "preset": opts.preset,
        "trials": len(results),
        "passed": passed,
        "killed": killed,
        "kills": sum(len(r["kills"]) for r in results),
        "rows_checked": sum(r["rows_checked"] for r in results),
        "by_mode": {
            m: [sum(r["passed"] for r in results if r["mode"] == m), sum(1 for r in results if r["mode"] == m)]
            for m in modes
        },
    }
    print(json.dumps({"summary": summary}), flush=True)
    if out:
        out.write(json.dumps({"summary": summary}) + "\n")
        out.close()
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
