"""The Ray executor against the in-process one, on the micro preset with real tiny models (agent on the hf backend).

Equality is exact, by construction: with ``runtime.rollout_batch`` set, both executors cut the rollout into the same
task batches and sample batch i with the seed from (run seed, epoch, i) (`genenv_engine.executors.base`). The
hf backend's sampling noise is drawn for the whole decoding batch, so a row's tokens depend on its batch, not
only on its task; giving both executors the same batches, seeds and weights (sent bit for bit through the
object store) makes each batch's tokens equal, and small models decode on one thread in both processes, so
the float arithmetic is the same too. Everything downstream (rewards, p̂, R_env, the GRPO update, held-out
evaluation, which stays in the controller) is then equal; only timings differ. The in-process reference runs
its batches under a forked torch RNG, so the controller's own RNG stream is the same in both runs. Validation
is deterministic, so the drafts validated on the workers equal the controller's whatever the batches. The call
timeout tests run workers whose checks sleep on marked tasks (`genenv_engine.testing.SlowCheckerWorker`, a test
double) under a 3 s limit. Skipped when the ``ray`` extra is not installed.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from itertools import zip_longest

import pytest

ray = pytest.importorskip("ray")

import torch  # noqa: E402

from genenv_engine.backends import get_backend  # noqa: E402
from genenv_engine.backends.base import Sampling  # noqa: E402
from genenv_engine.config import load_config, replace_config  # noqa: E402
from genenv_engine.environments import get_environment  # noqa: E402
from genenv_engine.executors.base import GenerateJob  # noqa: E402
from genenv_engine.executors.local import LocalExecutor  # noqa: E402
from genenv_engine.executors.ray_exec import RayExecutor, WorkerTimeout  # noqa: E402
from genenv_engine.method import coevolution, loop  # noqa: E402
from genenv_engine.storage.session import Session  # noqa: E402
from genenv_engine.testing import ScriptedSimulator, SlowCheckerWorker  # noqa: E402
from genenv_engine.training import simulator as sim  # noqa: E402
from genenv_engine.training.roles import load_roles  # noqa: E402

pytestmark = pytest.mark.ray

TIMING = {"phase_seconds", "tokens_per_second", "rollout_workers", "started_at", "finished_at"}
"""Metrics that are timings (or, ``rollout_workers``, the per-worker split, which differs by construction)."""


def perturb(policy, seed: int) -> None:
    """Move every weight of ``policy`` by seeded noise (a stand-in for an update, so a sync has something to send)."""
    with torch.no_grad():
        generator = torch.Generator().manual_seed(seed)
        for p in policy.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.5)


@pytest.fixture(scope="module")
def local_ray():
    """A Ray instance of this test module only, on loopback, without the dashboard, its workers at normal priority
    (Ray starts them niced; beside another busy test process, niced workers wait for the CPU most of the time)."""
    before = os.environ.get("RAY_worker_niceness")
    os.environ["RAY_worker_niceness"] = "0"
    try:
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            _node_ip_address="127.0.0.1",
        )
        yield
        ray.shutdown()
    finally:
        if before is None:
            os.environ.pop("RAY_worker_niceness", None)
        else:
            os.environ["RAY_worker_niceness"] = before


def real_agent_scripted_simulator(role, policy):
    """The agent samples for real (hf backend, as the Ray workers do); the simulator writes valid tasks, so that
    the epoch has variation batches with p̂ and R_env."""
    return get_backend("hf", policy=policy) if role == "agent" else ScriptedSimulator(policy)


def real_backends(role, policy):
    """Both roles sample for real (hf backend), as the Ray workers do."""
    return get_backend("hf", policy=policy)


def run_micro(path, sink=None, factory=real_agent_scripted_simulator, **overrides):
    """A 2-epoch micro run with rollout batches of one task (16 batches an epoch: room to kill a worker mid-way)
    and validation batches of 3 drafts (3 an epoch, so both workers validate)."""
    cfg = load_config(
        "micro", overrides={"epochs": 2, "runtime.rollout_batch": 1, "ray.validate_batch": 3, **overrides}
    )
    session = Session.create(cfg, path)
    loop.run(session, sink or (lambda e: None), backend_factory=factory)
    return session


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The in-process run every Ray run is compared with."""
    return run_micro(tmp_path_factory.mktemp("ray-reference") / "local")


