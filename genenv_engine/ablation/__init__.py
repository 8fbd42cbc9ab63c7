"""The ablation bench (``genenv bench ablation``, ``genenv bench records-diff``): GenEnv against its ablations on
the user's own families, and what reads its runs back.

Layered bottom-up, each module importing only those above it in this list:

- `arms`: the arms, the compute every arm must share, and the bench's plan (arms x seeds).
- `stats`: pure statistics (mean and spread, paired standard errors, per-level rates, data efficiency).
- `validity`: the simulator's drafts, valid tasks and rejections by reason per benchmark, per epoch and summed
  over an arm's seeds, and their report section.
- `runs`: one arm x seed session read back from its database as plain rows; which pairs of arms of a seed
  started from different epoch-0 agents.
- `rescore`: held-out re-scored from saved checkpoints on a larger sample, cached per epoch.
- `run_records`: a run as a small committable JSON record that outlives its session folder, checked when read.
- `records_diff`: two run records of different configurations compared on the same held-out tasks.
- `tables`: every run of a bench folder collected and summarised over seeds, arm against arm.
- `goals`: the per-seed calibration and diversity goals of a simulator arm.
- `signals`: the training-signal table per arm and epoch (share in band, informative groups, fresh tasks, RWR
  weights, simulator drift, evaluation generations).
- `markdown`, `plots`: the tables as Markdown and the two PNG plots.
- `bench`: the command: runs every unfinished arm x seed, then writes the outputs.

Every arm is an ordinary run: the strategies its settings name come from the method's registry
(`genenv_engine.method.strategies`), so an arm whose variant lives outside the engine (a study's, registered through
the ``genenv.strategies`` entry points) runs once that variant is installed. Nothing in the engine's training path
imports this package.
"""
