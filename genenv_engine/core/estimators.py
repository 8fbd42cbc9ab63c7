"""Estimators of a variation batch's success rate that are more reliable than its raw p-hat at the same attempts.

A batch's raw p-hat is s / n: its tasks' successes over their attempts. With k = 8 attempts at a few tasks, the
binomial noise of s / n is a large share of the spread between batches, and R_env folds it around alpha
(`genenv_engine.core.reliability` measures how much). Both estimators here borrow strength from what else the agent
has been measured on, at no extra attempt: each is the posterior mean of a beta-binomial model whose prior mean
m_b comes from other measurements and whose strength M from the spread the batches show around it,

    p~_b = (s_b + M m_b) / (n_b + M),

so a batch's own outcomes count for n_b attempts and the prior for M (`posterior_mean`); M is fitted by moments
(`prior_strength`): tau^2, the variance of the batches' true rates around their prior means, is the mean squared
residual less each one's binomial noise, and M = m (1 - m) / tau^2 - 1, capped at `MAX_STRENGTH`. Where the prior
means explain the batches' differences M is large and the estimate leans on them; where they explain nothing M is
small and the estimate stays near p-hat.

- `shrunk` (empirical Bayes toward the level): m_b is the mean, over the batch's tasks, of the success of the
  other generated tasks at the same (benchmark, level): this epoch's other batches (the batch's own tasks left
  out) and earlier epochs' generated tasks, weighted by `DECAY` per epoch of age; the benchmark's mean where a level
  has no other task.
- `predicted` (a difficulty predictor): m_b is the mean of a logistic model's predictions for the batch's tasks,
  fitted per benchmark on every training rollout so far (replayed base tasks too, weighted by `DECAY` per epoch of
  age; the callers read the last `HORIZON` epochs) with features level and whether the simulator wrote the task
  (`fit_logistic`).

A prior mean is itself measured (`Prior`): on so many attempts, and on so many tasks, each of which strays from its
level as a batch does from its prior. Both noises count against it in tau^2's fit and in M, so a prior resting on a
few tasks is worth as little as they are.

Pure functions over `Tally` records; `ESTIMATORS` names them for the reward strategies
(`genenv_engine.method.rewards`) and the reliability bench.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

DECAY = 0.5
"""Weight of a measurement per epoch of age: the agent learns between epochs, so last epoch's success at a level
counts half as much as this epoch's."""
MAX_STRENGTH = 64.0
"""The most attempts a prior counts for: even where the prior means seem to explain every difference between the
batches (tau^2 measured 0), a batch's own outcomes still move its estimate."""
HORIZON = 10
"""Epochs of history an estimate reads, this one included: an older epoch would weigh under `DECAY` ** 10, about a
thousandth of this one's."""
RIDGE = 1.0
"""L2 penalty on the difficulty predictor's slopes (not its intercept), in units of weighted attempts: it keeps the
fit finite when a level is always solved or always failed."""
NEWTON_STEPS = 30
"""Newton iterations of the logistic fit (it converges in a handful)."""


@dataclass(frozen=True)
class Tally:
    """One task's measured outcomes in one epoch: its benchmark and level (None: the benchmark has none), its
    successes out of its attempts, whether the simulator wrote it (``generated``; a replayed base task is not), and
    its ``age`` in epochs before the one being scored."""

    benchmark: str
    level: int | None
    successes: int
    attempts: int
    generated: bool = True
    age: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.successes <= self.attempts:
            raise ValueError(f"need 0 <= successes <= attempts, got {self.successes}/{self.attempts}")


_Key = tuple[str, int | None]
Batch = Sequence[Tally]
"""A variation batch: its tasks' tallies of the epoch being scored."""


@dataclass(frozen=True)
class Estimates:
    """An estimator's result: one success estimate per batch (None for a batch without attempts) and the prior
    strength M it used per benchmark."""

    values: list[float | None]
    strength: dict[str, float] = field(default_factory=dict)


Estimator = Callable[[Sequence[Batch], Sequence[Tally]], Estimates]
"""``estimator(batches, history)``: the epoch's batches and every other tally measured so far."""