def stored(session):
    """What the run stored, less timings: rollouts, tasks (every column of the generated ones: prompt, answer,
    verdict and reason, version...; the statistics of all), batches, metrics of the co-evolution epochs (epoch 0
    is the warm start, trained by the first run and read from the cache by the second)."""
    db = session.store.db
    rollouts = list(
        db.query(
            "SELECT task_id, epoch, response, reward, success, error_type, purpose, policy_version "
            "FROM rollouts ORDER BY id"
        )
    )
    tasks = [
        {
            k: v
            for k, v in row.items()
            if k != "created_at"
            and (row["origin"] == "generated" or k in ("id", "valid", "p_hat", "r_env", "n_rollouts"))
        }
        for row in db.query("SELECT * FROM tasks ORDER BY id")
    ]
    batches = session.store.batches()
    metrics = [{k: v for k, v in m.items() if k not in TIMING} for m in session.store.epoch_metrics() if m["epoch"]]
    return rollouts, tasks, batches, metrics


@pytest.mark.slow  # 25 s on the 2-core machine at load ~3.5, 40 s at load 6 (the reference run is shared)
def test_two_ray_workers_store_what_the_in_process_run_stores(tmp_path, local_ray, reference):
    """Two micro epochs on 2 Ray workers equal the in-process run with the same seed and rollout batches exactly
    (see the module docstring for why), the generated tasks validated on the workers included; both workers took
    batches, and each epoch's rollouts record the version of the weights that sampled them (epoch e: the weights
    after epoch e-1's update). A call timeout far above any call changes nothing."""
    on_ray = run_micro(tmp_path / "ray", **{"ray.address": "local", "ray.workers": 2, "ray.call_timeout": 600.0})
    rollouts, tasks, batches, metrics = got = stored(on_ray)
    assert len(rollouts) >= 64 and batches and any(b["p_hat"] is not None for b in batches)
    generated = [t for t in tasks if t.get("origin") == "generated"]
    assert len(generated) == 16 and any(t["valid"] for t in generated)  # 8 drafts an epoch, validated on the workers
    train = [r for r in rollouts if r["purpose"] == "train"]  # held-out answers carry no sampling version
    assert {(r["epoch"], r["policy_version"]) for r in train} == {(1, 0), (2, 1)}
    assert {r["epoch"] for r in rollouts if r["purpose"] == "heldout"} == {0, 1, 2}
    assert got == stored(reference)
    for m, epoch in zip(on_ray.store.epoch_metrics()[1:], metrics, strict=False):
        workers = m["rollout_workers"]
        assert len(workers) == 2 and all(w["batches"] > 0 for w in workers)
        assert sum(w["tasks"] for w in workers) == epoch["tasks_trained"]


@pytest.mark.slow  # 65 s measured on the 2-core machine (two runs)
def test_drafts_written_on_the_workers_store_what_the_in_process_run_stores(tmp_path, local_ray):
    """With generate_batch = 3 (two batches of the 4 seeds an epoch) the workers write the drafts with their own
    simulator copies: two epochs store exactly what the in-process run with the same batches stores, the tokens
    the workers sampled counted in the metrics. (Nothing updates the real micro simulator in these two epochs:
    its tasks all record version 0; the weight sync is checked in
    `test_workers_write_drafts_with_the_simulator_weights_of_the_latest_update`.)"""
    here = run_micro(tmp_path / "local", factory=real_backends, **{"runtime.generate_batch": 3})
    there = run_micro(tmp_path / "ray", factory=real_backends, **{"runtime.generate_batch": 3, "ray.address": "local"})
    got = stored(there)
    assert got == stored(here)
    generated = [t for t in got[1] if t.get("origin") == "generated"]
    assert len(generated) == 16 and {t["simulator_version"] for t in generated} == {0}
    assert all(m["tokens_generated"] > 0 for m in got[3])


