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

import json
import resource
import subprocess
import sys
import time


def _one(model: str, batch: int, seq: int, micro: int, chunk: int, checkpointing: bool = False) -> dict[str, float]:
    """Run one update in this process and report its figures."""
    import random

    import torch

    from genenv_engine.config import ModelConfig, RuntimeConfig
    from genenv_engine.training.models import warmstart_agent
    from genenv_engine.training.trainer import Group, GRPOTrainer

    torch.set_num_threads(2)
    runtime = RuntimeConfig(micro_batch=micro, logprob_chunk=max(1, chunk), gradient_checkpointing=checkpointing)
    common = dict(agent_tuning="lora", max_length=seq)
    cfg = ModelConfig(kind="smollm2", **common) if model == "smollm2" else ModelConfig(kind="hf", path=model, **common)
    policy = warmstart_agent(cfg, runtime, 0)
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
    for _g in range(batch // 4):  # groups of 4 rollouts with mixed rewards
        prompt = [rng.randrange(vocab) for _ in range(half)]
        groups.append(
            Group(prompt, [[rng.randrange(vocab) for _ in range(seq - half)] for _ in range(4)], [1.0, 0.0, 1.0, 0.0])
        )
    trainer = GRPOTrainer(policy, reference, lr=1e-4, clip=0.2, kl_coef=0.01, minibatch=batch, micro_batch=micro)
    started = time.perf_counter()
    info = trainer.update(groups, rng)
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "micro_batch": micro,
        "logprob_chunk": chunk,
        "gradient_checkpointing": checkpointing,
        "batch": batch,
        "seq": seq,
        "steps": info["steps"],
        "seconds": round(seconds, 3),
        "peak_rss_mb": round(peak_mb),
        "after_load_mb": round(loaded_mb),
    }


def update_memory(model: str, batch: int, seq: int, settings: list[tuple[int, int, bool]]) -> list[dict[str, float]]:
    """Each (micro_batch, logprob_chunk, gradient checkpointing) setting in its own process; returns their figures."""
    rows = []
    for micro, chunk, checkpointing in settings:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "genenv_engine.interfaces.benches.update_memory",
                "_one",
                model,
                str(batch),
                str(seq),
                str(micro),
                str(chunk),
                str(int(checkpointing)),
            ],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            rows.append({"micro_batch": micro, "logprob_chunk": chunk, "error": out.stderr.strip().splitlines()[-1]})
        else:
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":  # a child of `update_memory`: it inherits the parent's spin, else chooses its own
    from genenv_engine.backends.openmp import choose_spin

    choose_spin()
    if len(sys.argv) == 8 and sys.argv[1] == "_one":
        _, _, model, batch, seq, micro, chunk, checkpointing = sys.argv
        print(json.dumps(_one(model, int(batch), int(seq), int(micro), int(chunk), checkpointing == "1")))