def _sum(tallies: Iterable[Tally], decay: float = 1.0) -> tuple[float, float]:
    """Weighted successes and attempts, each tally weighted by ``decay ** age``."""
    s = n = 0.0
    for t in tallies:
        w = decay**t.age
        s += w * t.successes
        n += w * t.attempts
    return s, n


def raw(batch: Batch) -> float | None:
    """The batch's p-hat: its tasks' successes over their attempts (None without an attempt).

    >>> raw([Tally("b", 1, 3, 4), Tally("b", 2, 1, 4)])
    0.5
    """
    s, n = _sum(batch)
    return s / n if n else None


def posterior_mean(successes: float, attempts: float, mean: float, strength: float) -> float:
    """The posterior mean of a success rate under a beta prior of mean ``mean`` worth ``strength`` attempts:
    (s + M m) / (n + M).

    >>> posterior_mean(6, 8, 0.5, 0.0), posterior_mean(6, 8, 0.5, 8.0), posterior_mean(0, 0, 0.3, 4.0)
    (0.75, 0.625, 0.3)
    """
    if attempts + strength <= 0:
        return mean
    return (successes + strength * mean) / (attempts + strength)


@dataclass(frozen=True)
class Prior:
    """A batch's prior mean and what it was measured on: ``attempts`` (its binomial noise is v / attempts, v the
    benchmark's m (1 - m)) and ``tasks`` (each task's true rate strays from its level's by about tau^2, so a mean
    of few tasks does too: tau^2 / tasks); either infinite when it adds no noise."""

    mean: float
    attempts: float = math.inf
    tasks: float = math.inf

    def noise(self, tau2: float, v: float) -> float:
        """The variance of the prior mean about the rate it stands for (``v``: the binomial variance of one
        attempt).

        >>> Prior(0.5, 25, 4).noise(0.04, 0.25), Prior(0.5).noise(0.04, 0.25)
        (0.02, 0.0)
        """
        return v / self.attempts + tau2 / self.tasks


def _variance(priors: Sequence[Prior]) -> float:
    """The binomial variance of one attempt at the priors' mean rate: m (1 - m), m their mean (one variance for
    the benchmark, as a level measured at 0 has no plug-in variance of its own)."""
    m = sum(p.mean for p in priors) / len(priors) if priors else 0.5
    return m * (1 - m)


def prior_spread(tallies: Sequence[tuple[float, float]], priors: Sequence[Prior]) -> float | None:
    """tau^2, the variance of batches' true rates around their prior means, by moments from their (successes,
    attempts): the mean of (p-hat - m)^2 less p-hat (1 - p-hat) / (n - 1) (unbiased for p-hat's binomial variance)
    and less the prior mean's own binomial noise, over the mean of 1 + 1 / tasks (its noise from the few tasks it
    rests on, `Prior.noise`); at least 0. Batches under 2 attempts carry no measure of spread: None when none has
    more.

    >>> round(prior_spread([(2, 8), (5, 8), (4, 8), (7, 8)], [Prior(0.5)] * 4), 4)  # 0.0547 - 0.0279
    0.0268
    >>> round(prior_spread([(2, 8), (5, 8), (4, 8), (7, 8)], [Prior(0.5, tasks=1)] * 4), 4)  # the half of it
    0.0134
    >>> prior_spread([(3, 8), (5, 8), (4, 8), (4, 8)], [Prior(0.5)] * 4)  # no wider than binomial noise
    0.0
    >>> prior_spread([(1, 1), (0, 1)], [Prior(0.5)] * 2) is None
    True
    """
    terms, scale = [], []
    v = _variance(priors)
    for (s, n), prior in zip(tallies, priors, strict=True):
        if n < 2:
            continue
        p, m = s / n, prior.mean
        terms.append((p - m) ** 2 - p * (1 - p) / (n - 1) - prior.noise(0.0, v))
        scale.append(1 + 1 / prior.tasks)
    return max(0.0, sum(terms) / sum(scale)) if terms else None


