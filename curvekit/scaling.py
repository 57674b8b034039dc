"""Scaling-regime fits of steps-to-result curves: curvekit's own definitions.

The paper reads three regimes off a log–log plot of steps to result against batch size by
eye: perfect scaling (slope −1), diminishing returns, and maximal data parallelism
(slope 0). curvekit measures them (``docs/fits.md``):

**Piecewise fit.** With x = log2(batch size) and y = log2(steps), a continuous
piecewise-linear function of up to three segments, in this order: slope −1 (perfect
scaling), a free slope in [−1, 0] (diminishing returns), slope 0 (maximal data
parallelism). Every ordered subset of the three is a candidate model (7 in all). The
breakpoints are continuous: a global grid search over breakpoint positions, each solved in
closed form for the intercept and the free slope, then refined with
``scipy.optimize.least_squares``. Each outer segment must hold at least two measured batch
sizes. The model with the smallest BIC, n·ln(RSS/n) + k·ln(n) (k = intercept, free slope
and breakpoints), wins; ties go to fewer parameters. Reported: the end of perfect scaling
(the first breakpoint after a slope −1 segment), the maximum useful batch size (where the
plateau starts) — or none when no plateau is found within the measured batch sizes —, the
middle slope and the residuals.

**Critical batch size** (McCandlish et al. 2018): S(B) = S_min · (1 + B_crit / B), fitted by
least squares on log2(steps); E_min = S_min · B_crit examples.

**Predicted critical batch size** (:func:`predict_critical_batch`): when the workload
recorded the gradient noise scale (``curvekit run --noise-micro-batches``), McCandlish et
al.'s B_simple = tr(Σ) / |G|², averaged over each trial's training up to the goal and
summarized over the trials that reach it — a prediction of B_crit from gradients alone.

>>> import numpy as np
>>> b = 2.0 ** np.arange(0, 14)
>>> steps = np.where(b <= 64, 2.0**20 / b, 2.0**14)
>>> fit = fit_regimes(b, steps)
>>> fit.model, round(fit.max_useful_batch_size)
('perfect+plateau', 64)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import least_squares

from curvekit.errors import FitError
from curvekit.selection import DEFAULT_STATUSES, Selection
from curvekit.values import INT64_MAX, integer_problem

if TYPE_CHECKING:
    from curvekit.store.store import Store

__all__ = [
    "Bootstrap",
    "CriticalBatchFit",
    "Excess",
    "FitError",
    "NoiseScalePrediction",
    "RegimeFit",
    "TableFit",
    "WorkloadFit",
    "beyond_measured",
    "bootstrap",
    "bounded_value",
    "check_steps_table",
    "critical_point",
    "fit",
    "fit_all",
    "fit_critical_batch",
    "fit_regimes",
    "fit_steps_table",
    "fit_workload",
    "hits_by_batch_size",
    "predict_critical_batch",
    "range_note",
]

MAX_RESAMPLES = 100_000
"""The most bootstrap resamples one fit takes (intervals settle within a few thousand)."""

Floats = NDArray[np.float64]
SEGMENTS = ("perfect", "diminishing", "plateau")
_SLOPE = {"perfect": -1.0, "plateau": 0.0}
MODELS: tuple[tuple[str, ...], ...] = tuple(
    m for n in (1, 2, 3) for m in combinations(SEGMENTS, n))
NOT_REACHED = "maximal data parallelism not reached within the measured batch sizes"
_LN2 = math.log(2.0)


Beyond = Literal["above", "below"]
BATCH_SIZE_QUANTITIES = ("perfect_scaling_end", "max_useful_batch_size", "b_crit")
"""Fitted quantities that are batch sizes, and so can be compared with the measured ones."""


def beyond_measured(value: float | None, batch_sizes: ArrayLike) -> Beyond | None:
    """``"above"`` when a fitted batch size lies past the largest measured batch size,
    ``"below"`` when it lies under the smallest, else ``None`` (also for no value).

    Past the measured range a fitted value is an extrapolation: the data only say it is
    larger (or smaller) than the measured batch sizes, not what it is.

    >>> beyond_measured(4.7e11, [16, 1024, 55000]), beyond_measured(55000.0, [16, 55000])
    ('above', None)
    """
    sizes = np.asarray(batch_sizes, dtype=float)
    if value is None or not len(sizes) or not math.isfinite(value):
        return None
    # Breakpoints come back through 2 ** log2(b): allow for rounding at the ends.
    if value > sizes.max() * (1 + 1e-9):
        return "above"
    if value < sizes.min() * (1 - 1e-9):
        return "below"
    return None


def _prepare(batch_sizes: ArrayLike | Any, steps: ArrayLike | None) -> tuple[Floats, Floats]:
    if steps is None:  # a steps-to-result table (polars or pandas)
        table: Any = batch_sizes
        try:
            batch_sizes, steps = table["batch_size"], table["step"]
        except (KeyError, TypeError, IndexError) as exc:
            raise FitError("pass batch sizes and steps, or a steps-to-result table with "
                           "columns batch_size and step") from exc
    b = np.asarray(batch_sizes, dtype=float)
    s = np.asarray(steps, dtype=float)
    if b.shape != s.shape or b.ndim != 1:
        raise FitError(f"batch sizes and steps must be two 1-d sequences of the same length, "
                       f"got shapes {b.shape} and {s.shape}")
    if len(b) < 3:
        raise FitError(f"a fit needs at least 3 batch sizes, got {len(b)}")
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(s))) or np.any(b <= 0) or np.any(
            s <= 0):
        raise FitError("batch sizes and steps must be finite and positive (log scale); "
                       f"got batch sizes {b.tolist()} and steps {s.tolist()}")
    if np.any(np.diff(b) <= 0):
        raise FitError(f"batch sizes must be strictly increasing, got {b.tolist()}")
    return np.log2(b), np.log2(s)


def _design(x: Floats, model: tuple[str, ...], breaks: Floats) -> tuple[Floats, Floats]:
    """Offsets (fixed slopes) and the free-slope column for breakpoints ``breaks``.

    ``breaks`` has shape (..., len(model) - 1); returns arrays of shape (..., len(x)).
    """
    edges_lo = np.concatenate([np.full((*breaks.shape[:-1], 1), -np.inf), breaks], axis=-1)
    edges_hi = np.concatenate([breaks, np.full((*breaks.shape[:-1], 1), np.inf)], axis=-1)
    x0 = x[0]
    fixed = np.zeros(breaks.shape[:-1] + x.shape)
    free = np.zeros_like(fixed)
    for j, kind in enumerate(model):
        lo = np.maximum(edges_lo[..., j, None], x0)
        hi = edges_hi[..., j, None]
        length = np.clip(x, lo, np.maximum(lo, hi)) - lo
        if kind == "diminishing":
            free += length
        else:
            fixed += _SLOPE[kind] * length
    return fixed, free


def _solve(y: Floats, fixed: Floats, free: Floats, has_free: bool
           ) -> tuple[Floats, Floats, Floats]:
    """Least-squares intercept (and free slope clipped to [-1, 0]) for each grid row."""
    r = y - fixed
    if not has_free:
        c = r.mean(axis=-1)
        return c, np.zeros_like(c), ((r - c[..., None]) ** 2).sum(axis=-1)
    fm = free.mean(axis=-1, keepdims=True)
    rm = r.mean(axis=-1, keepdims=True)
    var = ((free - fm) ** 2).sum(axis=-1)
    cov = ((free - fm) * (r - rm)).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(var > 1e-12, cov / var, -0.5)
    s = np.clip(s, -1.0, 0.0)
    c = (r - s[..., None] * free).mean(axis=-1)
    rss = ((r - s[..., None] * free - c[..., None]) ** 2).sum(axis=-1)
    return c, s, rss


@dataclass(frozen=True)
class _ModelFit:
    model: tuple[str, ...]
    intercept: float
    slope: float
    breaks: tuple[float, ...]
    rss: float
    bic: float


def _grid(x: Floats, count: int, points: int = 48) -> Floats:
    """Breakpoint candidates: ordered tuples with two batch sizes outside each end."""
    if count == 0:
        return np.zeros((1, 0))
    lo, hi = x[1], x[-2]
    if hi < lo:
        return np.zeros((0, count))
    axis = np.unique(np.concatenate([np.linspace(lo, hi, points), x[1:-1]]))
    if count == 1:
        return axis[:, None]
    b1, b2 = np.meshgrid(axis, axis, indexing="ij")
    keep = b1 <= b2
    return np.stack([b1[keep], b2[keep]], axis=-1)


def _fit_model(x: Floats, y: Floats, model: tuple[str, ...], refine: bool = True
               ) -> _ModelFit | None:
    has_free = "diminishing" in model
    grid = _grid(x, len(model) - 1)
    if not len(grid):
        return None
    fixed, free = _design(x, model, grid)
    c, s, rss = _solve(y, fixed, free, has_free)
    best = int(np.argmin(rss))
    params = (c[best], s[best], grid[best])
    if refine and len(model) > 1:
        params = _refine(x, y, model, *params)
    intercept, slope, breaks = params
    f, g = _design(x, model, np.asarray(breaks)[None, :])
    resid = y - (intercept + f[0] + slope * g[0])
    total = float(resid @ resid)
    n = len(x)
    k = 1 + int(has_free) + len(model) - 1
    bic = n * math.log(max(total, n * 1e-12) / n) + k * math.log(n)
    return _ModelFit(model, float(intercept), float(slope) if has_free else math.nan,
                     tuple(float(b) for b in breaks), total, bic)


def _refine(x: Floats, y: Floats, model: tuple[str, ...], c: float, s: float,
            breaks: Floats) -> tuple[float, float, Floats]:
    """Polish the grid optimum with scipy's bounded least squares."""
    has_free = "diminishing" in model
    m = len(breaks)

    def unpack(p: Floats) -> tuple[float, float, Floats]:
        b = np.sort(p[-m:])
        return p[0], (p[1] if has_free else 0.0), b

    def residuals(p: Floats) -> Floats:
        ci, si, b = unpack(p)
        f, g = _design(x, model, b[None, :])
        out: Floats = ci + f[0] + si * g[0] - y
        return out

    start = np.concatenate([[c], [s] if has_free else [], breaks])
    lower = np.concatenate([[-np.inf], [-1.0] if has_free else [], np.full(m, x[1])])
    upper = np.concatenate([[np.inf], [0.0] if has_free else [], np.full(m, x[-2])])
    start = np.clip(start, lower + 1e-12, upper - 1e-12) if x[-2] > x[1] else start
    try:
        result = least_squares(residuals, start, bounds=(lower, upper), method="trf",
                               x_scale="jac", max_nfev=200)
    except ValueError:
        return c, s, breaks
    if float(result.fun @ result.fun) <= float(residuals(start) @ residuals(start)):
        return unpack(result.x)
    return c, s, breaks


