"""Regime and critical-batch fits recover known parameters; bad curves get clear errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.fit import (
    NOT_REACHED,
    FitError,
    bootstrap,
    fit_critical_batch,
    fit_regimes,
)

B = 2.0 ** np.arange(0, 16)


def three_regimes(b: np.ndarray, end: float, plateau: float, slope: float,
                  top: float = 22.0) -> np.ndarray:
    x = np.log2(b)
    e, p = math.log2(end), math.log2(plateau)
    return 2.0 ** (top - np.minimum(x, e) + slope * (np.clip(x, e, p) - e))


@settings(max_examples=30, deadline=None)
@given(end=st.sampled_from([8.0, 16.0, 32.0, 64.0]), width=st.integers(3, 6),
       slope=st.floats(-0.8, -0.2), seed=st.integers(0, 10**6))
def test_recovers_three_regimes(end: float, width: int, slope: float, seed: int) -> None:
    plateau = end * 2.0**width
    noise = np.random.default_rng(seed).normal(0, 0.04, len(B))
    fit = fit_regimes(B, three_regimes(B, end, plateau, slope) * 2.0**noise)
    assert fit.model == "perfect+diminishing+plateau"
    assert fit.perfect_scaling_end is not None and fit.max_useful_batch_size is not None
    assert abs(math.log2(fit.perfect_scaling_end / end)) < 0.75
    assert abs(math.log2(fit.max_useful_batch_size / plateau)) < 0.75
    assert fit.diminishing_slope == pytest.approx(slope, abs=0.12)
    assert fit.note == ""
    assert np.allclose(np.log2(fit.predict(B)), np.log2(three_regimes(B, end, plateau, slope)),
                       atol=0.3)


@pytest.mark.parametrize(("steps", "model"), [
    (2.0**20 / B, "perfect"),
    (np.full(len(B), 5000.0), "plateau"),
    (np.where(B <= 128, 2.0**20 / B, 2.0**13), "perfect+plateau"),
    (2.0**20 / B**0.5, "diminishing"),
])
def test_picks_the_right_model(steps: np.ndarray, model: str) -> None:
    noisy = steps * 2.0 ** np.random.default_rng(3).normal(0, 0.02, len(B))
    fit = fit_regimes(B, noisy)
    assert fit.model == model
    if "plateau" not in model:
        assert fit.max_useful_batch_size is None and fit.note == NOT_REACHED
    if model == "perfect+plateau":
        assert fit.max_useful_batch_size == pytest.approx(128, rel=0.3)
        assert fit.perfect_scaling_end == fit.max_useful_batch_size


@pytest.mark.parametrize(("b", "s", "message"), [
    ([1, 2], [4, 2], "at least 3"),
    ([1, 2, 4], [4, 0, 1], "positive"),
    ([1, -2, 4], [4, 2, 1], "positive"),
    ([1, 4, 2], [4, 2, 1], "strictly increasing"),
    ([1, 2, 4], [4, math.nan, 1], "finite"),
    ([1, 2, 4], [4, 2], "same length"),
])
def test_bad_curves(b: list[float], s: list[float], message: str) -> None:
    with pytest.raises(FitError, match=message):
        fit_regimes(b, s)
    with pytest.raises(FitError, match=message):
        fit_critical_batch(b, s)


@pytest.mark.parametrize("b_crit", [8.0, 256.0, 4096.0])
def test_critical_batch_size(b_crit: float) -> None:
    noise = 2.0 ** np.random.default_rng(int(b_crit)).normal(0, 0.05, len(B))
    fit = fit_critical_batch(B, 3000 * (1 + b_crit / B) * noise)
    assert fit.b_crit == pytest.approx(b_crit, rel=0.2)
    assert fit.s_min == pytest.approx(3000, rel=0.1)
    assert fit.e_min == pytest.approx(fit.s_min * fit.b_crit)


def _hits(rng: np.random.Generator, trials: int = 40) -> dict[int, np.ndarray]:
    """Each trial needs the ideal steps times a random slowdown; min over trials ~ ideal."""
    ideal = np.where(B <= 64, 2.0**20 / B, 2.0**14)
    return {int(b): s * (1 + rng.exponential(0.3, trials)) for b, s in zip(B, ideal,
                                                                            strict=True)}


def test_bootstrap_is_seeded_and_covers_the_truth() -> None:
    first = bootstrap(_hits(np.random.default_rng(0)), n=60, seed=7, model="perfect+plateau",
                      critical=False)
    again = bootstrap(_hits(np.random.default_rng(0)), n=60, seed=7, model="perfect+plateau",
                      critical=False)
    assert first.intervals == again.intervals
    covered = 0
    for rep in range(8):
        result = bootstrap(_hits(np.random.default_rng(100 + rep)), n=60, seed=rep,
                           model="perfect+plateau", critical=False)
        low, high = result.intervals["max_useful_batch_size"]
        covered += low <= 64 <= high
        assert result.defined["max_useful_batch_size"] == 60
    assert covered >= 6


def test_bootstrap_drops_batch_sizes_nobody_reaches() -> None:
    hits = _hits(np.random.default_rng(1))
    hits[int(B[-1])] = np.full(40, np.inf)  # never reaches the goal
    result = bootstrap(hits, n=20, seed=0, critical=True)
    assert set(result.intervals) >= {"b_crit", "s_min", "e_min", "max_useful_batch_size"}
    with pytest.raises(FitError, match="level"):
        bootstrap(hits, level=1.5)