def prior_strength(tau2: float | None, prior: Prior, v: float = 0.25) -> float:
    """The beta prior's strength M in attempts: v / (tau^2 + noise) - 1 within [0, `MAX_STRENGTH`], v the
    benchmark's m (1 - m) and the noise that of the prior mean itself (`Prior.noise`: a prior is never worth more
    than what it was measured on); 0 without a measured spread (the estimate is p-hat).

    >>> round(prior_strength(0.0268, Prior(0.5)), 2), round(prior_strength(0.0268, Prior(0.5, attempts=16)), 2)
    (8.33, 4.89)
    >>> prior_strength(0.0, Prior(0.5)), prior_strength(0.0, Prior(0.5, 24)), prior_strength(None, Prior(0.5))
    (64.0, 23.0, 0.0)
    >>> round(prior_strength(0.02, Prior(0.5, tasks=2)), 2), prior_strength(0.3, Prior(0.5))
    (7.33, 0.0)
    """
    if tau2 is None:
        return 0.0
    noise = tau2 + prior.noise(tau2, v)
    if noise <= 1e-12:
        return MAX_STRENGTH
    return min(MAX_STRENGTH, max(0.0, v / noise - 1))


def _blend(batches: Sequence[Batch], priors: Sequence[Prior | None]) -> Estimates:
    """Each batch's posterior mean toward its prior mean, tau^2 fitted per benchmark over the batches that have one
    and M per batch (`prior_strength`); a batch without a prior keeps its p-hat. ``strength``: each benchmark's M
    for a prior mean measured without noise."""
    strength: dict[str, float] = {}
    spread: dict[str, float | None] = {}
    variance: dict[str, float] = {}
    by_bench: dict[str, list[tuple[Batch, Prior]]] = {}
    for batch, prior in zip(batches, priors, strict=True):
        if batch and prior is not None and _sum(batch)[1]:
            by_bench.setdefault(batch[0].benchmark, []).append((batch, prior))
    for bench, pairs in by_bench.items():
        spread[bench] = prior_spread([_sum(b) for b, _ in pairs], [p for _, p in pairs])
        variance[bench] = _variance([p for _, p in pairs])
        strength[bench] = prior_strength(spread[bench], Prior(0.5), variance[bench])
    out: list[float | None] = []
    for batch, prior in zip(batches, priors, strict=True):
        s, n = _sum(batch)
        if not n:
            out.append(None)
        elif prior is None:
            out.append(s / n)
        else:
            bench = batch[0].benchmark
            out.append(posterior_mean(s, n, prior.mean, prior_strength(spread[bench], prior, variance[bench])))
    return Estimates(out, strength)


Cell = tuple[float, float, float]
"""Weighted successes, attempts and tasks."""


def _cells(tallies: Iterable[Tally], key: Callable[[Tally], _Key]) -> dict[_Key, Cell]:
    """Weighted successes, attempts and tasks per ``key`` of the tallies, each weighted by `DECAY` per epoch of
    age."""
    out: dict[_Key, Cell] = {}
    for t in tallies:
        w = DECAY**t.age
        s, n, k = out.get(key(t), (0.0, 0.0, 0.0))
        out[key(t)] = (s + w * t.successes, n + w * t.attempts, k + w)
    return out


def _weighted_prior(batch: Batch, priors: Sequence[Prior | None]) -> Prior | None:
    """The attempts-weighted mean of the batch's tasks' prior means and what it rests on (1 / sum of w^2 / n over
    its tasks' priors, w a task's share of the batch's attempts, for attempts and for tasks alike); None when a task
    has no prior.

    >>> _weighted_prior([Tally("b", 1, 1, 4), Tally("b", 2, 1, 4)], [Prior(0.8, 40, 5), Prior(0.4, 40, 5)])
    Prior(mean=0.6000000000000001, attempts=80.0, tasks=10.0)
    """
    weight = sum(t.attempts for t in batch)
    if not weight or any(p is None for p in priors):
        return None
    mean = per_attempt = per_task = 0.0
    for t, p in zip(batch, priors, strict=True):
        assert p is not None
        w = t.attempts / weight
        mean += w * p.mean
        per_attempt += w**2 / p.attempts
        per_task += w**2 / p.tasks
    return Prior(mean, 1 / per_attempt if per_attempt else math.inf, 1 / per_task if per_task else math.inf)