@dataclass(frozen=True)
class RegimeFit:
    """A piecewise fit of log2(steps) against log2(batch size).

    ``breakpoints`` are batch sizes (not logs). ``perfect_scaling_end`` and
    ``max_useful_batch_size`` are ``None`` when the chosen model has no such boundary;
    ``note`` says so in words.
    """

    model: str
    segments: tuple[str, ...]
    intercept: float
    diminishing_slope: float | None
    breakpoints: tuple[float, ...]
    perfect_scaling_end: float | None
    max_useful_batch_size: float | None
    residuals: Floats = field(repr=False)
    rss: float
    bic: float
    candidates: dict[str, float] = field(repr=False)
    note: str = ""
    batch_sizes: Floats = field(repr=False, default_factory=lambda: np.zeros(0))

    def predict(self, batch_sizes: ArrayLike) -> Floats:
        """Fitted steps at ``batch_sizes`` (extrapolated flat or linearly past the ends)."""
        x = np.log2(np.asarray(batch_sizes, dtype=float))
        x0 = float(np.log2(self.batch_sizes[0])) if len(self.batch_sizes) else float(x.min())
        breaks = np.log2(np.asarray(self.breakpoints, dtype=float))[None, :]
        f, g = _design(np.concatenate([[x0], x]), self.segments, breaks)
        slope = self.diminishing_slope or 0.0
        y: Floats = (self.intercept + f[0] + slope * g[0])[1:]
        return np.asarray(2.0 ** y)


def fit_regimes(batch_sizes: ArrayLike | Any, steps: ArrayLike | None = None, *,
                models: Sequence[tuple[str, ...]] = MODELS, refine: bool = True) -> RegimeFit:
    """Fit the three scaling regimes to a steps-to-result curve (see the module docstring).

    Pass batch sizes and steps, or one steps-to-result table (:func:`curvekit.steps_to_result`).

    ``refine=False`` skips the least-squares polish of the grid optimum (the bootstrap uses
    it for speed).

    Examples
    --------
    >>> fit = fit_regimes([16, 32, 64, 128, 256], [8000, 4000, 2000, 1000, 500])
    >>> fit.model, fit.note
    ('perfect', 'maximal data parallelism not reached within the measured batch sizes')
    """
    x, y = _prepare(batch_sizes, steps)
    fits = [f for f in (_fit_model(x, y, m, refine) for m in models) if f is not None]
    if not fits:
        raise FitError("no candidate model fits these batch sizes")
    # Smallest BIC; near-ties (1e-9) go to the model with fewer parameters.
    best = min(fits, key=lambda f: (round(f.bic, 9), len(f.model) + ("diminishing" in f.model)))
    edges = dict(zip(best.model[1:], best.breaks, strict=True))
    perfect_end = (2.0 ** best.breaks[0]
                   if best.model[0] == "perfect" and len(best.model) > 1 else None)
    plateau = 2.0 ** edges["plateau"] if "plateau" in edges else None
    if best.model == ("plateau",):
        plateau = float(2.0 ** x[0])
    f, g = _design(x, best.model, np.asarray(best.breaks)[None, :])
    slope = 0.0 if math.isnan(best.slope) else best.slope
    resid = y - (best.intercept + f[0] + slope * g[0])
    return RegimeFit(
        model="+".join(best.model), segments=best.model, intercept=best.intercept,
        diminishing_slope=None if math.isnan(best.slope) else best.slope,
        breakpoints=tuple(2.0 ** b for b in best.breaks), perfect_scaling_end=perfect_end,
        max_useful_batch_size=plateau, residuals=resid, rss=best.rss, bic=best.bic,
        candidates={"+".join(f.model): f.bic for f in fits},
        note="" if plateau is not None else NOT_REACHED,
        batch_sizes=2.0 ** x)