@pytest.mark.slow  # 25 s at load ~3.5, 45 s at load 6
def test_a_killed_worker_is_restarted_and_its_batches_retried(tmp_path, local_ray, reference, monkeypatch):
    """Killing a worker mid-rollout of epoch 2: Ray restarts it and re-runs its unfinished batches (the restarted
    worker, rebuilt with the weights of version 0, loads version 1 first); the run stores exactly the in-process
    run's rollouts, none lost or doubled, and the event log records the restart."""
    made = []

    def capture(*args, **kwargs):
        made.append(make(*args, **kwargs))
        return made[-1]

    make = coevolution.make_executor
    monkeypatch.setattr(coevolution, "make_executor", capture)
    killed = []

    def sink(event):
        if event.kind == "BatchProgressed" and event.phase == "rollout" and event.epoch == 2 and not killed:
            ray.kill(made[-1].actors[1], no_restart=False)
            killed.append(event.done)

    on_ray = run_micro(tmp_path / "ray", sink, **{"ray.address": "local"})
    assert killed
    assert stored(on_ray) == stored(reference)
    restarts = [e for e in on_ray.store.events() if e["kind"] == "WorkerRestarted"]
    assert len(restarts) == 1 and restarts[0]["payload"]["worker"] == 1 and restarts[0]["epoch"] == 2


def drafts_of(env, n_seeds=3):
    """Simulator drafts for ``env`` with every kind of verdict: a train task's own text (valid), a line that does
    not parse, and (on bfcl) a call whose answer does not match its query."""
    seeds, train = env.splits()["seed"][:n_seeds], env.splits()["train"]
    texts = [env.simulator_text(train[i]) for i in range(n_seeds)] + ["no task here", "=> x => y"]
    if env.name == "bfcl":
        texts.append("F: add(a:int,b:int) | Q: add 3 and 5 => add(a=3,b=9)")
    return [
        sim.Draft(
            seeds[i % n_seeds], f"e3/{seeds[i % n_seeds].id}", f"context {i}", text, [i], f"gen/e3/{env.name}/{i:04d}-0"
        )
        for i, text in enumerate(texts)
    ]


