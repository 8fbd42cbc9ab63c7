"""The lab: this repository's studies on top of the engine, never imported by it (an import-linter contract).

- `strategies` and `grounded`: the study variants of the epoch's strategies (the ``alpha`` seed sampler, the
  ``steer`` and ``fixed_line`` notes, the ``grounded`` reward), registered through the ``genenv.strategies`` entry
  point of the lab's distribution (``genenv_lab/pyproject.toml``);
- `figures`: the generated sections of the README, the results index and the study pages (``python -m
  genenv_lab.figures``, ``make figures``), from `performance` (the README's performance table), `index` (the results
  index's rows), `reading` (a study's pre-registered reading rule applied to its run records), `arm_signals` (the
  grounded study's table of arms) and `figure_text` (their number formats).
"""