PLAIN, CORRECTED = "plain fit", "bias-corrected"
"""What a reported S_min and B_crit estimate (:attr:`CriticalBatchFit.estimate`): the plain
fit to each batch size's best trial (the paper's steps to result), or the estimate of the
law's tuned value that lowers each best trial by its finite-trial bias."""


@dataclass(frozen=True)
class CriticalBatchFit:
    """S(B) = S_min · (1 + B_crit / B); ``e_min`` = S_min · B_crit examples.

    ``estimate`` says what the numbers estimate: :data:`PLAIN` (the least-squares fit to the
    points given, :func:`fit_critical_batch`) or :data:`CORRECTED` (the law a fully tuned
    search would find, :func:`critical_point`), in which case ``plain`` holds the plain
    fit beside it. ``note`` says why a workload's point is the plain fit.
    """

    s_min: float
    b_crit: float
    e_min: float
    residuals: Floats = field(repr=False)
    rss: float
    batch_sizes: Floats = field(repr=False, default_factory=lambda: np.zeros(0))
    estimate: str = PLAIN
    plain: CriticalBatchFit | None = field(repr=False, default=None)
    note: str = ""

    @property
    def plain_fit(self) -> CriticalBatchFit:
        """The paper's plain fit to the best trials: ``plain``, or this fit when it is one."""
        return self if self.plain is None else self.plain

    @property
    def b_crit_beyond(self) -> Beyond | None:
        """Whether B_crit lies above or below the batch sizes fitted (see
        :func:`beyond_measured`)."""
        return beyond_measured(self.b_crit, self.batch_sizes)

    def predict(self, batch_sizes: ArrayLike) -> Floats:
        """Model steps at ``batch_sizes``."""
        b = np.asarray(batch_sizes, dtype=float)
        return np.asarray(self.s_min * (1 + self.b_crit / b))


def fit_critical_batch(batch_sizes: ArrayLike | Any, steps: ArrayLike | None = None
                       ) -> CriticalBatchFit:
    """Fit the critical-batch-size model of McCandlish et al. (2018) in log space.

    Examples
    --------
    >>> import numpy as np
    >>> b = 2.0 ** np.arange(0, 15)
    >>> fit = fit_critical_batch(b, 1000 * (1 + 512 / b))
    >>> round(fit.s_min), round(fit.b_crit)
    (1000, 512)
    """
    x, y = _prepare(batch_sizes, steps)
    b = 2.0 ** x

    def residuals(p: Floats) -> Floats:
        out: Floats = p[0] + np.log2(1 + 2.0 ** p[1] / b) - y
        return out

    # For a fixed B_crit the best log2(S_min) is a mean, so a grid over log2(B_crit) finds
    # the global optimum; least squares then polishes it.
    grid = np.linspace(x[0] - 6, x[-1] + 6, 241)
    shape = np.log2(1 + 2.0 ** grid[:, None] / b[None, :])
    offsets = (y[None, :] - shape).mean(axis=1)
    rss = ((y[None, :] - shape - offsets[:, None]) ** 2).sum(axis=1)
    i = int(np.argmin(rss))
    best = least_squares(residuals, np.array([offsets[i], grid[i]]), method="lm")
    s_min, b_crit = 2.0 ** best.x[0], 2.0 ** best.x[1]
    return CriticalBatchFit(float(s_min), float(b_crit), float(s_min * b_crit), best.fun,
                            float(best.fun @ best.fun), b)


def critical_point(hits: Mapping[int, ArrayLike], sizes: ArrayLike, steps: ArrayLike
                   ) -> CriticalBatchFit:
    """The S_min, B_crit and E_min a workload's fit reports: **the one rule** every output
    goes through (``fit``'s table, CSV and JSON, the report, the plots, an adaptive run's
    rounds and its stopping).

    Wherever the bias-corrected estimator's requirements are met
    (:func:`curvekit.intervals.tuned_estimate`: 4 batch sizes reaching the goal, 4 of them
    with 3 trials at the goal), the point is its estimate of the law's tuned value, the
    centre the calibrated interval is built around, and the paper's plain fit to the best
    trials (``sizes``, ``steps``) comes beside it as ``plain``. Elsewhere the point is the
    plain fit, and ``note`` says why.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> b = 2.0 ** np.arange(4, 14)
    >>> hits = {int(x): 3000 * (1 + 600 / x) * np.exp(rng.uniform(0, 1, 30) ** 2 * 2)
    ...         for x in b}
    >>> best = [hits[int(x)].min() for x in b]
    >>> point = critical_point(hits, b, best)
    >>> point.estimate, point.s_min < point.plain_fit.s_min
    ('bias-corrected', True)
    >>> critical_point({int(x): h[:2] for x, h in hits.items()}, b, best).estimate
    'plain fit'
    """
    from curvekit.intervals import tuned_estimate

    plain = fit_critical_batch(sizes, steps)
    tuned = tuned_estimate(hits)
    if not tuned.available:
        return replace(plain, note=f"{tuned.reason}, so B_crit and S_min are the plain fit "
                                   "to the best trials")
    residuals = -tuned.residuals / _LN2  # the law less the points, as fit_critical_batch's
    return CriticalBatchFit(tuned.s_min, tuned.b_crit, tuned.e_min, residuals,
                            float(residuals @ residuals), tuned.sizes, CORRECTED, plain)


@dataclass(frozen=True)
class Bootstrap:
    """Percentile intervals of fitted quantities over trial resamples.

    ``intervals[name]`` is (low, high) at ``level``; ``defined[name]`` counts the resamples
    in which the quantity exists (e.g. a plateau may be absent in some).
    """

    n: int
    seed: int
    level: float
    intervals: dict[str, tuple[float, float]]
    defined: dict[str, int]
    samples: dict[str, Floats] = field(repr=False)
    reasons: dict[str, str] = field(default_factory=dict)
    """Why a quantity has no interval (S_min, B_crit, E_min: :mod:`curvekit.intervals`)."""
    bias: float | None = None
    """The estimated finite-trial bias: the fraction by which the measured steps to result
    exceed the law at the median batch size (None without the calibrated intervals)."""