def _level(t: Tally) -> tuple[str, int | None]:
    return t.benchmark, t.level


def _bench(t: Tally) -> tuple[str, int | None]:
    return t.benchmark, None


def _left_out(pooled: Cell, own: Cell) -> Prior | None:
    """The pooled rate less the batch's own share, and what it rests on (None when nothing else is left)."""
    n = pooled[1] - own[1]
    return Prior((pooled[0] - own[0]) / n, n, pooled[2] - own[2]) if n > 1e-9 else None


def shrunk(batches: Sequence[Batch], history: Sequence[Tally] = ()) -> Estimates:
    """Empirical-Bayes shrinkage of each batch toward the success of the other generated tasks at its tasks' levels
    (module docstring): this epoch's other batches and ``history``'s generated tallies, weighted by `DECAY` per
    epoch of age; a level with no other task falls back to its benchmark's; a batch whose benchmark has no other
    generated task keeps its p-hat.

    >>> easy = [[Tally("b", 1, 7, 8)], [Tally("b", 1, 6, 8)], [Tally("b", 1, 8, 8)]]
    >>> hard = [[Tally("b", 3, 1, 8)], [Tally("b", 3, 2, 8)], [Tally("b", 3, 0, 8)]]
    >>> est = shrunk(easy + hard)
    >>> [round(v, 3) for v in est.values], round(est.strength["b"], 2)  # each leans on its level's other batches
    ([0.875, 0.872, 0.878, 0.125, 0.128, 0.122], 64.0)
    >>> shrunk([[Tally("b", 2, 3, 8)]]).values  # nothing else measured: its p-hat
    [0.375]
    """
    every = [t for t in history if t.generated] + [t for b in batches for t in b]
    levels, benches = _cells(every, _level), _cells(every, _bench)
    means: list[Prior | None] = []
    for batch in batches:
        own_levels, own_benches = _cells(batch, _level), _cells(batch, _bench)
        priors = []
        for t in batch:
            m = _left_out(levels[_level(t)], own_levels[_level(t)])
            priors.append(m if m is not None else _left_out(benches[_bench(t)], own_benches[_bench(t)]))
        means.append(_weighted_prior(batch, priors))
    return _blend(batches, means)


