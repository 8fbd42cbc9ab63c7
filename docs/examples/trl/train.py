"""GenEnv with TRL's GRPOTrainer training the agent: genenv's simulator writes and validates each epoch's tasks, TRL
attempts them (its `num_generations` per task) and learns, genenv records every reward, scores each variation batch
(p-hat, R_env), updates the simulator, evaluates held-out and checkpoints. See README.md beside this file.

    python docs/examples/trl/train.py --session sessions/trl-tiny --epochs 3 --steps-per-epoch 8
    torchrun --nproc_per_node 2 docs/examples/trl/train.py --session sessions/trl-tiny2 --set runtime.threads=1

With --save, TRL saves a checkpoint at every genenv epoch boundary; the same command run again after a crash (or a
kill) continues the session from its last finished epoch and TRL from the checkpoint saved there.
"""

from __future__ import annotations

import argparse

from genenv_engine.config import load_config
from genenv_engine.config.overrides import parse_sets
from genenv_engine.integrations.trl import TrlCoEvolution


def main() -> None:
    from genenv_engine.backends.openmp import choose_spin

    choose_spin()  # as genenv's commands do, before torch loads
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--session", required=True, help="session folder: created when new, else continued")
    p.add_argument("--preset", default="tiny", help="preset of a new session (default tiny)")
    p.add_argument("--config", help="TOML file of a new session's settings")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a new session's setting")
    p.add_argument("--epochs", type=int, help="genenv epochs (a new session's, or a continued one's new target)")
    p.add_argument("--steps-per-epoch", type=int, default=8, help="TRL optimizer steps per genenv epoch")
    p.add_argument("--batch", type=int, default=8, help="TRL per_device_train_batch_size (completions per step)")
    p.add_argument("--out", help="TRL's output_dir (default <session>/trl)")
    p.add_argument("--vllm", choices=["colocate", "server"], help="generate with vLLM (TRL's use_vllm, on GPUs)")
    p.add_argument("--bf16", action="store_true", help="train in bfloat16 (GPUs)")
    p.add_argument("--save", action="store_true", help="save a TRL checkpoint at every genenv epoch boundary")
    args = p.parse_args()

    sets = parse_sets(args.set) | ({"epochs": args.epochs} if args.epochs is not None else {})
    config = load_config(args.preset, args.config, sets)
    with TrlCoEvolution(args.session, config=config, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch) as coevo:
        from transformers import AutoTokenizer
        from trl import GRPOTrainer

        out = args.out or f"{args.session}/trl"
        options: dict = {"use_vllm": True, "vllm_mode": args.vllm} if args.vllm else {}
        if args.save:
            options["save_strategy"] = "steps"  # every steps_per_epoch steps: at each genenv epoch boundary
        trainer = GRPOTrainer(
            model=coevo.model(),  # the agent's folder, or its base with the session's LoRA adapter
            reward_funcs=[coevo.reward],
            args=coevo.grpo_config(
                output_dir=out,
                per_device_train_batch_size=args.batch,
                logging_steps=1,
                disable_tqdm=True,
                bf16=args.bf16,
                **options,
            ),
            train_dataset=coevo.dataset(),
            processing_class=AutoTokenizer.from_pretrained(coevo.agent_path),
            callbacks=[coevo.callback],
        )
        trainer.train(resume_from_checkpoint=coevo.resume_checkpoint(out))  # None: a new trainer
        print(f"rank {coevo.rank}/{coevo.world}: scored {coevo.scored} completions", flush=True)
    if coevo.rank == 0:
        print(f"session {args.session}: {coevo.summary}, late {coevo.late}, unknown {coevo.unknown}", flush=True)


if __name__ == "__main__":
    main()