@dataclass(frozen=True)
class Excess:
    """The batch size at which steps exceed perfect scaling by ``fraction``.

    Perfect scaling is the line S(B_0) · B_0 / B through the law at the reference batch
    size B_0; under S = S_min (1 + B_crit / B) the steps exceed it by ``fraction`` at
    B = fraction · B_crit + (1 + fraction) · B_0. ``reference`` None takes the law's own
    small-batch asymptote S_min · B_crit / B (B_0 → 0), where B = fraction · B_crit
    (``docs/fits.md`` derives both).

    >>> Excess(0.2, 256).at(2190.6)  # Zhang et al.'s 85M model
    745.32
    >>> Excess(0.2).at(2190.6)
    438.12
    """

    fraction: float = 0.2
    reference: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.fraction) and self.fraction > 0):
            raise FitError(f"the excess over perfect scaling must be a positive fraction "
                           f"(0.2 for 20%), got {self.fraction!r}")
        if self.reference is not None and not (math.isfinite(self.reference)
                                               and self.reference > 0):
            raise FitError(f"the reference batch size of perfect scaling must be a positive "
                           f"batch size, got {self.reference!r}; leave it out for the law's "
                           "own small-batch asymptote")

    def at(self, b_crit: float) -> float:
        """The batch size for a given B_crit."""
        base = 0.0 if self.reference is None else (1 + self.fraction) * self.reference
        return round(self.fraction * b_crit + base, 10)


def _critical_columns(row: dict[str, object], critical: CriticalBatchFit | None,
                      intervals: Bootstrap | None, excess: Excess | None) -> None:
    """The calibrated intervals' notes and the excess batch size, added to a summary row."""
    if intervals is not None:
        for name, why in intervals.reasons.items():
            row[f"{name}_interval_note"] = why
        row["finite_trial_bias"] = intervals.bias
    if critical is None or excess is None:
        return
    row["excess"] = excess.fraction
    row["excess_reference"] = excess.reference
    row["b_excess"] = excess.at(critical.b_crit)
    if intervals is not None:
        low, high = intervals.intervals.get("b_crit", (None, None))
        row["b_excess_low"] = None if low is None else excess.at(low)
        row["b_excess_high"] = None if high is None else excess.at(high)


QUANTITIES = ("perfect_scaling_end", "max_useful_batch_size", "diminishing_slope", "s_min",
              "b_crit", "e_min")


def resample_curves(hits: dict[int, Floats], n: int, rng: np.random.Generator
                    ) -> tuple[Floats, Floats]:
    """Steps to result of ``n`` trial resamples: (batch sizes, array n × batch sizes).

    ``hits[b]`` holds each loaded trial's first qualifying step at batch size b (``inf``
    when it never qualifies); a resample draws that many trials with replacement and takes
    the minimum, so a batch size may have no point (``inf``) in some resamples.
    """
    sizes = np.array(sorted(hits), dtype=float)
    out = np.empty((n, len(sizes)))
    for j, b in enumerate(sorted(hits)):
        h = np.asarray(hits[b], dtype=float)
        if not len(h):
            out[:, j] = np.inf
            continue
        out[:, j] = h[rng.integers(0, len(h), size=(n, len(h)))].min(axis=1)
    return sizes, out


def bootstrap(hits: dict[int, ArrayLike], *, n: int = 1000, seed: int = 0,
              level: float = 0.95, model: str | None = None,
              critical: bool = True) -> Bootstrap:
    """Bootstrap over trials: resample each study's trials, recompute, refit.

    ``model`` fixes the piecewise model (e.g. the one chosen on the full data) so that
    every resample estimates the same quantities; ``None`` re-selects it each time.
    Seeded, so the same call gives the same intervals.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> hits = {2 ** k: 2.0 ** (20 - min(k, 8)) * rng.uniform(1, 3, 20) for k in range(14)}
    >>> result = bootstrap(hits, n=200, seed=0, model="perfect+plateau", critical=False)
    >>> low, high = result.intervals["max_useful_batch_size"]
    >>> bool(low <= 256 <= high)
    True
    """
    if not 0 < level < 1:
        raise FitError(f"level must be between 0 and 1, got {level}")
    for what, given, low, high in (("the number of resamples", n, 1, MAX_RESAMPLES),
                                   ("the seed", seed, 0, INT64_MAX)):
        problem = integer_problem(given, minimum=low, maximum=high)
        if problem is not None:
            raise FitError(f"{what} {given!r} {problem}; give a whole number from {low:,} to "
                           f"{high:,}")
    rng = np.random.default_rng(seed)
    arrays = {int(b): np.where(np.isnan(a := np.asarray(h, dtype=float)), np.inf, a)
              for b, h in hits.items()}
    sizes, curves = resample_curves(arrays, n, rng)
    models = MODELS if model is None else (tuple(model.split("+")),)
    samples: dict[str, list[float]] = {q: [] for q in QUANTITIES}
    for row in curves:
        ok = np.isfinite(row)
        if ok.sum() < 3:
            continue
        b, s = sizes[ok], row[ok]
        try:
            fit = fit_regimes(b, s, models=models, refine=False)
        except FitError:
            continue
        values: dict[str, float | None] = {
            "perfect_scaling_end": fit.perfect_scaling_end,
            "max_useful_batch_size": fit.max_useful_batch_size,
            "diminishing_slope": fit.diminishing_slope}
        if critical:
            crit = fit_critical_batch(b, s)
            values.update(s_min=crit.s_min, b_crit=crit.b_crit, e_min=crit.e_min)
        for name, value in values.items():
            if value is not None and math.isfinite(value):
                samples[name].append(value)
    tail = (1 - level) / 2 * 100
    arrays_out = {q: np.asarray(v) for q, v in samples.items()}
    intervals = {q: (float(np.percentile(v, tail)), float(np.percentile(v, 100 - tail)))
                 for q, v in arrays_out.items() if len(v)}
    return Bootstrap(n, seed, level, intervals, {q: len(v) for q, v in arrays_out.items()},
                     arrays_out)


