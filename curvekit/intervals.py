"""Calibrated intervals for the critical-batch-size law: a parametric model of best-of-N.

Steps to result at a batch size is the **minimum over a study's trials**: a study of n
trials measures the law's S(B) = S_min (1 + B_crit / B) only as well as its best trial came
close to the optimal metaparameters. curvekit models each trial's steps as

    log steps = log S(B) + E,    E ≥ 0,    P(E ≤ ε) = (ε / σ)^k  near ε = 0,

the lower tail of a search around a smooth optimum (a quadratic bowl searched uniformly in
d metaparameters gives k = d / 2). The minimum of n draws then exceeds the law by
E_(1) = σ (Γ_1 / Γ_(n+1))^(1/k) (Γ_i: sums of i standard exponentials), on average
σ Γ(1 + 1/k) n^(-1/k): **finite n biases steps to result upward**, and only the lowest
order statistics of each study carry information about that bias.

**The estimator** (:func:`estimate`), in natural logs:

1. the r lowest trials of every study (an eighth of its trials, 3 to 8) are fitted by least
   squares to their expectations x_(i) = μ_j + σ n_j^(-1/k) Γ(i + 1/k) / Γ(i), one level
   μ_j per study and σ shared, for each 1/k of a grid (k from 0.5 to 4); the k with the
   smallest residuals wins;
2. each study's minimum is lowered by its estimated bias σ Γ(1 + 1/k) n_j^(-1/k) (the
   minimum, not the fitted level, because near an endpoint it is by far the most precise
   order statistic);
3. the law is fitted by least squares to the corrected minima (log S_min, log B_crit).

**The interval** (:func:`critical_intervals`) is a parametric bootstrap-t: studies of the
same sizes are simulated from the fitted law and tail (the lowest order statistics drawn
exactly, σ (Γ_i / Γ_(n+1))^(1/k)), with the tail's shape itself spread as its estimate
spreads (a first round of simulations at the estimated shape, reflected about it and
folded back into the grid at its ends), the estimator is re-run on each, and the error
θ* − θ̂, divided by each simulation's residual standard deviation, gives the interval
θ̂ − t* · s in log space. Because the estimator is re-run, the uncertainty of the bias
correction and of the tail's shape is carried into the interval. B_crit gets an interval
only where the batch sizes reach a factor :data:`MARGIN` beyond it on each side, where the
law's two asymptotes are seen. With the count of
metaparameters ``searched`` (observable: the trials' parameters), S_min is declined above
:data:`MAX_SEARCHED_S_MIN`. ``docs/fits.md`` gives the coverage this reaches and where
curvekit declines to give an interval.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> b = 2.0 ** np.arange(4, 14)
>>> law = 3000 * (1 + 600 / b)
>>> hits = {int(x): s * np.exp(rng.uniform(0, 1, 30) ** 2 * 2) for x, s in zip(b, law)}
>>> result = critical_intervals(hits, samples=400, seed=0)
>>> low, high = result.intervals["b_crit"]
>>> bool(low < 600 < high), result.reasons
(True, {})
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln

from curvekit.errors import FitError

__all__ = ["CriticalIntervals", "Estimate", "TunedEstimate", "critical_intervals", "estimate",
           "fit_law", "table_intervals", "tuned_estimate"]

Floats = NDArray[np.float64]

ORDER_STATISTICS = (3, 8)
"""The lowest trials of each study the tail model reads: an eighth of the trials, at least
3 and at most 8 (the tail's power law holds near the optimum only)."""
SHAPE_RANGE = (0.5, 4.0)
"""The tail shapes k the estimate chooses from (1 to 8 metaparameters searched)."""
MIN_SPACINGS = 4
"""Batch sizes with three trials at the goal needed to estimate the tail."""
MIN_BATCH_SIZES = 4
"""Batch sizes needed for an interval: with 3, one residual degree of freedom is left."""
LACK_OF_FIT = 0.995
"""A curve whose residuals exceed this quantile of the simulated ones does not follow the law."""
INNER = 1
"""B_crit needs this many measured batch sizes beyond it on each side for an interval."""
MARGIN = 4.0
"""B_crit needs measured batch sizes this factor beyond it on each side for an interval:
S(B) / S_min = 1 + B_crit / B is within 25% of either asymptote (perfect scaling below,
S_min above) only a factor 4 away from B_crit, so nearer an end the bend is seen from one
side only, and the simulated intervals there covered 82–91% (curvekit's coverage study)."""
MIN_BATCH_SIZES_S_MIN = 6
"""Batch sizes reaching the goal an interval of S_min needs."""
MIN_TRIALS_S_MIN = 20
"""Trials per batch size (median) an interval of S_min needs."""
MAX_SHAPE_S_MIN = 1.2
"""The largest tail shape k for which S_min gets an interval."""
MAX_SEARCHED_S_MIN = 2
"""The most metaparameters searched (varying across a study's trials) for which S_min gets
an interval: a search over d metaparameters around a smooth optimum has tail shape up to
d / 2, and above MAX_SHAPE_S_MIN the best trials' spacings cannot bound the bias."""
_GRID_OCTAVES = 6.0
_LN2 = math.log(2.0)


def fit_law(log_b: Floats, y: Floats) -> tuple[Floats, Floats]:
    """Least-squares fits of log S = a + log(1 + e^c / B), one per row of ``y``.

    ``log_b`` (K,) natural logs of the batch sizes, ``y`` (R, K) natural logs of steps.
    Returns (a, c): log S_min and log B_crit per row. A coarse grid over c spanning six
    octaves beyond the batch sizes on each side finds the global optimum (for fixed c the
    best a is a mean), a fine grid and a parabola polish it, all vectorised over rows.

    >>> import numpy as np
    >>> b = 2.0 ** np.arange(0, 12)
    >>> a, c = fit_law(np.log(b), np.log(1000 * (1 + 64 / b))[None, :])
    >>> round(float(np.exp(a[0]))), round(float(np.exp(c[0])))
    (1000, 64)
    """
    y = np.atleast_2d(y)
    lo, hi = log_b[0] - _GRID_OCTAVES * _LN2, log_b[-1] + _GRID_OCTAVES * _LN2
    coarse = np.linspace(lo, hi, 161)
    step = coarse[1] - coarse[0]

    def rss_at(c: Floats) -> tuple[Floats, Floats]:
        shape = np.log1p(np.exp(c[..., None] - log_b))  # (..., G, K)
        resid = y[:, None, :] - shape
        a = resid.mean(axis=-1)
        return ((resid - a[..., None]) ** 2).sum(axis=-1), a

    rss, _ = rss_at(coarse)
    best = coarse[np.argmin(rss, axis=1)]
    fine = best[:, None] + np.linspace(-step, step, 41)[None, :]
    rss, _ = rss_at(fine)
    i = np.clip(np.argmin(rss, axis=1), 1, fine.shape[1] - 2)
    rows = np.arange(len(y))
    r0, r1, r2 = rss[rows, i - 1], rss[rows, i], rss[rows, i + 1]
    h = fine[0, 1] - fine[0, 0]
    denom = r0 - 2 * r1 + r2
    with np.errstate(invalid="ignore", divide="ignore"):
        shift = np.where(denom > 0, 0.5 * h * (r0 - r2) / denom, 0.0)
    c = fine[rows, i] + np.clip(shift, -h, h)
    a = (y - np.log1p(np.exp(c[:, None] - log_b))).mean(axis=1)
    return a, c


@dataclass(frozen=True)
class Estimate:
    """The estimator's output for R data sets (arrays of length R).

    ``a`` = log S_min and ``c`` = log B_crit of the law (finite-trial bias removed),
    ``inv_k`` = 1/k the tail's shape, ``scale`` = σ its scale (natural log units),
    ``rss`` the residual sum of squares of the corrected minima about the law.
    """

    a: Floats
    c: Floats
    inv_k: Floats
    scale: Floats
    rss: Floats


INV_K_GRID = np.linspace(1 / SHAPE_RANGE[1], 1 / SHAPE_RANGE[0], 15)


def _gammas(inv_k: Floats, r: int) -> Floats:
    """E[Γ_i^(1/k)] = Γ(i + 1/k) / Γ(i) for i = 1..r: (len(inv_k), r)."""
    i = np.arange(1, r + 1)[None, :]
    return np.asarray(np.exp(gammaln(i + inv_k[:, None]) - gammaln(i)))


def _levels(x: Floats, n: Floats, grid: Floats = INV_K_GRID
            ) -> tuple[Floats, Floats, Floats]:
    """Each study's level μ_j (the law at its batch size), the tail scale σ and 1/k.

    ``x`` (R, K, r) lowest log steps per study (NaN where missing), ``n`` (K,) trials per
    study. For each 1/k of ``grid``, the order statistics' expectations
    x_(i) = μ_j + σ · n_j^(-1/k) · Γ(i + 1/k) / Γ(i) are fitted by least squares (one μ
    per study, one σ ≥ 0 shared); the 1/k with the smallest residuals wins. μ_j is then
    the study's minimum less its bias σ Γ(1 + 1/k) n_j^(-1/k).
    """
    ok = np.isfinite(x)
    r = x.shape[-1]
    g = _gammas(grid, r)[None, :, None, :] * n[None, None, :, None] ** (
        -grid[None, :, None, None])  # (1, G, K, r)
    xs = np.where(ok, x, 0.0)[:, None]  # (R, 1, K, r)
    w = ok[:, None].astype(float)
    count = np.maximum(w.sum(axis=-1, keepdims=True), 1)
    gm = (g * w).sum(axis=-1, keepdims=True) / count
    xm = (xs * w).sum(axis=-1, keepdims=True) / count
    dg, dx = (g - gm) * w, (xs - xm) * w
    sxx = (dg * dg).sum(axis=(-1, -2))
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.where(sxx > 0, (dg * dx).sum(axis=(-1, -2)) / sxx, 0.0)
    c = np.maximum(c, 0.0)  # (R, G)
    resid = (dx - c[..., None, None] * dg) * w
    rss = (resid ** 2).sum(axis=(-1, -2))
    best = np.argmin(rss, axis=1)
    rows = np.arange(len(x))
    c_best = c[rows, best]
    # The minimum, not the fitted intercept, locates each study: near an endpoint the
    # minimum is by far the most precise order statistic; only its bias is subtracted.
    mu = x[..., 0] - c_best[:, None] * g[0, best, :, 0]  # (R, K)
    return mu, c_best, grid[best]


def estimate(log_b: Floats, x: Floats, n: Floats, grid: Floats = INV_K_GRID) -> Estimate:
    """Run the estimator on R data sets at once (see the module docstring).

    ``log_b`` (K,), ``x`` (R, K, r) each study's lowest log steps (NaN where missing),
    ``n`` (K,) trials loaded per study (the draws, qualifying or not), ``grid`` the tail
    shapes 1/k to choose from.
    """
    mu, scale, inv_k = _levels(x, n, grid)
    a, c = fit_law(log_b, mu)
    resid = mu - a[:, None] - np.log1p(np.exp(c[:, None] - log_b))
    return Estimate(a, c, inv_k, scale, (resid ** 2).sum(axis=1))


def _simulate(log_b: Floats, a: float, c: float, inv_k: float | Floats, scale: float, n: Floats,
              present: NDArray[np.bool_], rng: np.random.Generator, samples: int) -> Floats:
    """The lowest order statistics of studies drawn from the fitted law and tail: the
    i-th lowest excess of n trials is σ (Γ_i / Γ_(n+1))^(1/k) (uniform order statistics
    mapped through the power-law tail); ``inv_k`` one shape or one per simulation.

    Γ_(n+1) is Γ_r and the rest, a Gamma(n + 1 − r) draw, for a study of at least r
    trials, and the (n+1)-th of the same sums for a study of fewer (whose order statistics
    past its n are not present): the lowest of n trials exceeds the law by
    σ (Γ_1 / Γ_(n+1))^(1/k) whatever r the other studies make the tail model read."""
    k, r = present.shape
    gam = np.cumsum(rng.exponential(size=(samples, k, r)), axis=-1)
    rest = rng.gamma(np.maximum(n + 1 - r, 1e-9)[None, :], size=(samples, k))
    few = np.clip(n, 0, r - 1).astype(int)  # Γ_(n+1) among the sums drawn when n < r
    total = np.where(n[None, :] < r, np.take_along_axis(gam, few[None, :, None], axis=-1)[..., 0],
                     gam[..., -1] + rest)
    shape = np.asarray(inv_k, dtype=float).reshape(-1, 1, 1)
    excess = scale * (gam / total[..., None]) ** shape
    law = a + np.log1p(np.exp(c - log_b))
    out = law[None, :, None] + excess
    return np.where(present[None], out, np.nan)


@dataclass(frozen=True)
class CriticalIntervals:
    """Intervals of the law's S_min, B_crit and E_min, or the reason there is none.

    ``intervals[name]`` is (low, high) at ``level``; ``reasons[name]`` says why a quantity
    has no interval. ``s_min``, ``b_crit`` and ``e_min`` are the bias-corrected estimates
    the intervals are built around; ``bias`` the fraction by which the measured steps to
    result exceed the law at the median study (the finite-trial bias); ``shape`` the
    tail's k.
    """

    level: float
    samples: int
    seed: int
    s_min: float
    b_crit: float
    e_min: float
    bias: float
    shape: float
    intervals: dict[str, tuple[float, float]]
    reasons: dict[str, str]
    draws: dict[str, Floats] = field(repr=False, default_factory=dict)


QUANTITIES = ("s_min", "b_crit", "e_min")


def _lowest(hits: Mapping[int, ArrayLike]) -> tuple[Floats, Floats, Floats]:
    sizes = np.array(sorted(int(b) for b in hits), dtype=float)
    trials = float(np.median([len(np.asarray(h)) for h in hits.values()])) if hits else 0.0
    r = int(np.clip(math.ceil(trials / 8), *ORDER_STATISTICS))
    x = np.full((len(sizes), r), np.nan)
    n = np.zeros(len(sizes))
    for j, b in enumerate(sorted(int(b) for b in hits)):
        h = np.asarray(hits[b], dtype=float)
        n[j] = len(h)
        ok = np.sort(h[np.isfinite(h) & (h > 0)])
        low = np.log(ok[:r])
        x[j, :len(low)] = low
    return sizes, x, n


def _tied(x: Floats) -> bool:
    """Whether any study's lowest trials tie (steps quantized by the evaluations)."""
    gaps = np.diff(x, axis=-1)
    return bool(np.any(gaps[np.isfinite(gaps)] <= 0))


def _basic(point: float, draws: Floats, level: float, spread: float = 1.0,
           spreads: Floats | None = None) -> tuple[float, float]:
    """The pivotal interval: the error θ* − θ̂ of the simulated estimates, divided by each
    simulation's own noise scale when ``spreads`` are given (bootstrap-t), turned around
    the estimate and scaled by the data's ``spread``."""
    tail = (1 - level) / 2
    t = (draws - point) / (1.0 if spreads is None else spreads)
    lo, hi = np.quantile(t, [tail, 1 - tail])
    return float(point - hi * spread), float(point - lo * spread)


def _reflected(inv_k: float, draws: Floats, grid: Floats) -> Floats:
    """Shapes spread about the estimate as the simulated estimates spread about the truth
    (reflected about it), folded back into the grid at its ends: at an end the estimate
    piles up, and the truth can only lie inward."""
    lo, hi = grid[0], grid[-1]
    v = 2 * inv_k - draws
    v = np.where(v > hi, 2 * hi - v, v)
    v = np.where(v < lo, 2 * lo - v, v)
    return np.clip(v, lo, hi)


def _spread(est: Estimate, k: int) -> Floats:
    """The scatter of the corrected minima about the law (residual standard deviation)."""
    return np.sqrt(est.rss / max(k - 2, 1))


@dataclass(frozen=True)
class TunedEstimate:
    """The bias-corrected estimate of the law (the workload's tuned value), and whether the
    data allow it.

    ``reason`` is empty when the estimator's requirements are met (at least
    :data:`MIN_BATCH_SIZES` batch sizes reach the goal and :data:`MIN_SPACINGS` of them
    have 3 trials at the goal), else it says which is not. ``s_min``, ``b_crit`` and
    ``e_min`` are computed all the same, but without the requirements they are not an
    estimate to report (:func:`curvekit.scaling.critical_point` reports the plain fit
    then); ``bias`` the fraction by which the measured steps to result
    exceed the law at the median study; ``residuals`` the corrected minima less the law
    (natural logs), one per batch size of ``sizes``.
    """

    sizes: Floats
    lowest: Floats = field(repr=False)
    trials: Floats = field(repr=False)
    estimate: Estimate = field(repr=False)
    s_min: float
    b_crit: float
    e_min: float
    bias: float
    residuals: Floats = field(repr=False)
    reason: str

    @property
    def available(self) -> bool:
        """Whether the estimator's requirements are met (``reason`` empty)."""
        return not self.reason


def tuned_estimate(hits: Mapping[int, ArrayLike]) -> TunedEstimate:
    """The estimator (module docstring) run once on the data: the centre every interval of
    :func:`critical_intervals` is built around, and the point ``curvekit fit`` reports
    wherever its requirements are met.

    ``hits[b]`` as for :func:`critical_intervals`; batch sizes no trial reaches are left
    out, and fewer than 3 left is a :class:`FitError`. The estimate needs no simulation,
    so it costs one least-squares fit.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> b = 2.0 ** np.arange(4, 14)
    >>> law = 3000 * (1 + 600 / b)
    >>> hits = {int(x): s * np.exp(rng.uniform(0, 1, 30) ** 2 * 2) for x, s in zip(b, law)}
    >>> tuned = tuned_estimate(hits)
    >>> tuned.available, 400 < tuned.b_crit < 900
    (True, True)
    >>> short = {b: h[:2] for b, h in hits.items()}
    >>> tuned_estimate(short).reason  # doctest: +ELLIPSIS
    'only 0 batch sizes have 3 trials at the goal; ...'
    """
    kept = {int(b): h for b, h in hits.items()
            if np.any(np.isfinite(np.asarray(h, dtype=float)))}
    sizes, x, n = _lowest(kept)
    if len(sizes) < 3:
        raise FitError(f"a fit needs at least 3 batch sizes reaching the goal, got "
                       f"{len(sizes)}")
    log_b = np.log(sizes)
    point = estimate(log_b, x[None], n, INV_K_GRID)
    a, c = float(point.a[0]), float(point.c[0])
    inv_k, sigma = float(point.inv_k[0]), float(point.scale[0])
    bias = math.expm1(sigma * math.exp(float(gammaln(1 + inv_k)))
                      * float(np.median(n)) ** -inv_k)
    mu = x[:, 0] - sigma * np.exp(gammaln(1 + inv_k)) * n ** -inv_k
    residuals = mu - a - np.log1p(np.exp(c - log_b))
    full = int(np.isfinite(x[:, 2]).sum())  # studies with three trials at the goal
    reason = ""
    if len(sizes) < MIN_BATCH_SIZES:
        reason = (f"only {len(sizes)} batch sizes reach the goal; a calibrated interval "
                  f"needs at least {MIN_BATCH_SIZES}")
    elif full < MIN_SPACINGS:
        reason = (f"only {full} batch sizes have 3 trials at the goal; estimating the "
                  f"finite-trial bias needs at least {MIN_SPACINGS} (run more trials per "
                  "batch size)")
    s_min, b_crit = math.exp(a), math.exp(c)
    return TunedEstimate(sizes, x, n, point, s_min, b_crit, s_min * b_crit, bias, residuals,
                         reason)


def critical_intervals(hits: Mapping[int, ArrayLike], *, samples: int = 1000, seed: int = 0,
                       level: float = 0.95, searched: int | None = None
                       ) -> CriticalIntervals:
    """Intervals of S_min, B_crit and E_min from each study's trials (module docstring).

    ``hits[b]`` holds each loaded trial's first step at the goal at batch size b (``inf``
    or NaN when it never reaches it). Batch sizes no trial reaches are left out. A quantity
    gets no interval, and ``reasons`` says why, when the data cannot calibrate one: fewer
    than 4 batch sizes, fewer than 4 studies with 3 trials at the goal (the tail of the
    trial noise, and so the finite-trial bias, cannot be estimated), B_crit outside the
    measured batch sizes or within a factor 4 (:data:`MARGIN`) of the smallest or largest
    (the law extrapolates, or its bend is seen from one side), or residuals larger than the
    trial noise explains (the curve does not follow the law). S_min and E_min also get none with
    fewer than 6 batch sizes, fewer than 20 trials per batch size (median), tied best
    trials, more than 2 metaparameters ``searched`` (the count that varies across the
    trials, when given: :func:`curvekit.measure.searched_metaparameters`), or a tail shape
    k above 1.2 (see ``docs/fits.md``). Without ``searched`` only the tail's estimated
    shape speaks for the search, and a search over many metaparameters can look like a
    small one.

    >>> import numpy as np
    >>> hits = {int(b): np.full(2, 1000.0 * (1 + 64 / b)) for b in 2.0 ** np.arange(4, 10)}
    >>> critical_intervals(hits, samples=10).reasons["b_crit"]  # doctest: +ELLIPSIS
    'only 0 batch sizes have 3 trials at the goal; ...'
    """
    if not 0 < level < 1:
        raise FitError(f"level must be between 0 and 1, got {level}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise FitError(f"the number of simulations {samples!r} is not a positive whole "
                       "number; give one such as 1000")
    if searched is not None and (isinstance(searched, bool) or not isinstance(searched, int)
                                 or searched < 0):
        raise FitError(f"the number of metaparameters searched {searched!r} is not a whole "
                       "number from 0 up; give the count of metaparameters that vary across "
                       "the trials (curvekit.measure.searched_metaparameters), or None")
    tuned = tuned_estimate(hits)
    sizes, x, n, point = tuned.sizes, tuned.lowest, tuned.trials, tuned.estimate
    log_b = np.log(sizes)
    grid = INV_K_GRID
    a, c = float(point.a[0]), float(point.c[0])
    inv_k, sigma = float(point.inv_k[0]), float(point.scale[0])
    s_min, b_crit = tuned.s_min, tuned.b_crit
    reasons: dict[str, str] = {"all": tuned.reason} if tuned.reason else {}
    draws: dict[str, Floats] = {}
    intervals: dict[str, tuple[float, float]] = {}
    if "all" not in reasons:
        rng = np.random.default_rng(seed)
        sim = _simulate(log_b, a, c, inv_k, sigma, n, np.isfinite(x), rng, samples)
        star = estimate(log_b, sim, n, grid)
        # The tail's shape is uncertain too: simulate again with shapes spread as the
        # estimate spreads about the truth, reflected about the estimate (and folded back
        # into the shapes allowed where that crosses an end).
        shapes = _reflected(inv_k, star.inv_k, grid)
        sim = _simulate(log_b, a, c, shapes, sigma, n, np.isfinite(x), rng, samples)
        star = estimate(log_b, sim, n, grid)
        if point.rss[0] > np.quantile(star.rss, LACK_OF_FIT):
            reasons["all"] = ("the measured steps scatter about the law more than the trial "
                              "noise explains (the curve does not follow S_min (1 + B_crit "
                              "/ B)); no interval would be calibrated")
        else:
            pairs = {"s_min": (a, star.a), "b_crit": (c, star.c),
                     "e_min": (a + c, star.a + star.c)}
            here, there = float(_spread(point, len(sizes))[0]), _spread(star, len(sizes))
            for name, (p, d) in pairs.items():
                low, high = _basic(p, d, level, here, there)
                intervals[name] = (math.exp(low), math.exp(high))
                draws[name] = np.exp(d)
            if not sizes[0] <= b_crit <= sizes[-1]:
                reasons["all"] = (f"B_crit {b_crit:,.0f} lies outside the measured batch "
                                  f"sizes ({sizes[0]:,.0f}–{sizes[-1]:,.0f}): the law "
                                  "extrapolates and the data only bound it")
            elif not sizes[0] * MARGIN <= b_crit <= sizes[-1] / MARGIN:
                reasons["all"] = (
                    f"B_crit {b_crit:,.0f} lies within a factor {MARGIN:g} of the smallest or "
                    f"largest measured batch size ({sizes[0]:,.0f}, {sizes[-1]:,.0f}): the "
                    "bend of the law is seen from one side only, and intervals there are not "
                    f"calibrated; measure batch sizes from {b_crit / MARGIN:,.0f} to "
                    f"{b_crit * MARGIN:,.0f}")
            elif not sizes[INNER] <= b_crit <= sizes[-1 - INNER]:
                reasons["all"] = (f"B_crit {b_crit:,.0f} lies beyond the second smallest or "
                                  f"second largest measured batch size ({sizes[1]:,.0f}, "
                                  f"{sizes[-2]:,.0f}): one batch size on its far side cannot "
                                  "locate the bend of the law")
    trials = float(np.median(n))
    if "all" not in reasons and len(sizes) < MIN_BATCH_SIZES_S_MIN:
        reasons["s_min"] = reasons["e_min"] = (
            f"only {len(sizes)} batch sizes reach the goal: too few to estimate the "
            f"finite-trial bias of S_min; an interval of S_min needs at least "
            f"{MIN_BATCH_SIZES_S_MIN}")
    elif "all" not in reasons and searched is not None and searched > MAX_SEARCHED_S_MIN:
        reasons["s_min"] = reasons["e_min"] = (
            f"{searched} metaparameters vary across the trials: near the optimum the best of "
            f"n trials approaches it as n^(-2/{searched}), too slowly for the spacings of the "
            "best trials to bound its distance from the law's S_min (their tail looks like a "
            "smaller search's); an interval of S_min needs at most "
            f"{MAX_SEARCHED_S_MIN} metaparameters searched (tune the others once and hold "
            "them fixed)")
    elif "all" not in reasons and trials < MIN_TRIALS_S_MIN:
        reasons["s_min"] = reasons["e_min"] = (
            f"{trials:g} trials per batch size (median) locate the law's S_min too loosely: "
            f"the best of so few trials exceeds the optimum by an amount that cannot be "
            f"estimated well; an interval of S_min needs at least {MIN_TRIALS_S_MIN}")
    elif "all" not in reasons and _tied(x):
        reasons["s_min"] = reasons["e_min"] = (
            "some batch sizes have trials tied at their best steps (steps to result measured "
            "at evaluations spaced too far apart): the spacings of the best trials, which "
            "estimate the finite-trial bias of S_min, are lost; evaluate more often")
    elif "all" not in reasons and 1 / inv_k > MAX_SHAPE_S_MIN:
        reasons["s_min"] = reasons["e_min"] = (
            f"the trials' steps approach the optimum slowly (tail shape k = {1 / inv_k:.2f}"
            f" > {MAX_SHAPE_S_MIN}, as when many metaparameters are searched): the best "
            "trial's distance from the law's S_min cannot be bounded")
    for name in ("s_min", "e_min"):
        if name in reasons:
            intervals.pop(name, None)
    if "all" in reasons:
        why = reasons.pop("all")
        intervals = {}
        reasons = {q: why for q in QUANTITIES}
    return CriticalIntervals(level, samples, seed, s_min, b_crit, tuned.e_min,
                             tuned.bias, 1 / inv_k, intervals, reasons, draws)


def table_intervals(batch_sizes: Floats, steps: Floats, sd: Floats, *, samples: int = 1000,
                    seed: int = 0, level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Intervals from a table's per-row standard deviations of steps (a parametric
    bootstrap, normal in log steps with sd / steps), basic intervals in log space.

    >>> import numpy as np
    >>> b = 2.0 ** np.arange(4, 12)
    >>> s = 1000 * (1 + 200 / b)
    >>> low, high = table_intervals(b, s, 0.02 * s, samples=200)["b_crit"]
    >>> bool(low < 200 < high)
    True
    """
    log_b, y = np.log(batch_sizes), np.log(steps)
    rel = np.asarray(sd, dtype=float) / np.asarray(steps, dtype=float)
    a, c = fit_law(log_b, y[None])
    rng = np.random.default_rng(seed)
    law = a[0] + np.log1p(np.exp(c[0] - log_b))
    sim = law[None, :] + rng.standard_normal((samples, len(log_b))) * rel[None, :]
    a_star, c_star = fit_law(log_b, sim)
    out = {}
    for name, p, d in (("s_min", a[0], a_star), ("b_crit", c[0], c_star),
                       ("e_min", a[0] + c[0], a_star + c_star)):
        low, high = _basic(float(p), d, level)
        out[name] = (math.exp(low), math.exp(high))
    return out
