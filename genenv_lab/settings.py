"""The lab's study settings: the ``[study]`` table of a run's config, as the lab's strategies read it
(`StudySettings`, registered with `genenv_engine.config.register_settings`, read with `lab_settings`).

Settings of earlier versions still load: ``simulator.steer_hold``, ``simulator.steer_relabel`` and
``simulator.seed_beta`` are read as ``study.*`` (`genenv_engine.config.RENAMED_SETTINGS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from genenv_engine.config import RunConfig, register_settings, study_settings
from genenv_engine.config.checks import check


@register_settings
@dataclass(frozen=True)
class StudySettings:
    """The steer study's and the alpha seed sampler's settings (the ``[study]`` table)."""

    steer_hold: bool = False
    """With ``simulator.note = "steer"``, an epoch whose measured success is inside alpha +- ``curriculum.k_min``
    keeps the previous epoch's word instead of asking for ``same`` (the seed's level), so the direction that reached
    the band is held there. Does not change the warm start."""
    steer_relabel: bool = False
    """With ``simulator.note = "steer"``, the RWR update trains each generated task under the word for the level
    change it shows (seed level to task level) instead of the word it was asked with (hindsight relabelling), so the
    update does not teach that ``harder`` means "the same level" when the asked-for change did not happen."""
    seed_beta: float = 20.0
    """Sharpness of the ``alpha`` seed sampler's weighting: a seed level is drawn in proportion to its recent share
    of valid variations times exp(-seed_beta * (p_hat - alpha)^2) (> 0; with ``simulator.seed_sampling =
    "alpha"``)."""

    def __post_init__(self) -> None:
        check(self.seed_beta > 0, "study.seed_beta", "must be > 0")

    def check_run(self, config: RunConfig) -> None:
        """The settings that need another of the run."""
        steer = config.simulator.note == "steer"
        check(steer or not self.steer_hold, "study.steer_hold", "needs simulator.note = 'steer'")
        check(steer or not self.steer_relabel, "study.steer_relabel", "needs simulator.note = 'steer'")
        check(
            self.seed_beta == StudySettings.seed_beta or config.simulator.seed_sampling == "alpha",
            "study.seed_beta",
            "weights the alpha seed sampler: it needs simulator.seed_sampling = 'alpha'",
        )


def lab_settings(config: RunConfig) -> StudySettings:
    """The run's study settings (each absent one at its default).

    >>> from genenv_engine.config import load_config
    >>> lab_settings(load_config("tiny")).seed_beta
    20.0
    """
    return study_settings(config, StudySettings)