@dataclass(frozen=True)
class WorkloadFit:
    """Fits of one workload's steps-to-result curve, with bootstrap intervals if asked."""

    workload: str
    metric: str
    goal: float
    maximize: bool
    batch_sizes: Floats = field(repr=False)
    steps: Floats = field(repr=False)
    regimes: RegimeFit | None
    critical: CriticalBatchFit | None
    intervals: Bootstrap | None = None
    noise: NoiseScalePrediction | None = None
    excess: Excess | None = None

    def summary(self) -> dict[str, object]:
        """One flat row: the fitted quantities and, with a bootstrap, their intervals.

        S_min, B_crit and E_min are the reported point of :func:`critical_point` (the
        bias-corrected estimate, or the plain fit where the estimator's requirements are not
        met: ``critical_estimate`` says which, ``critical_estimate_note`` why), and
        ``s_min_plain``, ``b_crit_plain``, ``e_min_plain`` the paper's plain fit to the best
        trials. Their intervals are the calibrated ones of
        :func:`curvekit.intervals.critical_intervals`, built around the same point; where
        there is none, ``<name>_interval_note`` says why. ``b_excess`` is the batch size at
        which steps exceed perfect scaling by ``excess`` (:class:`Excess`).
        """
        row: dict[str, object] = {"workload": self.workload, "metric": self.metric,
                                  "goal": self.goal, "points": len(self.batch_sizes)}
        values: dict[str, float | None] = {}
        if self.regimes is not None:
            row["model"] = self.regimes.model
            values.update(perfect_scaling_end=self.regimes.perfect_scaling_end,
                          max_useful_batch_size=self.regimes.max_useful_batch_size,
                          diminishing_slope=self.regimes.diminishing_slope)
        if self.critical is not None:
            values.update(b_crit=self.critical.b_crit, s_min=self.critical.s_min,
                          e_min=self.critical.e_min)
        sizes = self.batch_sizes
        row["min_batch_size"] = float(sizes.min()) if len(sizes) else None
        row["max_batch_size"] = float(sizes.max()) if len(sizes) else None
        for name, value in values.items():
            row[name] = value
            if name in BATCH_SIZE_QUANTITIES:
                row[f"{name}_beyond"] = beyond_measured(value, sizes)
            if self.intervals is not None:
                low, high = self.intervals.intervals.get(name, (None, None))
                row[f"{name}_low"], row[f"{name}_high"] = low, high
                if name in BATCH_SIZE_QUANTITIES:
                    row[f"{name}_low_beyond"] = beyond_measured(low, sizes)
                    row[f"{name}_high_beyond"] = beyond_measured(high, sizes)
        if self.critical is not None:  # what the point estimates, and the plain fit beside
            plain = self.critical.plain_fit
            row.update(critical_estimate=self.critical.estimate, s_min_plain=plain.s_min,
                       b_crit_plain=plain.b_crit, e_min_plain=plain.e_min)
            if self.critical.note:
                row["critical_estimate_note"] = self.critical.note
        _critical_columns(row, self.critical, self.intervals, self.excess)
        if self.noise is not None:
            row.update(b_simple=self.noise.b_simple, b_simple_low=self.noise.low,
                       b_simple_high=self.noise.high, b_simple_trials=self.noise.trials)
        if self.regimes is not None:
            row["note"] = self.regimes.note
        row["range_note"] = range_note(row)
        return row


NOISE_NORM, NOISE_TRACE = "train/gradient_norm_squared", "train/gradient_noise_trace"
"""The columns the runner records the two parts of the gradient noise scale in."""


@dataclass(frozen=True)
class NoiseScalePrediction:
    """B_simple as a prediction of B_crit: the median over trials and its quartiles.

    Each trial's B_simple is the mean of its tr(Σ) estimates over the mean of its |G|²
    estimates, over its evaluations from step 0 up to the first that reaches the goal.
    """

    b_simple: float
    low: float
    high: float
    trials: int


def predict_critical_batch(store: Store, workload: str, hits: Any
                           ) -> NoiseScalePrediction | None:
    """The gradient noise scale's prediction of B_crit, or ``None`` without its columns.

    ``hits`` is :func:`curvekit.measure.trial_hits`' table (batch size, trial id, first step
    at the goal): only trials that reach the goal count, each over its evaluations up to
    that step, so the prediction describes the same stretch of training as the fitted
    B_crit. ``None`` when the workload has no noise-scale columns or no such trial has a
    positive mean |G|² estimate.
    """
    import polars as pl

    from curvekit.noise import simple_noise_scale

    if not {NOISE_NORM, NOISE_TRACE} <= set(store.metrics(workload)):
        return None
    wide = store.measurements(workload, metrics=[NOISE_NORM, NOISE_TRACE])
    assert isinstance(wide, pl.DataFrame)
    rows = wide.select("batch_size", "trial_id", "step", pl.col(NOISE_NORM).alias("g"),
                       pl.col(NOISE_TRACE).alias("t")).filter(pl.col("g").is_not_null())
    reached = hits.filter(pl.col("step").is_not_null()).select(
        pl.col("batch_size").cast(pl.Int64), pl.col("trial_id").cast(pl.Int64),
        pl.col("step").cast(pl.Float64).alias("goal_step"))
    window = rows.with_columns(pl.col("batch_size").cast(pl.Int64),
                               pl.col("trial_id").cast(pl.Int64)).join(
        reached, on=["batch_size", "trial_id"]).filter(pl.col("step") <= pl.col("goal_step"))
    per_trial = [simple_noise_scale(group["g"].to_list(), group["t"].to_list())
                 for _, group in window.group_by(["batch_size", "trial_id"])]
    values = np.array([v for v in per_trial if math.isfinite(v) and v > 0])
    if not len(values):
        return None
    low, median, high = np.percentile(values, [25, 50, 75])
    return NoiseScalePrediction(float(median), float(low), float(high), len(values))


_NAMES = {"perfect_scaling_end": "the end of perfect scaling",
          "max_useful_batch_size": "the maximum useful batch size", "b_crit": "B_crit"}


def bounded_value(row: dict[str, Any], name: str, digits: int = 0) -> str:
    """A summary row's fitted value as text, or '> largest' / '< smallest' measured batch
    size when its flag ``<name>_beyond`` says it lies past them.

    >>> bounded_value({"b_crit": 9e11, "b_crit_beyond": "above", "max_batch_size": 55000.0},
    ...               "b_crit")
    '> 55,000'
    """
    where = row.get(f"{name}_beyond")
    if where == "above":
        return f"> {row['max_batch_size']:,.0f}"
    if where == "below":
        return f"< {row['min_batch_size']:,.0f}"
    return f"{row[name]:,.{digits}f}"


