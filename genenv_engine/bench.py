"""``genenv bench update-memory``: peak memory and time of one policy update, naive versus micro-batched.

Each configuration runs in a fresh Python process (so its peak resident memory is its own): load the
model (SmolLM2 LoRA by default), then one GRPO-style step on a batch of ``batch`` random sequences of
``seq`` tokens whose second half is the completion, with a KL term to a frozen reference adapter as
in the real update. Settings are ``micro_batch:logprob_chunk``: ``0:0`` is the naive update (the whole
batch at once, full-vocabulary logits and their log-softmax at every position, as a plain
``model(...).logits`` implementation does); ``0:100000`` is the whole batch with the completion-only
gather; the smol preset runs ``8:1024``. Memory goals live here, not in timed tests.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def _one(model: str, batch: int, seq: int, micro: int, chunk: int, checkpointing: bool = False) -> dict[str, float]:
    """Run one update in this process and report its figures."""
    import random

    import torch

    from genenv_engine.config import ModelConfig
    from genenv_engine.models import warmstart_agent
    from genenv_engine.trainer import GRPOTrainer, Group

    torch.set_num_threads(2)
    common = dict(agent_tuning="lora", max_length=seq, micro_batch=micro, logprob_chunk=max(1, chunk),
                  gradient_checkpointing=checkpointing)
    cfg = ModelConfig(kind="smollm2", **common) if model == "smollm2" else ModelConfig(kind="hf", path=model, **common)
    policy = warmstart_agent(cfg, 0)
    reference = policy.frozen_copy()
    if chunk == 0:  # the naive baseline: logits and log-softmax over the full vocabulary at every position
        import types

        def naive_logprobs(self, batch):
            self.activate()
            logits = self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1]
            return logits.float().log_softmax(-1).gather(-1, batch.targets.unsqueeze(-1)).squeeze(-1) * batch.mask
        for p in (policy, reference):
            p.logprobs = types.MethodType(naive_logprobs, p)
    loaded_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rng = random.Random(0)
    vocab = len(policy.tokenizer)
    half = seq // 2
    groups = []
    for g in range(batch // 4):  # groups of 4 rollouts with mixed rewards
        prompt = [rng.randrange(vocab) for _ in range(half)]
        groups.append(Group(prompt, [[rng.randrange(vocab) for _ in range(seq - half)] for _ in range(4)],
                            [1.0, 0.0, 1.0, 0.0]))
    trainer = GRPOTrainer(policy, reference, lr=1e-4, clip=0.2, kl_coef=0.01, minibatch=batch, micro_batch=micro)
    started = time.perf_counter()
    info = trainer.update(groups, rng)
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"micro_batch": micro, "logprob_chunk": chunk, "gradient_checkpointing": checkpointing,
            "batch": batch, "seq": seq, "steps": info["steps"],
            "seconds": round(seconds, 3), "peak_rss_mb": round(peak_mb), "after_load_mb": round(loaded_mb)}


def update_memory(model: str, batch: int, seq: int, settings: list[tuple[int, int, bool]]) -> list[dict[str, float]]:
    """Each (micro_batch, logprob_chunk, gradient checkpointing) setting in its own process; returns their figures."""
    rows = []
    for micro, chunk, checkpointing in settings:
        out = subprocess.run([sys.executable, "-m", "genenv_engine.bench", "_one", model, str(batch), str(seq),
                              str(micro), str(chunk), str(int(checkpointing))], capture_output=True, text=True)
        if out.returncode != 0:
            rows.append({"micro_batch": micro, "logprob_chunk": chunk, "error": out.stderr.strip().splitlines()[-1]})
        else:
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def add_bench_parser(sub) -> None:
    """Register ``genenv bench`` with ``update-memory`` and every benchmark of `genenv_engine.benches`."""
    import importlib

    from genenv_engine.benches import BENCHES

    bench = sub.add_parser("bench", help="engine benchmarks (memory and speed goals live here, not in tests)")
    what = bench.add_subparsers(dest="bench", required=True)
    mem = what.add_parser("update-memory", help="peak memory of one update: naive vs micro-batched + chunked")
    mem.add_argument("--model", default="smollm2", help="smollm2 (default) or a local checkpoint folder")
    mem.add_argument("--batch", type=int, default=32)
    mem.add_argument("--seq", type=int, default=128)
    mem.add_argument("--setting", action="append", default=[], metavar="MICRO:CHUNK[:gc]",
                     help="micro_batch:logprob_chunk to measure, 0:0 = naive, a :gc suffix turns on gradient "
                          "checkpointing (repeatable; default 0:0, 0:100000, 8:1024)")
    for name, module in BENCHES.items():
        mod = importlib.import_module(module)
        parser = what.add_parser(name, help=mod.__doc__.splitlines()[0].split(": ", 1)[-1])
        parser.add_argument("--json", action="store_true", help="print the JSON result instead of tables")
        parser.add_argument("--out", type=Path, default=Path("bench-results"),
                            help="folder for bench-NAME.json (default bench-results/)")
        mod.add_arguments(parser)
    from genenv_engine.experiments.bench import add_parser as add_ablation

    add_ablation(what)


def run_bench(args: argparse.Namespace) -> int:
    """Entry point of ``genenv bench``."""
    if args.bench == "ablation":
        from genenv_engine.experiments.bench import main as ablation

        return ablation(args)
    if args.bench != "update-memory":
        return _run_named(args)
    settings = [(int(s.split(":")[0]), int(s.split(":")[1]), s.endswith(":gc")) for s in args.setting] \
        or [(0, 0, False), (0, 100_000, False), (8, 1024, False)]
    rows = update_memory(args.model, args.batch, args.seq, settings)  # type: ignore[arg-type]
    return 1 if any("error" in r for r in rows) else 0


def _run_named(args: argparse.Namespace) -> int:
    """Run one benchmark of `genenv_engine.benches`: print its tables (or JSON) and write its JSON file."""
    import importlib
    import os

    from genenv_engine.benches import BENCHES
    from genenv_engine.benches.common import finish, goals_table

    mod = importlib.import_module(BENCHES[args.bench])
    load_before = [round(x, 2) for x in os.getloadavg()]
    result = finish(args.bench, mod.run(args), load_before, args.out)
    if args.json:
        print(json.dumps(result, default=str))
    else:
        from rich.console import Console

        console = Console()
        console.print(mod.table(result))
        if result.get("goals"):
            console.print(goals_table(result))
        m = result["machine"]
        console.print(f"load average {m['load_average_before']} -> {m['load_average']} on {m['cpus']} CPUs, "
                      f"torch threads {m['torch_threads']}; JSON: {args.out / ('bench-' + args.bench + '.json')}")
    return 2 if result.get("error") else 0


if __name__ == "__main__":  # a child of `update_memory`: it inherits the parent's spin, else chooses its own
    from genenv_engine.backends.openmp import choose_spin

    choose_spin()
    if len(sys.argv) == 8 and sys.argv[1] == "_one":
        _, _, model, batch, seq, micro, chunk, checkpointing = sys.argv
        print(json.dumps(_one(model, int(batch), int(seq), int(micro), int(chunk), checkpointing == "1")))