def features(t: Tally) -> tuple[float, float, float]:
    """The difficulty predictor's features of a task: an intercept, its level (0 without one) and whether the
    simulator wrote it.

    >>> features(Tally("b", 3, 1, 2)), features(Tally("b", None, 0, 1, generated=False))
    ((1.0, 3.0, 1.0), (1.0, 0.0, 0.0))
    """
    return 1.0, float(t.level or 0), 1.0 if t.generated else 0.0


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Solve the small linear system a x = b by Gaussian elimination with partial pivoting.

    >>> _solve([[2.0, 1.0], [1.0, 3.0]], [3.0, 5.0])
    [0.8, 1.4]
    """
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            for j in range(c, n + 1):
                m[r][j] -= f * m[c][j]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][j] * x[j] for j in range(r + 1, n))) / m[r][r]
    return [round(v, 12) for v in x]


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def fit_logistic(rows: Sequence[tuple[Sequence[float], float, float]], ridge: float = RIDGE) -> list[float]:
    """Weighted binomial logistic regression by Newton's method: ``rows`` of (features, weighted successes,
    weighted attempts), the first feature the intercept (unpenalised), the others penalised by ``ridge``.

    >>> coef = fit_logistic([((1.0, 1.0), 90, 100), ((1.0, 2.0), 50, 100), ((1.0, 3.0), 10, 100)], ridge=0.0)
    >>> [round(_sigmoid(coef[0] + coef[1] * x), 2) for x in (1, 2, 3)]
    [0.9, 0.5, 0.1]
    >>> fit_logistic([((1.0, 1.0), 4, 4)])[1] < 5  # always solved: the penalty keeps the slope finite
    True
    """
    d = len(rows[0][0]) if rows else 0
    coef = [0.0] * d
    for _ in range(NEWTON_STEPS):
        grad = [(-ridge * coef[j] if j else 0.0) for j in range(d)]
        for x, s, n in rows:
            p = _sigmoid(sum(c * v for c, v in zip(coef, x, strict=True)))
            for i in range(d):
                grad[i] += (s - n * p) * x[i]
        step = _solve(_information(rows, coef, ridge), grad)
        coef = [c + dc for c, dc in zip(coef, step, strict=True)]
        if max((abs(v) for v in step), default=0.0) < 1e-10:
            break
    return coef


def _information(
    rows: Sequence[tuple[Sequence[float], float, float]], coef: Sequence[float], ridge: float = RIDGE
) -> list[list[float]]:
    """The penalised logistic fit's information matrix at ``coef``: sum of n p (1 - p) x x' plus the ridge on the
    slopes (and a trace on the intercept, so a single feature cell is still solvable).

    >>> _information([((1.0, 2.0), 1, 4)], [0.0, 0.0], ridge=0.0)
    [[1.000000001, 2.0], [2.0, 4.000000001]]
    """
    d = len(coef)
    info = [[(ridge if i == j and i else 0.0) + (1e-9 if i == j else 0.0) for j in range(d)] for i in range(d)]
    for x, _, n in rows:
        p = _sigmoid(sum(c * v for c, v in zip(coef, x, strict=True)))
        for i in range(d):
            for j in range(d):
                info[i][j] += n * p * (1 - p) * x[i] * x[j]
    return info


def predicted(batches: Sequence[Batch], history: Sequence[Tally] = ()) -> Estimates:
    """Each batch blended with a difficulty predictor's prediction for its tasks (module docstring): a logistic
    model of success on `features`, fitted per benchmark on the batches' and ``history``'s tallies (replayed base
    tasks too), weighted by `DECAY` per epoch of age.

    >>> base = [Tally("b", lv, s, 8, generated=False) for lv, s in ((1, 7), (2, 4), (3, 1)) for _ in range(10)]
    >>> est = predicted([[Tally("b", 1, 8, 8)], [Tally("b", 3, 0, 8)], [Tally("b", 2, 5, 8)]], base)
    >>> [round(v, 2) for v in est.values], round(est.strength["b"], 1)
    ([0.91, 0.12, 0.57], 64.0)
    """
    rows: dict[str, dict[tuple[float, ...], list[float]]] = {}
    for t in [*history, *(t for b in batches for t in b)]:
        w = DECAY**t.age
        cell = rows.setdefault(t.benchmark, {}).setdefault(features(t), [0.0, 0.0, 0.0])
        cell[0] += w * t.successes
        cell[1] += w * t.attempts
        cell[2] += w
    fits = {}
    for bench, cells in rows.items():
        data = [(x, s, n) for x, (s, n, _) in cells.items() if n > 0]
        coef = fit_logistic(data)
        fits[bench] = coef, _information(data, coef)

    def prior_of(t: Tally) -> Prior | None:
        if t.benchmark not in fits:
            return None
        coef, info = fits[t.benchmark]
        x = features(t)
        p = _sigmoid(sum(c * v for c, v in zip(coef, x, strict=True)))
        # the prediction's variance by the delta method, p (1 - p) times x' I^-1 x on the logit, as attempts
        spread = p * (1 - p) * sum(a * b for a, b in zip(x, _solve(info, list(x)), strict=True))
        # and its tasks: those sharing the task's features (the fit's smoothing across levels only adds to them)
        return Prior(p, 1 / spread if spread > 0 else math.inf, rows[t.benchmark][x][2])

    return _blend(batches, [_weighted_prior(b, [prior_of(t) for t in b]) for b in batches])


ESTIMATORS: dict[str, Estimator] = {"shrunk": shrunk, "predicted": predicted}
"""The estimators by the name their reward strategy and the reliability bench give them."""