def outside_note(row: dict[str, Any]) -> str:
    """Where a summary row's B_crit or S_min lies outside its own interval, in words ("" when
    neither does).

    The point a workload's fit reports is the centre its interval is built around
    (:func:`critical_point`), so it lies inside unless more than the interval's tail
    fraction (2.5% at 95%) of the simulated estimates erred to one side of the law they
    were drawn from: the estimator is that biased there. The interval accounts for the
    bias, the point does not: trust the interval (``docs/fits.md``).

    >>> outside_note({"b_crit": 24.3, "b_crit_low": 17.6, "b_crit_high": 22.5})
    ... # doctest: +NORMALIZE_WHITESPACE
    'B_crit 24.3 lies outside its interval 17.6–22.5: the simulated estimates erred to one
    side of the law they were drawn from in more than the tail fraction of the interval,
    so the estimator is biased here and the interval corrects for it; trust the interval'
    >>> outside_note({"b_crit": 20.0, "b_crit_low": 16.7, "b_crit_high": 23.7})
    ''
    """
    parts = []
    for name, words in (("b_crit", "B_crit"), ("s_min", "S_min")):
        value, low, high = (row.get(name), row.get(f"{name}_low"), row.get(f"{name}_high"))
        if value is None or low is None or high is None or low <= value <= high:
            continue
        parts.append(f"{words} {value:.3g} lies outside its interval {low:.3g}–{high:.3g}")
    if not parts:
        return ""
    return ("; ".join(parts) + ": the simulated estimates erred to one side of the law they "
            "were drawn from in more than the tail fraction of the interval, so the "
            "estimator is biased here and the interval corrects for it; trust the interval")


def range_note(row: dict[str, Any]) -> str:
    """What a summary row's flags ``*_beyond`` mean, in words ("" when nothing is beyond).

    >>> range_note({"b_crit_beyond": "above", "min_batch_size": 16.0,
    ...             "max_batch_size": 55000.0})  # doctest: +NORMALIZE_WHITESPACE
    'B_crit lies above the largest measured batch size (55,000): the fit extrapolates, and
    the data only say B_crit > 55,000 (S_min and E_min are extrapolated too)'
    """
    lo, hi = row.get("min_batch_size"), row.get("max_batch_size")
    parts = []
    for name, words in _NAMES.items():
        where = row.get(f"{name}_beyond")
        if where is not None:
            side, end, sign = (("above", "largest", ">") if where == "above"
                               else ("below", "smallest", "<"))
            bound = hi if where == "above" else lo
            text = (f"{words} lies {side} the {end} measured batch size ({bound:,.0f}): the "
                    f"fit extrapolates, and the data only say {words} {sign} {bound:,.0f}")
            if name == "b_crit":
                text += " (S_min and E_min are extrapolated too)"
        elif row.get(f"{name}_low_beyond") or row.get(f"{name}_high_beyond"):
            text = (f"the bootstrap interval of {words} reaches beyond the measured batch "
                    f"sizes ({lo:,.0f}–{hi:,.0f})")
        else:
            continue
        parts.append(text[0].upper() + text[1:])
    return "; ".join(parts)


def identifiable(sizes: Floats, steps: Floats) -> str:
    """What fewer than 3 batch sizes identify, in words (for the error of a fit that cannot
    be made): with 2, the scaling between them; the regimes and B_crit need 3 or more.

    >>> identifiable(np.array([256.0, 2048.0]), np.array([36000.0, 6000.0]))  # doctest: +ELLIPSIS
    '. With 2 batch sizes the data identify only the scaling between them: ... -0.86 ...'
    """
    if len(sizes) != 2:
        return ""
    slope = math.log(steps[1] / steps[0]) / math.log(sizes[1] / sizes[0])
    return (f". With 2 batch sizes the data identify only the scaling between them: steps "
            f"to result {steps[0]:,.0f} at {sizes[0]:,.0f} and {steps[1]:,.0f} at "
            f"{sizes[1]:,.0f}, a log-log slope of {slope:.2f} (perfect scaling is -1, none "
            "is 0); the end of perfect scaling, the maximum useful batch size and B_crit "
            "cannot be identified from them")


def hits_by_batch_size(frame: Any) -> dict[int, Floats]:
    """:func:`curvekit.measure.trial_hits`' table as batch size → each loaded trial's first
    step at the goal (``inf`` where it never gets there), the form the fits read."""
    import polars as pl

    hits: dict[int, Floats] = {}
    for (b,), group in frame.group_by("batch_size", maintain_order=True):
        hits[int(b)] = group["step"].cast(pl.Float64).fill_null(np.inf).to_numpy()
    return hits


def fit_workload(store: Store, selection: Selection, *, model: str = "both",
                 bootstrap_samples: int = 0, seed: int = 0, level: float = 0.95,
                 explain: bool = True, excess: Excess | None = None) -> WorkloadFit:
    """Fit a workload's steps-to-result curve (paper definition) and bootstrap it.

    ``selection`` says which curve: the workload, metric, goal and direction, and the loaded
    trials and budgets as for :func:`curvekit.measure.steps_to_result`. ``model`` is
    ``piecewise``, ``critical`` or ``both``. ``bootstrap_samples`` resamples give the
    intervals: those of the piecewise model's quantities resample each study's loaded
    trials with replacement and refit the model chosen on the full data; those of S_min,
    B_crit and E_min are the calibrated intervals of :mod:`curvekit.intervals` (with a
    reason instead where the data cannot calibrate one). ``excess`` says which batch size
    over perfect scaling is reported beside B_crit (:class:`Excess`).

    Batch sizes where no loaded trial reaches the goal are left out of the fit and
    explained by :class:`curvekit.measure.EmptyResultWarning` warnings (unless
    ``explain=False``); with fewer than 3 left the :class:`FitError` says why.
    """
    import polars as pl

    from curvekit.measure import explain_empty, searched_metaparameters, trial_hits, warn_explained

    excess = Excess() if excess is None else excess
    if model not in ("piecewise", "critical", "both"):
        raise FitError(f"model must be piecewise, critical or both, got {model!r}")
    workload, metric, maximize = selection.workload, selection.metric, selection.maximize
    hits_frame = trial_hits(store, selection)
    goal = float(selection.goal)  # type: ignore[arg-type]  # trial_hits refuses None
    hits = hits_by_batch_size(hits_frame)
    best = {b: float(h.min()) for b, h in hits.items() if len(h) and np.isfinite(h.min())}
    sizes = np.array(sorted(best), dtype=float)
    steps = np.array([best[int(b)] for b in sizes], dtype=float)
    reached = pl.DataFrame({"batch_size": sorted(best)}, schema={"batch_size": pl.Int64})
    if len(sizes) < 3:
        why = explain_empty(store, selection, result=reached)
        raise FitError(f"{workload}: only {len(sizes)} batch "
                       f"{'size reaches' if len(sizes) == 1 else 'sizes reach'} "
                       f"{selection.target}; a fit needs at least 3"
                       + "".join(f"; {line.removeprefix(workload + ': ')}" for line in why)
                       + identifiable(sizes, steps))
    if explain:
        warn_explained(store, selection, reached)
    regimes = fit_regimes(sizes, steps) if model in ("piecewise", "both") else None
    critical = critical_point(hits, sizes, steps) if model in ("critical", "both") else None
    intervals = None
    if bootstrap_samples:
        intervals = bootstrap(
            dict(hits), n=bootstrap_samples, seed=seed, level=level,
            model=regimes.model if regimes is not None else "perfect+diminishing+plateau",
            critical=False)
        if regimes is None:
            for name in ("perfect_scaling_end", "max_useful_batch_size", "diminishing_slope"):
                intervals.intervals.pop(name, None)
        if critical is not None:
            intervals = _with_critical(intervals, hits, bootstrap_samples, seed, level,
                                       searched_metaparameters(store, selection))
    return WorkloadFit(workload, metric, goal, maximize, sizes, steps, regimes, critical,
                       intervals, predict_critical_batch(store, workload, hits_frame),
                       excess if critical is not None else None)