class TestOneExecutorAcrossUpdates:
    """One Ray executor and its in-process twin, shared by the tests of this class (their workers start once):
    rollout batches of 2, generation batches of 2, validation batches of 2, on bfcl and apibank. Each test moves
    the weights of its own role only and checks the other side's versions before it does, so their order does not
    matter; the workers are ended after the class, freeing their CPUs for the tests after it."""

    @pytest.fixture(scope="class")
    def executors(self, local_ray, reference):
        ray_config = replace_config(reference.config.ray, address="local", validate_batch=2)
        runtime = replace_config(reference.config.runtime, rollout_batch=2, generate_batch=2)
        cfg = replace_config(reference.config, ray=ray_config, runtime=runtime, benchmarks=("bfcl", "apibank"))
        roles = load_roles(reference, 0, backend_factory=lambda role, policy: get_backend("hf", policy=policy))
        envs = {name: get_environment(name, cfg.seed) for name in cfg.benchmarks}
        remote = RayExecutor(cfg, roles, envs, 0)
        try:
            yield cfg, roles, envs, LocalExecutor(cfg, roles, envs, 0), remote
        finally:
            remote.close()

    def test_workers_generate_with_the_weights_of_the_latest_update(self, executors):
        """After an agent update and `sync`, the workers sample with the new weights (from the object store) and
        stamp the new version: their rollouts equal in-process sampling on the updated model and differ from the
        old. (The micro agent's GRPO update leaves its weights unchanged when every reward is 0, so the test moves
        them.)"""
        _, roles, envs, local, remote = executors
        tasks = envs["bfcl"].splits()["train"][:6]
        sampling = Sampling(temperature=1.0, max_new_tokens=12)

        def texts(executor):
            scored = executor.rollout(tasks, 3, sampling, 0.5, epoch=1)
            return [(a.completion.text, a.policy_version) for s in scored for a in s.attempts]

        before = texts(remote)
        assert before == texts(local) and {v for _, v in before} == {0}
        perturb(roles.agent, 0)
        local.sync(1)
        remote.sync(1)
        after = texts(remote)
        assert {v for _, v in after} == {1}
        assert after == texts(local)
        assert [t for t, _ in after] != [t for t, _ in before]

    def test_workers_write_drafts_with_the_simulator_weights_of_the_latest_update(self, executors):
        """With generate_batch = 2, five seeds make three seeded batches over 2 workers (their own simulator
        copies): the drafts equal the in-process batched generation exactly, with the ids the unbatched generation
        gives them and the version of the simulator weights; after a simulator update and `sync_simulator` the
        workers write with the new weights (from the object store) and stamp the new version. (The test moves the
        weights itself.)"""
        cfg, roles, envs, local, remote = executors
        jobs = [GenerateJob("bfcl", envs["bfcl"].splits()["seed"][:5], 2, None, None)]
        sampling = Sampling(temperature=1.0, max_new_tokens=16, seed=7)

        def drafts(executor):
            return [
                (d.task_id, d.batch_id, d.context, d.text, d.token_ids, d.policy_version)
                for d in executor.generate(jobs, sampling, epoch=2, style="compact")
            ]

        before = drafts(remote)
        assert before == drafts(local) and {d[-1] for d in before} == {0}
        unbatched = LocalExecutor(
            replace_config(cfg, runtime=replace_config(cfg.runtime, generate_batch=0)), roles, envs, 0
        )
        assert [d[0] for d in before] == [
            d.task_id for d in unbatched.generate(jobs, sampling, epoch=2, style="compact")
        ]
        perturb(roles.simulator, 1)
        local.sync_simulator(1)
        remote.sync_simulator(1)
        after = drafts(remote)
        assert {d[-1] for d in after} == {1}
        assert after == drafts(local)
        assert [d[3] for d in after] != [d[3] for d in before]

    def test_workers_validate_drafts_as_the_controller_does(self, executors):
        """Drafts of two benchmarks, in batches of 2 round-robin over 2 workers: the generations come back in the
        drafts' order and equal the in-process validation exactly (tasks, verdicts, reasons), valid and invalid
        ones alike."""
        _, _, envs, local, remote = executors
        drafts = [d for pair in zip_longest(drafts_of(envs["bfcl"]), drafts_of(envs["apibank"])) for d in pair if d]
        options = {"epoch": 3, "generator": "simulator@e2", "origin": "generated", "style": "compact"}
        got = remote.validate(drafts, **options)
        assert got == local.validate(drafts, **options)
        assert [g.task_id for g in got] == [d.task_id for d in drafts]
        verdicts = {(g.task.benchmark, g.task.valid, g.task.reason.split(":")[0]) for g in got}
        assert {("bfcl", True, ""), ("apibank", True, ""), ("bfcl", False, "answer_mismatch")} <= verdicts
        assert {b for b, valid, _ in verdicts if not valid} == {"bfcl", "apibank"}


