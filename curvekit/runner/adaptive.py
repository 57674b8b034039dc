"""``curvekit run --adaptive``: measure the critical batch size in rounds.

A full sweep trains the same number of trials at every batch size. An adaptive run trains
a few trials at every candidate batch size, then, round after round, fits the curve and
sends the next trials where they shrink the interval of B_crit most per unit of compute.
Every trial is an ordinary trial of the sweep's plan (:mod:`curvekit.runner.plan`): a
study's trials are the first N points of its quasi-random sequence, so each study in the
store is an ordinary study of N trials, read by every command like any other.

**A round.** After its trials are saved, the workload goes into the store and the round
reads it back through the one door into the measurements: each trial's first step at the
goal (:func:`curvekit.measure.trial_hits`, the paper's definition, as ``steps-to-result``)
and the fit with its calibrated interval (:func:`curvekit.scaling.fit_workload`). The
interval's **relative width** is (high − low) / B_crit. The run stops when it is at most
the target width, or when the trial budget is spent.

**Where the next trials go** (:func:`allocate`): a delta-method split of B_crit's
variance over the batch sizes, Var(log2 B_crit) ≈ Σ_b g_b² · V_b, where

* g_b = ∂ log2 B_crit / ∂ log2 S_b, the sensitivity of the fitted B_crit to the steps to
  result at b, by central differences (± a quarter octave) of
  :func:`curvekit.scaling.fit_critical_batch`; a batch size with no point yet is put on
  the fitted curve first;
* V_b, the variance of log2 steps to result at b over resamples of its trials (each of its
  n_b trials drawn with replacement, the minimum taken, as the fit's bootstrap does); a
  resample in which no trial reaches the goal counts as one octave², and so does a batch
  size none of whose trials reaches it.

Assuming V_b falls as 1/n_b, one more trial at b removes g_b² V_b / (n_b + 1) of the
variance. Each trial of the round goes, one after the other, to the batch size with the
most removed per unit of cost, and that batch size's V_b and n_b are updated before the
next (so a round spreads over several batch sizes). The **cost** of a trial is the
examples it processes, with a training step counted as three forward passes:
3 · S · B + E · N_eval, for a budget of S steps at batch size B, E evaluations and
N_eval examples per evaluation (every split). With fewer than three batch sizes reaching
the goal there is no fit: the round goes to the batch sizes without a point, fewest trials
first, then cheapest.

**When the fit gives B_crit no interval.** The interval is the calibrated one of
:mod:`curvekit.intervals`, which declines where it cannot be calibrated and says why. A
round without an interval places its trials where they can make one possible
(:func:`allocate` with ``interval=False``): while fewer than 4 batch sizes reach the goal,
the batch sizes without a point, fewest trials first, then nearest the fitted B_crit (in
octaves), then cheapest; while fewer than 4 batch sizes have 3 trials at the goal, the
batch sizes short of 3, one trial each before any gets a second in the round, nearest
B_crit first, then cheapest, each trial counted as reaching the goal at its batch size's
rate so far (at least 1 in n + 1), so that a batch size expected to have 3 leaves the
list; otherwise (B_crit beyond the second-smallest or second-largest
batch size, or a curve that does not follow the law) the delta-method rule above, which
sends trials to the batch sizes that move B_crit. Such a round's note is the fit's reason,
and the run only stops at the budget: the target is met by a real interval alone.

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
NO_POINT = 1.0
"""V_b (octaves²) of a resample, or a batch size, without a trial that reaches the goal."""
DELTA = 0.25
"""The central difference's step, in octaves of steps to result."""
RESAMPLES = 400
"""Resamples of one batch size's trials for V_b."""
MIN_VARIANCE = 1e-4
"""A floor on V_b: a study all of whose trials agree may still improve."""


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


def _spread(hits: np.ndarray, rng: np.random.Generator) -> float:
    """V_b: the variance of log2 of the minimum over resamples of a study's trials."""
    n = len(hits)
    if n == 0 or not np.isfinite(hits).any():
        return NO_POINT
    mins = hits[rng.integers(0, n, size=(RESAMPLES, n))].min(axis=1)
    ok = np.isfinite(mins)
    share = float(ok.mean())
    found = float(np.var(np.log2(mins[ok]))) if ok.sum() > 1 else 0.0
    return max(found * share + (1 - share) * NO_POINT, MIN_VARIANCE)