def _with_critical(boot: Bootstrap, hits: dict[int, Floats], samples: int, seed: int,
                   level: float, searched: int) -> Bootstrap:
    """``boot`` with the calibrated intervals of S_min, B_crit and E_min (or the reasons
    there are none) in place of the trial bootstrap's; ``searched`` metaparameters vary
    across the loaded trials."""
    from curvekit.intervals import critical_intervals

    crit = critical_intervals(hits, samples=samples, seed=seed, level=level,
                              searched=searched)
    merged = {**boot.intervals, **crit.intervals}
    draws = {**boot.samples, **crit.draws}
    return Bootstrap(boot.n, boot.seed, boot.level, merged,
                     {**boot.defined, **{q: len(v) for q, v in crit.draws.items()}}, draws,
                     dict(crit.reasons), crit.bias)


def fit_all(store: Store, *, model: str = "both", bootstrap_samples: int = 0, seed: int = 0,
            level: float = 0.95, statuses: Sequence[str] = DEFAULT_STATUSES,
            explain: bool = True, excess: Excess | None = None) -> list[dict[str, object]]:
    """Fit every workload of the store at the goal the paper's figures use for it.

    A workload the paper gives no goal (an imported one, a new run) is fitted at
    :func:`curvekit.goals.default_goal`'s rule goal. ``statuses`` selects the trials each
    fit loads (the goal itself is derived from COMPLETE trials, as the paper's rule says);
    ``explain`` as for :func:`fit_workload`.

    Returns one :meth:`WorkloadFit.summary` row per workload; a workload that cannot be
    fitted (no paper goal, fewer than 3 batch sizes reaching it) gets a row whose ``note``
    says why.
    """
    from curvekit.errors import QueryError
    from curvekit.goals import default_goal

    rows: list[dict[str, object]] = []
    for workload in store.workloads():
        try:
            goal = default_goal(store, workload)
            fitted = fit_workload(store, goal.selection.with_statuses(statuses), model=model,
                                  bootstrap_samples=bootstrap_samples, seed=seed,
                                  level=level, explain=explain, excess=excess)
        except (FitError, QueryError) as exc:
            rows.append({"workload": workload, "note": str(exc)})
            continue
        rows.append(fitted.summary())
    return rows


def fit(store: Store, selection: Selection | None = None, *, all: bool = False,
        statuses: Sequence[str] = DEFAULT_STATUSES, model: str = "both", bootstrap: int = 0,
        seed: int = 0, level: float = 0.95, explain: bool = True,
        excess: float = 0.2, excess_reference: float | None = None
        ) -> list[dict[str, object]]:
    """The fits ``curvekit fit`` prints: one :meth:`WorkloadFit.summary` row per workload.

    Give a ``selection`` (workload, metric, goal: one curve, fitted or a
    :class:`FitError`), or ``all=True`` for every workload at the paper's goal
    (:func:`fit_all`, each workload that cannot be fitted gets a row whose ``note`` says
    why; ``statuses`` selects their trials). ``bootstrap`` resamples for 95% intervals
    (``level``), ``model`` and ``explain`` as for :func:`fit_workload`; ``excess`` and
    ``excess_reference`` define the batch size reported beside B_crit (:class:`Excess`).
    A steps-to-result table from a file is :func:`curvekit.fit_table`'s.

    >>> import tempfile, pathlib, curvekit
    >>> home = pathlib.Path(tempfile.mkdtemp())
    >>> _ = curvekit.demo(home)
    >>> store = curvekit.open(home)
    >>> rows = fit(store, all=True, explain=False)
    >>> [row["workload"] for row in rows] == store.workloads()
    True
    """
    if all == (selection is not None):
        raise FitError("give a selection (one workload, its metric and a goal) or all=True, "
                       "not both; on the command line: WORKLOAD --metric M --goal G, or --all")
    over = Excess(excess, excess_reference)
    if selection is None:
        return fit_all(store, model=model, bootstrap_samples=bootstrap, seed=seed,
                       level=level, statuses=statuses, explain=explain, excess=over)
    return [fit_workload(store, selection, model=model, bootstrap_samples=bootstrap,
                         seed=seed, level=level, explain=explain, excess=over).summary()]


# --- steps-to-result tables (a paper's, another tool's) ------------------------------------

TABLE_COLUMNS = ("batch_size", "steps")
"""The columns a steps-to-result table needs; ``steps_sd`` (the standard deviation of each
row's steps) is optional, and ``step`` is read as ``steps`` (curvekit's own tables)."""
TABLE_SD = "steps_sd"
MIN_TABLE_ROWS = 3
"""Rows a table needs: the law has two parameters, and a fit needs a residual."""


@dataclass(frozen=True)
class TableFit:
    """Both fits of a steps-to-result table, and intervals where the table allows them.

    ``intervals`` hold (low, high) of S_min, B_crit and E_min when the table gives per-row
    uncertainties (``steps_sd``) and a bootstrap was asked for; ``reasons`` say why a
    quantity has none.
    """

    name: str
    batch_sizes: Floats = field(repr=False)
    steps: Floats = field(repr=False)
    steps_sd: Floats | None = field(repr=False)
    regimes: RegimeFit
    critical: CriticalBatchFit
    excess: Excess
    intervals: dict[str, tuple[float, float]]
    reasons: dict[str, str]
    level: float = 0.95

    def curve(self) -> Any:
        """The table as a steps-to-result frame (``batch_size``, ``step``) for the plots."""
        import polars as pl

        return pl.DataFrame({"batch_size": self.batch_sizes, "step": self.steps})

    def summary(self) -> dict[str, object]:
        """One flat row, with the columns of :meth:`WorkloadFit.summary`."""
        boot = Bootstrap(0, 0, self.level, dict(self.intervals), {}, {}, dict(self.reasons))
        fitted = WorkloadFit(self.name, "steps", math.nan, False, self.batch_sizes,
                             self.steps, self.regimes, self.critical,
                             boot if self.intervals or self.reasons else None, None,
                             self.excess)
        row = fitted.summary()
        # A table's point is always the plain fit (it holds no trials to correct).
        for name in ("metric", "goal", "critical_estimate", "s_min_plain", "b_crit_plain",
                     "e_min_plain"):
            del row[name]
        row.pop("finite_trial_bias", None)
        return row