class TestCallTimeouts:
    """Call timeouts on workers whose checks sleep; their executor is ended after the class, freeing both CPUs."""

    @pytest.fixture(scope="class")
    def slow_executor(self, local_ray, reference):
        """A Ray executor on 2 `SlowCheckerWorker` test doubles (their checks sleep 30 s on tasks marked slow), with a
        3 s call timeout, the in-process executor beside it, and the list of the events it emits."""
        ray_config = replace_config(reference.config.ray, address="local", validate_batch=1, call_timeout=3.0)
        cfg = replace_config(
            reference.config, runtime=replace_config(reference.config.runtime, rollout_batch=1), ray=ray_config
        )
        roles = load_roles(reference, 0, backend_factory=lambda role, policy: get_backend("hf", policy=policy))
        envs = {name: get_environment(name, cfg.seed) for name in cfg.benchmarks}
        events = []
        remote = RayExecutor(cfg, roles, envs, 0, events.append, worker=SlowCheckerWorker)
        yield remote, LocalExecutor(cfg, roles, envs, 0), envs, events
        remote.close()

    @pytest.fixture
    def slow_workers(self, slow_executor):
        """`slow_executor` with its event list emptied."""
        slow_executor[-1].clear()
        return slow_executor

    @pytest.mark.slow  # 7 to 24 s measured on the 2-core machine (a worker restart takes most of it)
    def test_a_call_past_the_timeout_runs_again_on_a_restarted_worker(self, slow_workers):
        """Rollout batch 2 (worker 0) checks a task that is slow once (the test double sleeps 30 s the first time):
        past the 3 s limit the worker is killed and restarted and the batch sent again; the rollout then equals the
        in-process one exactly, and the timeout and the restart are logged (a timeout that did not fire would return
        the same rollouts after the sleep, without either event)."""
        remote, local, envs, events = slow_workers
        tasks = envs["bfcl"].splits()["train"][:4]
        tasks[2] = tasks[2].with_(id=f"{tasks[2].id}/slow-once-{uuid.uuid4().hex}")
        sampling = Sampling(temperature=1.0, max_new_tokens=4)
        got = remote.rollout(tasks, 1, sampling, 0.5, epoch=1)
        want = local.rollout(tasks, 1, sampling, 0.5, epoch=1)
        assert [(s.task.id, a.completion.text, a.reward, a.policy_version) for s in got for a in s.attempts] == [
            (s.task.id, a.completion.text, a.reward, a.policy_version) for s in want for a in s.attempts
        ]
        timeouts = [e for e in events if e.kind == "WorkerTimedOut"]
        assert [(e.worker, e.phase, e.batch, e.attempt, e.retried) for e in timeouts] == [(0, "rollout", 2, 1, True)]
        assert [e.worker for e in events if e.kind == "WorkerRestarted"] == [0]

    @pytest.mark.slow  # 18 to 51 s measured on the 2-core machine (two worker restarts)
    def test_a_batch_past_the_timeout_twice_stops_with_an_error_naming_it(self, slow_workers):
        """A validation batch whose draft is always slow times out twice: `WorkerTimeout` names the phase, batch, epoch
        and task; both timeouts are logged (the first retried, the second not); the restarted workers then validate
        the other drafts as the controller does. (A timeout that did not fire would return after the sleep, without
        raising.)"""
        remote, local, envs, events = slow_workers
        drafts = drafts_of(envs["bfcl"])[:3]
        slow = drafts[:1] + [replace(drafts[1], task_id=drafts[1].task_id + "/slow")] + drafts[2:]
        options = {"epoch": 3, "generator": "simulator@e2", "origin": "generated", "style": "compact"}
        message = (
            r"validate batch 1 of epoch 3 \(1 task gen/e3/bfcl/0001-0/slow\) ran past ray\.call_timeout = 3 s "
            r"on worker 1, 2 times"
        )
        with pytest.raises(WorkerTimeout, match=message):
            remote.validate(slow, **options)
        timeouts = [e for e in events if e.kind == "WorkerTimedOut"]
        assert [(e.worker, e.phase, e.batch, e.attempt, e.retried) for e in timeouts] == [
            (1, "validate", 1, 1, True),
            (1, "validate", 1, 2, False),
        ]
        assert [e.worker for e in events if e.kind == "WorkerRestarted"] == [1, 1]
        assert remote.validate(drafts, **options) == local.validate(drafts, **options)