def _sensitivity(points: Mapping[int, float], batch_size: int) -> float:
    """∂ log2 B_crit / ∂ log2 S_b by central differences of the critical-batch fit."""
    from curvekit.scaling import fit_critical_batch

    def b_crit(curve: Mapping[int, float]) -> float:
        sizes = sorted(curve)
        fit = fit_critical_batch(np.array(sizes, dtype=float),
                                 np.array([curve[b] for b in sizes], dtype=float))
        return math.log2(fit.b_crit)

    curve = dict(points)
    if batch_size not in curve:  # no point yet: where the fitted curve puts it
        sizes = sorted(points)
        fit = fit_critical_batch(np.array(sizes, dtype=float),
                                 np.array([points[b] for b in sizes], dtype=float))
        curve[batch_size] = float(fit.predict([batch_size])[0])
    up, down = dict(curve), dict(curve)
    up[batch_size] *= 2 ** DELTA
    down[batch_size] *= 2 ** -DELTA
    return (b_crit(up) - b_crit(down)) / (2 * DELTA)


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
    only when every study is at ``cap``.

    >>> inf = float("inf")
    >>> hits = {2: [900, inf, 1200], 8: [300, 260, inf], 32: [120, inf, inf],
    ...         128: [90, 100, inf]}
    >>> added, why = allocate(hits, {2: 1.0, 8: 1.0, 32: 1.0, 128: 1.0}, 4, cap=24)
    >>> sum(added.values())
    4
    """
    rng = np.random.default_rng(seed)
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
    if not interval:
        enabled = _enable_interval(arrays, points, costs, count, cap, b_crit)
        if enabled is not None:
            return enabled
    variance = {b: _spread(arrays[b], rng) for b in sorted(arrays)}
    slope = {b: _sensitivity(points, b) for b in sorted(arrays)}
    start = dict(variance)
    for _ in range(count):
        gain = {b: slope[b] ** 2 * variance[b] / (n[b] + added[b] + 1) / costs[b]
                for b in sorted(arrays) if n[b] + added[b] < cap}
        if not gain:
            break
        best = max(gain, key=lambda b: (gain[b], -b))
        total = n[best] + added[best]
        if total:
            variance[best] *= total / (total + 1)
        added[best] += 1
    for b, k in added.items():
        if k:
            reached = int(np.isfinite(arrays[b]).sum())
            why[b] = (f"sensitivity {slope[b]:+.2f}, spread {math.sqrt(start[b]):.2f} octaves, "
                      f"{reached} of {n[b]} trials reach the goal, cost {costs[b]:,.0f}")
    return {b: k for b, k in added.items() if k}, why


def _enable_interval(arrays: Mapping[int, np.ndarray], points: Mapping[int, float],
                     costs: Mapping[int, float], count: int, cap: int,
                     b_crit: float | None) -> tuple[dict[int, int], dict[int, str]] | None:
    """Trials placed to make a calibrated interval possible, or None when the data already
    meet its counts (then the delta-method rule places them)."""
    from curvekit.intervals import MIN_BATCH_SIZES, MIN_SPACINGS

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
        # each trial reaches the goal at its batch size's rate so far (at least 1 in n + 1)
        rate = {b: max(at_goal[b] / n[b] if n[b] else 0.0, 1 / (n[b] + 1)) for b in added}
        expected = {b: float(at_goal[b]) for b in added}
        why = (f"{full} batch sizes have 3 trials at the goal, a calibrated interval needs "
               f"{MIN_SPACINGS}")
        for _ in range(count):
            room = [b for b in added if n[b] + added[b] < cap]
            if not room:
                break
            # one trial each before any gets another: a batch size that rarely reaches the
            # goal does not take the whole round
            best = min(room, key=lambda b: (expected[b] >= 3, added[b], distance(b),
                                            costs[b], b))
            added[best] += 1
            expected[best] += rate[best]
    else:
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


def run_rounds(work_dir: Path, settings: Adaptive, *, batch_sizes: Sequence[int],
               initial: int, costs: Mapping[int, float], seed: int,
               train: Callable[[dict[int, int]], None], fit_round: FitRound,
               publish: Callable[[dict[int, int], list[Round], str, str], None]
               ) -> AdaptiveResult:
    """The rounds of an adaptive run (see the module docstring).

    ``train(counts)`` trains every trial of the first ``counts[b]`` of each study that is
    not saved yet; ``fit_round(counts, rounds)`` puts them in the store and fits;
    ``publish`` adds the final record to the store. Rounds already recorded in
    ``work_dir`` are replayed: their choices stand, and only unsaved trials train.
    """
    rounds = load_rounds(work_dir, settings)
    sizes = sorted(batch_sizes)
    if not rounds:
        first = min(initial, settings.trial_budget // len(sizes))
        if first < 1:
            raise RunError(f"a trial budget of {settings.trial_budget} cannot give each of "
                           f"the {len(sizes)} batch sizes a first trial; raise "
                           f"--trial-budget to at least {len(sizes)}")
        totals = {b: first for b in sizes}
        rounds = [Round(1, dict(totals), {b: f"first round: {first} trials at every batch size"
                                          for b in sizes}, totals)]
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
        room = any(counts.get(b, 0) < settings.trial_budget for b in sizes)
        stopped, reason = stop_reason(settings, last, used, room)
        if stopped:
            break
        count = min(settings.round_trials or len(sizes), settings.trial_budget - used)
        padded = {b: [*hits.get(b, []),
                      *[math.inf] * max(0, counts.get(b, 0) - len(hits.get(b, [])))]
                  for b in sizes}
        added, why = allocate(padded, costs, count, cap=settings.trial_budget,
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
