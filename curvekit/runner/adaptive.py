"""``curvekit run --adaptive``: measure the critical batch size in rounds.

A full sweep trains the same number of trials at every batch size. An adaptive run trains
a few trials on a coarse grid of the candidate batch sizes, then, round after round, fits
the curve and sends the next trials where they shrink the interval of B_crit most per
trial. Every trial is an ordinary trial of the sweep's plan (:mod:`curvekit.runner.plan`):
a study's trials are the first N points of its quasi-random sequence, so each study in the
store is an ordinary study of N trials, read by every command like any other.

**A round.** After its trials are saved, the workload goes into the store and the round
reads it back through the one door into the measurements: each trial's first step at the
goal (:func:`curvekit.measure.trial_hits`, the paper's definition, as ``steps-to-result``)
and the fit with its calibrated interval (:func:`curvekit.scaling.fit_workload`). B_crit is
the point that fit reports (:func:`curvekit.scaling.critical_point`: the bias-corrected
estimate at the centre of its interval wherever the estimator's requirements are met, else
the plain fit). The interval's **relative width** is (high − low) / B_crit. The run stops
when it is at most the target width, or when the trial budget is spent.

**The first round** (:func:`first_grid`) trains the first trials at every other batch size,
the smallest and the largest included (6 of the demo's 11), or at all of them when that
would leave fewer than 6. The law is fitted by unweighted least squares to every batch
size that reaches the goal, so each one in the fit must be measured well: a batch size
with two trials adds its noise to the fit whatever else is measured. Starting coarse
leaves the choice of more batch sizes to the rules below.

**While the fit gives B_crit no interval.** The interval is the calibrated one of
:mod:`curvekit.intervals`, which declines where it cannot be calibrated and says why. A
round without an interval places its trials where they make one possible, in the fewest
trials (:func:`allocate` with ``interval=False``, or with fewer than 4 batch sizes with 3
trials at the goal):

* fewer than 3 batch sizes reach the goal (no fit): the batch sizes without a point,
  fewest trials first, then cheapest; fewer than 4: likewise, nearest the fitted B_crit
  (in octaves) before cheapest;
* fewer than 4 batch sizes have 3 trials at the goal: of the batch sizes short of 3, as
  many as the interval lacks, those expected to reach 3 in the fewest trials, each new
  trial reaching the goal at the batch size's rate so far, (hits + 1) / (n + 2); on a tie
  the farther from B_crit (the ends of the curve carry its asymptotes), then the cheaper.
  They get only the trials they are expected to need, one at a time to the one with the
  fewest expected, so such a round may hold fewer trials than a round's count;
* B_crit with fewer than 2 batch sizes reaching the goal on one side: that side's batch
  sizes without a point, fewest trials first, then nearest B_crit, until each is expected
  to reach the goal once (at 1 in n + 2).

Such a round's note is the fit's reason, and the run only stops at the budget: the target
is met by a real interval alone.

**Once the interval can be calibrated** (:func:`allocate`), each trial goes to the batch
size whose next trial narrows the **forecast** interval most. The calibrated interval is
log B̂_crit − t* · s: quantiles t* of the bootstrap-t pivot from simulated studies, times
s, the data's residual scatter about the law. The forecast takes the law (S_min, B_crit)
and the trial-noise tail (σ, k) the estimator fitted to the data now, simulates studies of
the design (trials per batch size) as the interval simulates them, runs the estimator on
them for t*, and scales each study's squared residual now (at least the variance its trial
noise gives it on average) by how much the variance of its minimum falls with the added
trials in the simulations, for s. Every design is simulated from the same random numbers,
so designs differ by their trial counts alone. One trial after the other, each to the
batch size that narrows the forecast most, the design updated before the next, so a round
spreads where the gains do. The budget counts trials, so the gain is per trial; of equal
gains, the cheaper trial (:func:`trial_cost`: the examples it processes). Batch sizes
whose trials never reached the goal are not in the fit and get trials here only when every
batch size in it is at its cap.

Each round's choices (trials per batch size and why), and the fit after it, are recorded
in ``adaptive.json`` in the work folder before and after its trials run, and in every
study's ``extra.runner.adaptive`` in the store; ``curvekit fit`` and the report show
them. A round recorded before a kill is trained again with its finished trials kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from curvekit import structured
from curvekit.errors import CurvekitError, RunError
from curvekit.outputs import write_file
from curvekit.runner.limits import MAX_TRIALS, check_count

if TYPE_CHECKING:
    from curvekit.runner.plan import Sweep, TrialSpec
    from curvekit.store.store import Store

__all__ = ["ADAPTIVE_FILE", "Adaptive", "AdaptiveResult", "AdaptiveRun", "Round",
           "adaptive_record", "allocate", "round_rows", "run_adaptive", "trial_cost"]

ADAPTIVE_FILE = "adaptive.json"
RECORD_FORMAT = 1
FIRST_GRID_MIN = 6
"""The fewest batch sizes a first round on every other batch size keeps (the calibrated
interval needs 4 reaching the goal, and B_crit one beyond it on each side)."""
FORECASTS = 400
"""Simulated studies per design in a round's forecast of B_crit's interval."""
_LN2 = math.log(2.0)


@dataclass(frozen=True)
class Adaptive:
    """The settings of an adaptive run (``curvekit run --adaptive``).

    ``metric``, ``goal`` and ``maximize`` say which steps to result; ``trial_budget`` caps
    the run's trials, all rounds together; ``target_width`` stops it once B_crit's
    interval is at most that wide relative to B_crit (None: spend the budget);
    ``round_trials`` trials go into each round after the first (None: as many as there
    are batch sizes); ``bootstrap`` simulations give each round's calibrated interval.

    >>> Adaptive("val/classification_error", 0.05, trial_budget=105).round_trials is None
    True
    """

    metric: str
    goal: float
    trial_budget: int
    target_width: float | None = None
    round_trials: int | None = None
    bootstrap: int = 1000
    maximize: bool = False

    def check(self) -> Adaptive:
        """The settings, checked (:class:`RunError` names a wrong one)."""
        check_count(self.trial_budget, "trial budget", 1, MAX_TRIALS)
        if self.round_trials is not None:
            check_count(self.round_trials, "round trials", 1, MAX_TRIALS)
        check_count(self.bootstrap, "bootstrap resamples", 1, 100_000)
        if not isinstance(self.goal, (int, float)) or not math.isfinite(self.goal):
            raise RunError(f"goal {self.goal!r} is not a finite number; give the value the "
                           f"metric must pass, e.g. --goal 0.05")
        width = self.target_width
        if width is not None and (not isinstance(width, (int, float))
                                  or not math.isfinite(width) or width <= 0):
            raise RunError(f"target width {width!r} is not a positive number; give the "
                           "interval's width relative to B_crit, e.g. --target-width 0.3")
        return self

    def shape(self) -> dict[str, Any]:
        """What a resumed run must share (the budget and the target may change)."""
        return {"metric": self.metric, "goal": float(self.goal), "maximize": self.maximize,
                "round_trials": self.round_trials, "bootstrap": self.bootstrap}


@dataclass(frozen=True)
class Round:
    """One round: the trials it added per batch size, why, and the fit after it."""

    number: int
    added: dict[int, int]
    why: dict[int, str]
    totals: dict[int, int]
    b_crit: float | None = None
    low: float | None = None
    high: float | None = None
    points: int | None = None
    note: str = ""
    fitted: bool = False

    @property
    def width(self) -> float | None:
        """The interval's width relative to B_crit (None without an interval)."""
        if self.b_crit is None or self.low is None or self.high is None or self.b_crit <= 0:
            return None
        return (self.high - self.low) / self.b_crit

    @property
    def trials(self) -> int:
        """Trials of the run after this round."""
        return sum(self.totals.values())

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record (batch-size keys as strings)."""
        return {"round": self.number, "added": {str(b): n for b, n in self.added.items()},
                "why": {str(b): w for b, w in self.why.items()},
                "totals": {str(b): n for b, n in self.totals.items()},
                "trials": self.trials, "b_crit": self.b_crit, "low": self.low,
                "high": self.high, "width": self.width, "points": self.points,
                "note": self.note, "fitted": self.fitted}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Round:
        """Inverse of :meth:`to_json`."""
        return cls(int(data["round"]), {int(b): int(n) for b, n in data["added"].items()},
                   {int(b): str(w) for b, w in data["why"].items()},
                   {int(b): int(n) for b, n in data["totals"].items()}, data.get("b_crit"),
                   data.get("low"), data.get("high"), data.get("points"),
                   str(data.get("note", "")), bool(data.get("fitted", False)))


@dataclass(frozen=True)
class AdaptiveResult:
    """How an adaptive run ended: its rounds and why it stopped."""

    rounds: list[Round]
    stopped: str
    reason: str
    settings: Adaptive = field(repr=False)

    @property
    def last(self) -> Round:
        """The last round (its fit is the run's answer)."""
        return self.rounds[-1]


def trial_cost(steps: int, batch_size: int, eval_every: int, eval_examples: int) -> float:
    """Examples a trial processes: 3 · steps · batch size + evaluations · eval examples.

    A training step counts as three forward passes (forward and backward); the
    evaluations are at step 0, every ``eval_every`` steps and at the last step.

    >>> trial_cost(100, 8, 10, 50)   # 3·100·8 + 11 evaluations · 50
    2950.0
    """
    evaluations = steps // eval_every + 1 + (1 if steps % eval_every else 0)
    return float(3 * steps * batch_size + evaluations * eval_examples)


def _design(arrays: Mapping[int, np.ndarray]) -> tuple[list[int], np.ndarray, np.ndarray,
                                                       np.ndarray]:
    """The studies that reach the goal: (batch sizes, log2 sizes, trials, hits at the goal)."""
    sizes = [b for b in sorted(arrays) if np.isfinite(arrays[b]).any()]
    n = np.array([len(arrays[b]) for b in sizes], dtype=float)
    at_goal = np.array([np.isfinite(arrays[b]).sum() for b in sizes], dtype=float)
    return sizes, np.log(np.array(sizes, dtype=float)), n, at_goal


class _Forecast:
    """The width of B_crit's calibrated interval forecast for a design (trials per batch
    size), from the fitted law and trial-noise tail of :mod:`curvekit.intervals`.

    The interval is θ̂ − t* · s: the bootstrap-t quantiles t* of simulated studies times
    the data's own residual scatter s. The forecast simulates the design's studies as the
    interval does (order statistics σ (Γ_i / Γ_(n+1))^(1/k)) for t*, and scales each
    study's residual about the law now by how much its minimum's variance falls with the
    added trials in those simulations for s. Every design is simulated from the same
    random numbers (Γ_(n+1) by the inverse of the gamma distribution), so that two
    designs differ by their trial counts alone and not by simulation noise.
    """

    def __init__(self, arrays: Mapping[int, np.ndarray], seed: int) -> None:
        from scipy.special import gammaln

        from curvekit.intervals import ORDER_STATISTICS, estimate

        self.sizes, self.log_b, self.n, self.at_goal = _design(arrays)
        self.rate = (self.at_goal + 1) / (self.n + 2)  # a new trial's chance of the goal
        self.r = ORDER_STATISTICS[1]
        x = np.full((len(self.sizes), self.r), np.nan)
        for j, b in enumerate(self.sizes):
            ok = np.sort(arrays[b][np.isfinite(arrays[b]) & (arrays[b] > 0)])
            x[j, :min(len(ok), self.r)] = np.log(ok[:self.r])
        fit = estimate(self.log_b, x[None, :, :self._order(self.n)], self.n)
        self.a, self.c = float(fit.a[0]), float(fit.c[0])
        self.inv_k, self.scale = float(fit.inv_k[0]), float(fit.scale[0])
        bias = self.scale * math.exp(float(gammaln(1 + self.inv_k))) * self.n ** -self.inv_k
        self.law = self.a + np.log1p(np.exp(self.c - self.log_b))
        self.residuals = x[:, 0] - bias - self.law  # each corrected minimum about the law
        self.dof = max(len(self.sizes) - 2, 1)
        rng = np.random.default_rng(seed)
        self.exp = np.cumsum(rng.exponential(size=(FORECASTS, len(self.sizes), self.r + 1)),
                             axis=-1)
        self.uniform = rng.uniform(size=(FORECASTS, len(self.sizes)))
        self.variance = self._simulate(np.zeros(len(self.sizes)))[1]

    @staticmethod
    def _order(n: np.ndarray) -> int:
        from curvekit.intervals import ORDER_STATISTICS

        low, high = ORDER_STATISTICS
        return int(np.clip(math.ceil(float(np.median(n)) / 8), low, high))

    def _simulate(self, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(t* of the simulated estimates, each study's variance of its minimum)."""
        from scipy.special import gammaincinv

        from curvekit.intervals import estimate

        n = self.n + extra
        r = self._order(n)
        gam = self.exp[..., :r]
        # Γ_(n+1): drawn outright for a study of at most r trials, else Γ_r and the rest
        few = np.minimum(n, r).astype(int)
        rest = gammaincinv(np.maximum(n - r, 0) + 1.0, self.uniform)
        total = np.where(n[None, :] < r,
                         np.take_along_axis(self.exp, few[None, :, None], axis=-1)[..., 0],
                         gam[..., -1] + rest)
        excess = self.scale * (gam / total[..., None]) ** self.inv_k
        # an order statistic is observed when the study is expected to reach the goal as
        # often (each new trial at its rate so far)
        seen = np.arange(r)[None, :] < np.floor(self.at_goal + self.rate * extra)[:, None]
        sims = np.where(seen[None], self.law[None, :, None] + excess, np.nan)
        est = estimate(self.log_b, sims, n)
        spread = np.sqrt(est.rss / self.dof)
        ok = spread > 0
        t = (est.c[ok] - self.c) / spread[ok]
        return t, np.maximum(excess[..., 0].var(axis=0), 1e-12)

    def width(self, extra: np.ndarray) -> float:
        """The forecast interval's width (octaves) with ``extra`` more trials per study."""
        t, variance = self._simulate(extra)
        if len(t) < 2:
            return math.inf
        low, high = np.quantile(t, [0.025, 0.975])
        # a study's squared residual is at least what its trial noise gives on average
        # (a point of high leverage pulls the law toward itself and hides its own noise)
        square = np.maximum(self.residuals ** 2, self.variance)
        scatter = math.sqrt(float(np.sum(square * variance / self.variance)) / self.dof)
        return float(high - low) * scatter / _LN2


def _improve(arrays: Mapping[int, np.ndarray], costs: Mapping[int, float], count: int,
             cap: int, seed: int) -> tuple[dict[int, int], dict[int, str]]:
    """Each trial where it narrows the forecast interval of B_crit most (:class:`_Forecast`),
    the cheaper on a tie."""
    forecast = _Forecast(arrays, seed)
    sizes = forecast.sizes
    extra = np.zeros(len(sizes))
    now = start = forecast.width(extra)
    gains: dict[int, float] = {}
    added = {b: 0 for b in sizes}
    spare = {b: 0 for b in arrays}
    for _ in range(count):
        gain: dict[int, float] = {}
        for j, b in enumerate(sizes):
            if forecast.n[j] + extra[j] >= cap:
                continue
            extra[j] += 1
            after = forecast.width(extra)
            extra[j] -= 1
            gain[b] = now - after
        if not gain:  # every study in the fit is full: those without a point, fewest first
            rest = [b for b in arrays if b not in added and len(arrays[b]) + spare[b] < cap]
            if not rest:
                break
            pick = min(rest, key=lambda b: (len(arrays[b]) + spare[b], costs[b], b))
            spare[pick] += 1
            continue
        # the budget counts trials: the most narrowing per trial, the cheaper on a tie
        best = max(gain, key=lambda b: (round(gain[b], 9), -costs[b], -b))
        j = sizes.index(best)
        extra[j] += 1
        added[best] += 1
        gains.setdefault(best, gain[best])
        now -= gain[best]
    why = {b: (f"the forecast interval of B_crit narrows by {gains[b]:.3f} octaves with the "
               f"first trial here (from {start:.2f}), the most per trial; "
               f"{int(forecast.at_goal[sizes.index(b)])} of {int(forecast.n[sizes.index(b)])}"
               " trials reach the goal")
           for b, k in added.items() if k}
    for b, k in spare.items():
        if k:
            why[b] = (f"every batch size in the fit is at its cap of {cap} trials; no trial "
                      f"here reaches the goal yet ({len(arrays[b])} trials)")
    total = {b: added.get(b, 0) + spare[b] for b in sorted(arrays)}
    return {b: k for b, k in total.items() if k}, why


def allocate(hits: Mapping[int, Sequence[float]], costs: Mapping[int, float], count: int,
             *, cap: int, seed: int = 0, interval: bool = True,
             b_crit: float | None = None) -> tuple[dict[int, int], dict[int, str]]:
    """Where the next ``count`` trials go: trials per batch size, and why.

    ``hits[b]`` holds every trial run at batch size b, each as its first step at the goal
    (``inf`` when it never reaches it, or was not loaded); ``costs[b]`` is a trial's cost
    there (:func:`trial_cost`); no study grows past ``cap`` trials. ``interval=False``
    says the last fit gave B_crit no interval (``b_crit``: its point, if any): the trials
    then go where they can make one possible. The rule is the module's docstring's;
    seeded, so the same call gives the same answer. Fewer than ``count`` trials are placed
    when every study is at ``cap``, and in a round that makes an interval possible, when
    fewer are expected to be needed.

    >>> inf = float("inf")
    >>> hits = {2: [900, inf, 1200, 1000], 8: [300, 260, 280], 32: [120, 130, 125],
    ...         128: [90, 100, 95, 92]}
    >>> added, why = allocate(hits, {2: 1.0, 8: 1.0, 32: 1.0, 128: 1.0}, 4, cap=24)
    >>> sum(added.values())
    4
    """
    arrays = {int(b): np.where(np.isnan(a := np.asarray(h, dtype=float)), np.inf, a)
              for b, h in hits.items()}
    n = {b: len(a) for b, a in arrays.items()}
    added = {b: 0 for b in sorted(arrays)}
    why: dict[int, str] = {}
    points = {b: float(a.min()) for b, a in arrays.items() if len(a) and np.isfinite(a.min())}
    if len(points) < 3:
        for _ in range(count):
            room = [b for b in added if n[b] + added[b] < cap]
            if not room:
                break
            added[min(room, key=lambda b: (b in points, n[b] + added[b], costs[b], b))] += 1
        for b, k in added.items():
            if k:
                why[b] = (f"{len(points)} batch sizes reach the goal, a fit needs 3: "
                          f"{'a' if b in points else 'no'} point here, {n[b]} trials")
        return {b: k for b, k in added.items() if k}, why
    if not interval or sum(1 for a in arrays.values() if np.isfinite(a).sum() >= 3) < 4:
        enabled = _enable_interval(arrays, points, costs, count, cap, b_crit)
        if enabled is not None:
            return enabled
    return _improve(arrays, costs, count, cap, seed)


def _enable_interval(arrays: Mapping[int, np.ndarray], points: Mapping[int, float],
                     costs: Mapping[int, float], count: int, cap: int,
                     b_crit: float | None) -> tuple[dict[int, int], dict[int, str]] | None:
    """Trials placed to make a calibrated interval possible, or None when the data already
    meet its counts (then the forecast places them)."""
    from curvekit.intervals import INNER, MIN_BATCH_SIZES, MIN_SPACINGS

    at_goal = {b: int(np.isfinite(a).sum()) for b, a in arrays.items()}
    full = sum(1 for k in at_goal.values() if k >= 3)
    centre = math.log2(b_crit) if b_crit is not None and b_crit > 0 else float(
        np.median(np.log2(sorted(points))))

    def distance(b: int) -> float:
        return abs(math.log2(b) - centre)

    n = {b: len(a) for b, a in arrays.items()}
    added = {b: 0 for b in sorted(arrays)}
    if len(points) < MIN_BATCH_SIZES:
        why = (f"{len(points)} batch sizes reach the goal, a calibrated interval needs "
               f"{MIN_BATCH_SIZES}")
        for _ in range(count):
            room = [b for b in added if n[b] + added[b] < cap]
            if not room:
                break
            added[min(room, key=lambda b: (b in points, n[b] + added[b], distance(b),
                                           costs[b], b))] += 1
    elif full < MIN_SPACINGS:
        # each trial reaches the goal at its batch size's rate so far, (hits + 1) / (n + 2):
        # the batch sizes expected to reach 3 at the goal in the fewest trials are served,
        # as many as the interval still lacks, and only the trials they are expected to need
        rate = {b: (at_goal[b] + 1) / (n[b] + 2) for b in added}
        expected = {b: float(at_goal[b]) for b in added}
        short = [b for b in added if at_goal[b] < 3 and n[b] < cap]
        chosen = sorted(short, key=lambda b: ((3 - at_goal[b]) / rate[b], -distance(b),
                                              costs[b], b))[:MIN_SPACINGS - full]
        why = (f"{full} batch sizes have 3 trials at the goal, a calibrated interval needs "
               f"{MIN_SPACINGS}; of those short of 3, here they come in the fewest expected "
               "trials")
        for _ in range(count):
            room = [b for b in chosen if expected[b] < 3 and n[b] + added[b] < cap]
            if not room:
                break
            best = min(room, key=lambda b: (expected[b], -distance(b), b))
            added[best] += 1
            expected[best] += rate[best]
    elif b_crit is not None and (
            sum(1 for b in points if b < b_crit) < INNER + 1
            or sum(1 for b in points if b > b_crit) < INNER + 1):
        # B_crit needs batch sizes reaching the goal on both sides: the short side's batch
        # sizes without a point, those expected to reach the goal in the fewest trials
        low_side = sum(1 for b in points if b < b_crit) < INNER + 1
        side = [b for b in added if (b < b_crit) == low_side and b not in points
                and n[b] < cap]
        missing = INNER + 1 - sum(1 for b in points if (b < b_crit) == low_side)
        rate = {b: 1 / (n[b] + 2) for b in side}
        chosen = sorted(side, key=lambda b: (n[b], distance(b), costs[b], b))[:missing]
        expected = {b: 0.0 for b in chosen}
        why = (f"B_crit {b_crit:,.1f} has fewer than {INNER + 1} batch sizes reaching the "
               f"goal {'below' if low_side else 'above'} it, and the interval needs "
               f"{INNER + 1}")
        for _ in range(count):
            room = [b for b in chosen if expected[b] < 1 and n[b] + added[b] < cap]
            if not room:
                break
            best = min(room, key=lambda b: (expected[b], distance(b), b))
            added[best] += 1
            expected[best] += rate[best]
    else:
        return None
    if not any(added.values()):  # nowhere to serve it: the forecast places the trials
        return None
    reasons = {b: (f"{why}; {at_goal[b]} of {n[b]} trials reach the goal here, "
                   f"{distance(b):.1f} octaves from B_crit")
               for b, k in added.items() if k}
    return {b: k for b, k in added.items() if k}, reasons


def _record(settings: Adaptive, rounds: Sequence[Round], stopped: str = "",
            reason: str = "") -> dict[str, Any]:
    return {"format": RECORD_FORMAT, **settings.shape(), "trial_budget": settings.trial_budget,
            "target_width": settings.target_width,
            "rounds": [r.to_json() for r in rounds], "stopped": stopped, "reason": reason}


def load_rounds(work_dir: Path, settings: Adaptive) -> list[Round]:
    """The rounds recorded in ``work_dir`` (none for a new run); a record made with other
    settings than the budget and the target is refused."""
    path = work_dir / ADAPTIVE_FILE
    if not path.is_file():
        return []
    fix = "rerun with the same --metric, --goal and round options to resume, or use another " \
          "--work-dir"
    data = structured.load(path, kind="json", error=lambda m, _: RunError(f"{m}; {fix}"))
    try:
        shape = {k: data[k] for k in settings.shape()}
        rounds = [Round.from_json(r) for r in data["rounds"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RunError(f"{path} is not an adaptive run's record ({exc!r}); {fix}") from exc
    mine = settings.shape()
    differ = sorted(k for k in mine if structured.dumps(shape[k]) != structured.dumps(mine[k]))
    if differ:
        raise RunError(f"{work_dir} holds an adaptive run with other {', '.join(differ)} "
                       f"({', '.join(f'{k}={shape[k]!r}' for k in differ)}); {fix}")
    return rounds


def save_rounds(work_dir: Path, settings: Adaptive, rounds: Sequence[Round],
                stopped: str = "", reason: str = "") -> None:
    """Write the run's record (atomically: the earlier record stays on a failed write)."""
    write_file(work_dir / ADAPTIVE_FILE,
               structured.dumps(_record(settings, rounds, stopped, reason), indent=1) + "\n",
               "the adaptive run's record")


def record_for_store(settings: Adaptive, rounds: Sequence[Round], stopped: str = "",
                     reason: str = "") -> dict[str, Any]:
    """What every study of the workload keeps under ``extra.runner.adaptive``."""
    return _record(settings, rounds, stopped, reason)


def adaptive_record(store: Store, workload: str) -> dict[str, Any] | None:
    """The adaptive run's record of ``workload`` in the store (None for any other).

    >>> import tempfile, curvekit
    >>> home = tempfile.mkdtemp()
    >>> _ = curvekit.demo(home)
    >>> adaptive_record(curvekit.open(home), "demo/digits/fc_128_128_128/sgd") is None
    True
    """
    import json

    studies = store.studies(workload)
    for text in studies["extra"].to_list():
        try:
            record = json.loads(text or "{}").get("runner", {}).get("adaptive")
        except (ValueError, AttributeError):
            continue
        if isinstance(record, dict):
            return record
    return None


FitRound = Callable[[dict[int, int], list[Round]], tuple[dict[int, list[float]], Round]]
"""Adds the trials so far to the store and fits: (hits per batch size, the round with its
fit). Given the trial counts and the rounds so far."""


def stop_reason(settings: Adaptive, last: Round, used: int, room: bool) -> tuple[str, str]:
    """("target" | "budget" | "", words) after ``last``: why the run stops, or ""."""
    width = last.width
    if settings.target_width is not None and width is not None \
            and width <= settings.target_width:
        return "target", (f"B_crit's interval is {width:.3f} of B_crit wide, within the "
                          f"target {settings.target_width:g}, after {used} trials")
    if used >= settings.trial_budget or not room:
        target = ("" if settings.target_width is None else
                  f", the target {settings.target_width:g} not reached")
        if width is None:
            why = last.note or "the fit gives no interval"
            return "budget", (f"the trial budget is spent ({used} of {settings.trial_budget} "
                              f"trials); B_crit has no interval ({why}){target}")
        return "budget", (f"the trial budget is spent ({used} of {settings.trial_budget} "
                          f"trials); B_crit's interval is {width:.3f} of B_crit wide{target}")
    return "", ""


def first_grid(batch_sizes: Sequence[int]) -> list[int]:
    """The batch sizes of the first round: every other one, the smallest and the largest
    included, when that leaves at least :data:`FIRST_GRID_MIN` of them; else all.

    >>> first_grid([2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1197])
    [2, 8, 32, 128, 512, 1197]
    >>> first_grid([16, 32, 64, 128, 256])
    [16, 32, 64, 128, 256]
    """
    sizes = sorted(batch_sizes)
    grid = sorted({*sizes[::2], sizes[-1]})
    return grid if len(grid) >= FIRST_GRID_MIN else sizes


def run_rounds(work_dir: Path, settings: Adaptive, *, batch_sizes: Sequence[int],
               initial: int, costs: Mapping[int, float], seed: int,
               train: Callable[[dict[int, int]], None], fit_round: FitRound,
               publish: Callable[[dict[int, int], list[Round], str, str], None],
               cap: int | None = None) -> AdaptiveResult:
    """The rounds of an adaptive run (see the module docstring).

    ``train(counts)`` trains every trial of the first ``counts[b]`` of each study that is
    not saved yet; ``fit_round(counts, rounds)`` puts them in the store and fits;
    ``publish`` adds the final record to the store; no study grows past ``cap`` trials
    (default: the trial budget). Rounds already recorded in ``work_dir`` are replayed:
    their choices stand, and only unsaved trials train.
    """
    rounds = load_rounds(work_dir, settings)
    sizes = sorted(batch_sizes)
    if not rounds:
        grid = first_grid(sizes)
        first = min(initial, settings.trial_budget // len(grid))
        if first < 1:
            raise RunError(f"a trial budget of {settings.trial_budget} cannot give each of "
                           f"the {len(grid)} batch sizes of the first round a trial; raise "
                           f"--trial-budget to at least {len(grid)}")
        totals = {b: first if b in grid else 0 for b in sizes}
        words = (f"first round: {first} trials at every batch size" if len(grid) == len(sizes)
                 else f"first round: {first} trials at every other batch size, the smallest "
                      "and the largest included")
        rounds = [Round(1, {b: first for b in grid}, {b: words for b in grid}, totals)]
        save_rounds(work_dir, settings, rounds)
    stopped, reason = "", ""
    while True:
        last = rounds[-1]
        counts = dict(last.totals)
        train(counts)  # nothing to do for a round whose trials are all saved
        hits, fitted = fit_round(counts, rounds)
        if not last.fitted:  # a round recorded as fitted keeps its record
            last = rounds[-1] = fitted
            save_rounds(work_dir, settings, rounds)
        used = last.trials
        cap_ = settings.trial_budget if cap is None else cap
        room = any(counts.get(b, 0) < cap_ for b in sizes)
        stopped, reason = stop_reason(settings, last, used, room)
        if stopped:
            break
        count = min(settings.round_trials or len(sizes), settings.trial_budget - used)
        padded = {b: [*hits.get(b, []),
                      *[math.inf] * max(0, counts.get(b, 0) - len(hits.get(b, [])))]
                  for b in sizes}
        added, why = allocate(padded, costs, count, cap=cap_,
                              seed=seed + last.number, interval=last.width is not None,
                              b_crit=last.b_crit)
        if not added:
            stopped, reason = stop_reason(settings, last, used, False)
            break
        totals = {b: counts.get(b, 0) + added.get(b, 0) for b in sizes}
        rounds.append(Round(last.number + 1, added, why, totals))
        save_rounds(work_dir, settings, rounds)
    save_rounds(work_dir, settings, rounds, stopped, reason)
    publish(dict(rounds[-1].totals), rounds, stopped, reason)
    return AdaptiveResult(rounds, stopped, reason, settings)


def fitted_round(pending: Round, hits: Mapping[int, Sequence[float]],
                 fit: Callable[[], Any]) -> Round:
    """``pending`` with the fit after it: B_crit and its interval, or why there is none."""
    from curvekit.errors import FitError

    try:
        result = fit()
    except (FitError, CurvekitError) as exc:
        # the first clause says what is missing; the rest (per batch size) is for `fit`
        words = str(exc).split("; ")[0].split(": ", 1)[-1]
        return Round(pending.number, pending.added, pending.why, pending.totals,
                     note=words, fitted=True,
                     points=sum(1 for h in hits.values() if any(math.isfinite(v) for v in h)))
    row = result.summary()
    b_crit, low, high = row.get("b_crit"), row.get("b_crit_low"), row.get("b_crit_high")
    note = ""
    if low is None or high is None:
        note = str(row.get("b_crit_interval_note") or "the fit reports no interval for B_crit")
        low = high = None
    elif any(row.get(f"b_crit{end}_beyond") for end in ("", "_low", "_high")):
        # an extrapolated interval is no measurement of its width: it never meets a target
        note = "B_crit or its interval lies beyond the measured batch sizes"
        low = high = None
    return Round(pending.number, pending.added, pending.why, pending.totals,
                 None if b_crit is None else float(b_crit),
                 None if low is None else float(low), None if high is None else float(high),
                 int(row.get("points") or 0), note, True)


@dataclass(frozen=True)
class AdaptiveRun:
    """What :func:`run_adaptive` did, for :class:`curvekit.runner.sweep.RunResult`."""

    result: AdaptiveResult
    trials: int
    ran: int
    resumed: int
    statuses: dict[str, int]
    added: list[Any]


def _metrics(splits: Sequence[str], noise: bool) -> list[str]:
    names = [f"{split}/{m}" for split in splits
             for m in ("classification_error", "cross_entropy_error")]
    if noise:
        names += ["train/gradient_norm_squared", "train/gradient_noise_trace",
                  "train/gradient_noise_scale"]
    return names


def run_adaptive(sweep: Sweep, folder: Path, settings: Adaptive, *, initial: int, home: Path,
                 device: str, train: Callable[[list[TrialSpec], int], tuple[int, int]]
                 ) -> AdaptiveRun:
    """An adaptive run of ``sweep``'s one workload (see the module docstring).

    ``train(specs, total)`` trains the specs that have no saved part and returns (ran,
    found saved); ``sweep.trials`` caps every study. Each round's trials go into the store
    at ``home`` as the workload, so every command reads them.
    """
    from collections import Counter

    from curvekit.measure import trial_hits
    from curvekit.runner.collect import sweep_tables, workload_data
    from curvekit.runner.parts import finished_trials
    from curvekit.runner.workloads import load_dataset
    from curvekit.scaling import fit_workload
    from curvekit.selection import Selection
    from curvekit.store.store import Store
    from curvekit.store.update import add_workload

    workload = sweep.workloads()[0]
    data = load_dataset(sweep.dataset, sweep.data_dir)
    known = _metrics(list(data.splits), bool(sweep.noise_micro_batches))
    if settings.metric not in known:
        raise RunError(f"--metric {settings.metric!r} is not a metric this run records; "
                       f"choose one of {', '.join(known)}")
    eval_examples = sum(len(y) for _, y in data.splits.values())
    costs = {b: trial_cost(sweep.steps[b], b, sweep.eval_every, eval_examples)
             for b in sweep.batch_sizes}
    selection = Selection(workload, settings.metric, float(settings.goal),
                          maximize=settings.maximize)
    origin = {"format": "curvekit-run", "tool": "curvekit run --adaptive",
              "work_dir": str(folder), "plan": sweep.to_json()}
    tally = {"ran": 0, "resumed": -1}
    added: list[Any] = []

    def specs_of(counts: Mapping[int, int]) -> list[TrialSpec]:
        return sweep.trial_specs(device=device, counts=counts)

    def train_round(counts: dict[int, int]) -> None:
        ran, found = train(specs_of(counts), settings.trial_budget)
        tally["ran"] += ran
        if tally["resumed"] < 0:  # the trials saved before this call of the run
            tally["resumed"] = found

    def publish_counts(counts: Mapping[int, int], record: Mapping[str, Any]) -> None:
        specs = specs_of(counts)
        finished = finished_trials(folder, specs)
        missing = len(specs) - len(finished)
        if missing:
            raise RunError(f"{missing} of {len(specs)} trials have no result in {folder}; "
                           "rerun the same command to run them")
        tables = sweep_tables(sweep, specs, finished, folder, adaptive=record)
        added.clear()
        for one in workload_data(tables, origin):
            added.append(add_workload(home, one, replace=True))

    def fit_round(counts: dict[int, int], rounds: list[Round]
                  ) -> tuple[dict[int, list[float]], Round]:
        publish_counts(counts, record_for_store(settings, rounds))
        with Store.open(home) as store:
            frame = trial_hits(store, selection)
            hits: dict[int, list[float]] = {}
            for b, step in zip(frame["batch_size"].to_list(), frame["step"].to_list(),
                               strict=True):
                hits.setdefault(int(b), []).append(math.inf if step is None else float(step))
            fitted = fitted_round(rounds[-1], hits, lambda: fit_workload(
                store, selection, model="both", bootstrap_samples=settings.bootstrap,
                seed=sweep.seed, explain=False))
        return hits, fitted

    def publish(counts: dict[int, int], rounds: list[Round], stopped: str,
                reason: str) -> None:
        publish_counts(counts, record_for_store(settings, rounds, stopped, reason))

    result = run_rounds(folder, settings, batch_sizes=sweep.batch_sizes, initial=initial,
                        costs=costs, seed=sweep.seed, train=train_round, fit_round=fit_round,
                        publish=publish)
    specs = specs_of(result.last.totals)
    finished = finished_trials(folder, specs)
    statuses = dict(Counter(meta["status"] for meta, _, _ in finished.values()))
    return AdaptiveRun(result, len(specs), tally["ran"], max(tally["resumed"], 0), statuses,
                       list(added))


def round_rows(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An adaptive run's record as rows for reading: one per round and batch size that got
    trials, with why, and the run's trials and B_crit [interval] after the round.

    >>> rows = round_rows({"rounds": [{"round": 1, "added": {"8": 2}, "why": {"8": "first"},
    ...                    "trials": 2, "b_crit": None, "low": None, "high": None,
    ...                    "width": None, "note": "only 1 batch size"}]})
    >>> rows[0]["B_crit [95% interval]"]
    '- (only 1 batch size)'
    """
    rows = []
    for entry in record.get("rounds", []):
        b_crit, low, high = entry.get("b_crit"), entry.get("low"), entry.get("high")
        if b_crit is None:
            fitted = f"- ({entry.get('note') or 'not fitted yet'})"
        elif low is None or high is None:
            fitted = f"{b_crit:,.1f} (no interval: {entry.get('note') or 'none reported'})"
        else:
            fitted = f"{b_crit:,.1f} [{low:,.1f}–{high:,.1f}]"
        width = entry.get("width")
        for size, count in sorted(entry["added"].items(), key=lambda kv: int(kv[0])):
            rows.append({"round": int(entry["round"]), "batch size": int(size),
                         "trials added": int(count), "why": entry["why"].get(size, ""),
                         "trials after": int(entry["trials"]),
                         "B_crit [95% interval]": fitted,
                         "relative width": "-" if width is None else f"{width:.3f}"})
    return rows