def _unused_port() -> int:
    """A local TCP port nothing listens on."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_cluster_is_one_line_and_the_session_still_resumes(tmp_path, capsys):
    from genenv_engine.interfaces.cli import main

    port = _unused_port()
    folder = tmp_path / "s"
    argv = ["run", "--preset", "micro", "--session", str(folder), "--epochs", "1", "--quiet"]
    joined = ray.is_initialized()  # an earlier test's local cluster must not stand in for the address asked for
    assert main([*argv, "--ray", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach a Ray cluster at 127.0.0.1:{port}" in err and "Traceback" not in err
    assert err.count("\n") == 1 and ray.is_initialized() == joined
    # checked before the warm start: nothing was computed and no epoch is left partial
    assert main(["status", str(folder), "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["epochs"] == []
    assert not (folder / "checkpoints" / "epoch_000").exists()
    # resume --ray none runs it in this process from here on, and says so in the saved config
    assert main(["resume", str(folder), "--quiet", "--ray", "none"]) == 0
    assert 'address = ""' in (folder / "config.toml").read_text()
    capsys.readouterr()
    assert main(["status", str(folder), "--json"]) == 0
    assert [(e["epoch"], e["status"]) for e in json.loads(capsys.readouterr().out)["epochs"]] == [
        (0, "done"),
        (1, "done"),
    ]


def test_resume_takes_a_new_ray_address_and_refuses_a_malformed_one_changing_nothing(tmp_path, capsys):
    """``resume --ray`` moves a session to another cluster; an address Ray cannot take (a space in it) is one line,
    and the saved config keeps the old address."""
    from genenv_engine.interfaces.cli import main

    folder = tmp_path / "s"
    assert main(["run", "--preset", "micro", "--session", str(folder), "--epochs", "0", "--quiet"]) == 0
    before = (folder / "config.toml").read_text()
    assert main(["resume", str(folder), "--quiet", "--ray", "10.0.0.1 :6379"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("genenv: config error in 'ray.address': must be '', 'local' or a Ray address")
    assert err.count("\n") == 1 and (folder / "config.toml").read_text() == before
    port = _unused_port()  # the new address is checked before anything runs
    assert main(["resume", str(folder), "--quiet", "--epochs", "1", "--ray", f"127.0.0.1:{port}"]) == 2
    assert f"cannot reach a Ray cluster at 127.0.0.1:{port}" in capsys.readouterr().err
    assert f'address = "127.0.0.1:{port}"' in (folder / "config.toml").read_text()
    assert main(["status", str(folder), "--json"]) == 0
    import json

    assert [(e["epoch"], e["status"]) for e in json.loads(capsys.readouterr().out)["epochs"]] == [(0, "done")]


def test_workers_that_never_start_are_one_line_and_leave_nothing_running(local_ray, reference, monkeypatch):
    """Three workers of one CPU each on a 2-CPU cluster: the third stays pending, as workers do on a node the driver
    cannot reach. Past the start limit the executor ends the ones it made and says so in one line."""
    from genenv_engine.core import errors
    from genenv_engine.executors import ray_exec

    monkeypatch.setattr(ray_exec, "START_SECONDS", 3.0)
    cfg = replace_config(reference.config, ray=replace_config(reference.config.ray, address="local", workers=3))
    roles = load_roles(reference, 0, backend_factory=lambda role, policy: get_backend("hf", policy=policy))
    envs = {name: get_environment(name, cfg.seed) for name in cfg.benchmarks}
    free = lambda: ray.available_resources().get("CPU", 0.0)  # noqa: E731
    assert wait_until_true(lambda: free() == 2.0)  # the executors of the tests before have released their CPUs
    before = free()
    with pytest.raises(errors.ConfigError, match="its 3 workers did not start within 3 s") as caught:
        RayExecutor(cfg, roles, envs, 0)
    assert "\n" not in str(caught.value) and "nothing was run" in str(caught.value)
    assert wait_until_true(lambda: free() >= before)  # the workers it started were ended: their CPUs are free
    assert ray.is_initialized()  # the module's cluster, not this executor's to stop


def wait_until_true(check, seconds: float = 20.0) -> bool:
    """Whether ``check()`` holds within ``seconds`` (killed actors take a moment to release their CPUs)."""
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.05)
    return False