def _table_columns(table: Any) -> dict[str, list[Any]]:
    """A polars or pandas frame, or a mapping of column name to values, as plain lists."""
    if isinstance(table, Mapping):
        return {str(k): list(v) if isinstance(v, (list, tuple)) else v
                for k, v in table.items()}
    try:
        return {str(name): list(table[name]) for name in table.columns}
    except (AttributeError, KeyError, TypeError) as exc:
        raise FitError("a steps-to-result table is a frame or a mapping of columns "
                       "batch_size, steps (optional steps_sd) to values, got "
                       f"{type(table).__name__}") from exc


def check_steps_table(table: Any, *, where: str = "the table") -> tuple[Floats, Floats,
                                                                          Floats | None]:
    """Batch sizes, steps and per-row standard deviations (or None) of a steps-to-result
    table, sorted by batch size; every bad cell is refused with its row and column.

    Rows are numbered from 1 in the order given. Refused: a missing column, a value that is
    not a number, a number that is not finite and positive (``steps_sd`` too), a batch size
    given twice, fewer than 3 rows.

    >>> b, steps, sd = check_steps_table({"batch_size": [64, 32, 128],
    ...                                   "steps": [500, 900, 300], "note": ["", "", ""]})
    >>> b.tolist(), steps.tolist(), sd
    ([32.0, 64.0, 128.0], [900.0, 500.0, 300.0], None)
    >>> check_steps_table({"batch_size": [32, 64, 32], "steps": [3, 2, 1]})
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curvekit.errors.FitError: the table, rows 1 and 3, column batch_size: batch size 32 is ...
    """
    columns = _table_columns(table)
    if "steps" not in columns and "step" in columns:
        columns["steps"] = columns.pop("step")
    missing = [c for c in TABLE_COLUMNS if c not in columns]
    if missing:
        raise FitError(f"{where} has no column {', '.join(missing)}; a steps-to-result table "
                       f"needs columns batch_size and steps (optional {TABLE_SD}), found "
                       f"{', '.join(sorted(columns)) or 'none'}")
    names = [*TABLE_COLUMNS, *([TABLE_SD] if TABLE_SD in columns else [])]
    lengths = {name: len(columns[name]) for name in names}
    if len(set(lengths.values())) > 1:
        raise FitError(f"{where}: its columns have different lengths "
                       f"({', '.join(f'{k} {v}' for k, v in lengths.items())}); give one "
                       "value per row in each")
    values: dict[str, list[float]] = {name: [] for name in names}
    for name in names:
        for row, value in enumerate(columns[name], start=1):
            number = _table_number(value)
            if number is None or not math.isfinite(number) or number <= 0:
                raise FitError(f"{where}, row {row}, column {name}: {value!r} is not a "
                               "finite positive number; steps to result and batch sizes are "
                               "fitted on log scales" + (", and a standard deviation must be "
                                                         "positive" if name == TABLE_SD
                                                         else ""))
            values[name].append(number)
    seen: dict[float, int] = {}
    for row, b in enumerate(values["batch_size"], start=1):
        if b in seen:
            raise FitError(f"{where}, rows {seen[b]} and {row}, column batch_size: batch "
                           f"size {b:g} is given twice; give one steps to result per batch "
                           "size")
        seen[b] = row
    if len(seen) < MIN_TABLE_ROWS:
        raise FitError(f"{where} has {len(seen)} row{'s' if len(seen) != 1 else ''}; "
                       f"fitting S = S_min (1 + B_crit / B) needs at least {MIN_TABLE_ROWS} "
                       "(two parameters and a residual)")
    order = np.argsort(values["batch_size"])
    sizes: Floats = np.asarray(values["batch_size"], dtype=float)[order]
    steps: Floats = np.asarray(values["steps"], dtype=float)[order]
    sd: Floats | None = (np.asarray(values[TABLE_SD], dtype=float)[order]
                         if TABLE_SD in values else None)
    return sizes, steps, sd


def _table_number(value: Any) -> float | None:
    """A cell as a float: numbers and numeric text; None for anything else (a flag too)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def fit_steps_table(table: Any, *, name: str = "table", bootstrap: int = 0, seed: int = 0,
                    level: float = 0.95, excess: Excess | None = None) -> TableFit:
    """Fit both models to a steps-to-result table (a paper's, another tool's).

    ``table``: a polars or pandas frame or a mapping with columns ``batch_size`` and
    ``steps`` (optional ``steps_sd``, each row's standard deviation of steps), checked by
    :func:`check_steps_table`. With ``bootstrap`` samples and ``steps_sd``, S_min, B_crit
    and E_min get intervals from a parametric bootstrap (normal in log steps with standard
    deviation steps_sd / steps); without ``steps_sd`` a table holds one number per batch
    size and says nothing of its noise, and ``reasons`` says so. The regime fit's
    quantities get no interval from a table.

    Zhang et al. (2024)'s 85M model reaches the goal in these steps:

    >>> table = {"batch_size": [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    ...          "steps": [46000, 23000, 13282, 7000, 3840, 2528, 1917, 1600, 1600]}
    >>> fit = fit_steps_table(table, excess=Excess(0.2, 256))
    >>> f"{fit.critical.s_min:.5g}", f"{fit.critical.b_crit:.5g}"
    ('1293.8', '2190.6')
    >>> round(fit.summary()["b_excess"], 1)
    745.3
    """
    b, s, sd = check_steps_table(table, where=f"the table {name}" if name != "table"
                                 else "the table")
    excess = Excess() if excess is None else excess
    regimes = fit_regimes(b, s)
    critical = fit_critical_batch(b, s)
    intervals: dict[str, tuple[float, float]] = {}
    reasons: dict[str, str] = {}
    if bootstrap:
        problem = integer_problem(bootstrap, minimum=1, maximum=MAX_RESAMPLES)
        if problem is not None:
            raise FitError(f"the number of resamples {bootstrap!r} {problem}; give a whole "
                           f"number from 1 to {MAX_RESAMPLES:,}")
        if sd is None:
            why = (f"the table gives no per-row uncertainty (column {TABLE_SD}): one number "
                   "per batch size says nothing of its noise, so no interval is calibrated")
            reasons = {q: why for q in ("s_min", "b_crit", "e_min")}
        elif not b[0] <= critical.b_crit <= b[-1]:
            why = (f"B_crit {critical.b_crit:,.0f} lies outside the table's batch sizes "
                   f"({b[0]:,.0f}–{b[-1]:,.0f}): the law extrapolates and the data only "
                   "bound it")
            reasons = {q: why for q in ("s_min", "b_crit", "e_min")}
        else:
            from curvekit.intervals import table_intervals

            intervals = table_intervals(b, s, sd, samples=bootstrap, seed=seed, level=level)
    return TableFit(name, b, s, sd, regimes, critical, excess, intervals, reasons, level)
