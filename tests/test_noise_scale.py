"""The gradient noise scale: unbiased estimators, a closed-form check, the runner's column.

The closed-form problem is linear regression with Gaussian inputs and noise: examples
``x ~ N(0, I_d)``, targets ``y = x·w* + ε`` with ``ε ~ N(0, σ²)``, loss ``½(x·w − y)²``. At
weights ``w`` with ``Δ = w − w*`` one example's gradient is ``g = x(x·Δ − ε)``, so

* the true gradient is ``G = E[x xᵀ]Δ = Δ``;
* ``E[g gᵀ] = E[x xᵀ (x·Δ)²] + σ² I = |Δ|² I + 2ΔΔᵀ + σ² I`` (Isserlis' theorem), hence
  ``Σ = E[g gᵀ] − G Gᵀ = (|Δ|² + σ²) I + ΔΔᵀ`` and ``tr(Σ) = d(|Δ|² + σ²) + |Δ|²``;
* ``B_simple = tr(Σ) / |G|² = d(1 + σ²/|Δ|²) + 1``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.errors import CurvekitError
from curvekit.runner.noise import noise_scale_parts, simple_noise_scale

D, SIGMA = 5, 0.5
DELTA = np.array([0.6, -0.8, 0.0, 0.0, 0.0])  # |Δ| = 1
TRUE_NORM_SQ = float(DELTA @ DELTA)
TRUE_TRACE = D * (TRUE_NORM_SQ + SIGMA**2) + TRUE_NORM_SQ
TRUE_B_SIMPLE = TRUE_TRACE / TRUE_NORM_SQ  # 7.25


def measurements(draws: int, small: int, big: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per draw, the estimates of |G|² and tr(Σ) from one big batch and its micro-batches.

    As in the runner: the big batch is ``big // small`` micro-batches of ``small`` examples;
    the small-batch squared norm is the mean over its micro-batches.
    """
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((draws, big, D))
    eps = SIGMA * rng.standard_normal((draws, big))
    grads = x * (x @ DELTA - eps)[..., None]  # (draws, big, D): one gradient per example
    micro = grads.reshape(draws, big // small, small, D).mean(axis=2)
    small_sq = (micro**2).sum(axis=-1).mean(axis=-1)
    big_sq = (grads.mean(axis=1) ** 2).sum(axis=-1)
    norm_sq, trace = noise_scale_parts(small_sq, big_sq, small, big)  # elementwise on arrays
    return np.asarray(norm_sq), np.asarray(trace)


def test_closed_form_of_the_per_example_covariance() -> None:
    # Check the derivation itself on a million examples before trusting it below.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1_000_000, D))
    g = x * (x @ DELTA - SIGMA * rng.standard_normal(1_000_000))[:, None]
    assert np.allclose(g.mean(axis=0), DELTA, atol=0.01)
    assert float(np.trace(np.cov(g.T))) == pytest.approx(TRUE_TRACE, rel=0.01)


@pytest.mark.parametrize(("small", "big"), [(1, 8), (4, 64), (16, 32)])
def test_both_estimators_are_unbiased(small: int, big: int) -> None:
    norm_sq, trace = measurements(20_000, small, big, seed=small * big)
    for estimates, truth in ((norm_sq, TRUE_NORM_SQ), (trace, TRUE_TRACE)):
        standard_error = estimates.std(ddof=1) / math.sqrt(len(estimates))
        assert abs(estimates.mean() - truth) < 4 * standard_error


def test_noise_scale_from_many_batches_is_within_five_percent() -> None:
    norm_sq, trace = measurements(20_000, 4, 64, seed=1)
    estimate = simple_noise_scale(list(norm_sq), list(trace))
    assert estimate == pytest.approx(TRUE_B_SIMPLE, rel=0.05)


@settings(max_examples=50, deadline=None)
@given(norm_sq=st.floats(0.0, 1e3), trace=st.floats(0.0, 1e4), small=st.integers(1, 500),
       extra=st.integers(1, 5000))
def test_expected_norms_give_back_the_parts(norm_sq: float, trace: float, small: int,
                                            extra: int) -> None:
    big = small + extra
    got = noise_scale_parts(norm_sq + trace / small, norm_sq + trace / big, small, big)
    assert got[0] == pytest.approx(norm_sq, rel=1e-6, abs=1e-6 * (1 + trace))
    assert got[1] == pytest.approx(trace, rel=1e-6, abs=1e-6 * (1 + norm_sq) * big)


def test_equal_batches_are_refused() -> None:
    with pytest.raises(CurvekitError, match="small 8 and big 8"):
        noise_scale_parts(1.0, 1.0, 8, 8)


def test_ratio_is_nan_without_a_positive_gradient_estimate() -> None:
    assert math.isnan(simple_noise_scale([], []))
    assert math.isnan(simple_noise_scale([-1.0], [3.0]))
    assert simple_noise_scale([math.nan, 2.0], [1.0, 4.0]) == 2.0
    with pytest.raises(CurvekitError, match="2 tr"):
        simple_noise_scale([1.0], [1.0, 2.0])
