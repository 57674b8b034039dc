"""The gradient noise scale of McCandlish et al. (2018), estimated from two batch sizes.

Write ``G`` for the true gradient of the training loss and ``Σ`` for the covariance of one
example's gradient. The mean gradient ``G_B`` of a batch of ``B`` independent examples has
``E|G_B|² = |G|² + tr(Σ)/B``. Measuring ``|G_B|²`` at a small batch ``b`` and a big batch
``B`` gives two equations in the two unknowns; their solution (the paper's Appendix A) is a
pair of **unbiased** estimators::

    |G|²  ≈ (B·|G_B|² − b·|G_b|²) / (B − b)
    tr(Σ) ≈ (|G_b|² − |G_B|²) / (1/b − 1/B)

and the **simple noise scale** ``B_simple = tr(Σ) / |G|²`` predicts the critical batch size:
below it, doubling the batch roughly halves the steps needed; far above it, it saves
little. One pair of measurements is very noisy (``|G|²`` may even come out negative), so
McCandlish et al. average each estimator over many measurements *before* taking the ratio
— :func:`simple_noise_scale` does that for a sequence of measurements.

>>> norm_sq, trace = noise_scale_parts(small_norm_sq=3.0, big_norm_sq=1.2,
...                                    small_batch=10, big_batch=100)
>>> round(norm_sq, 6), round(trace, 6)
(1.0, 20.0)
>>> simple_noise_scale([1.0, 1.4], [20.0, 16.0])
15.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from curvekit.errors import RunError

__all__ = ["noise_scale_parts", "simple_noise_scale"]


def noise_scale_parts(small_norm_sq: float, big_norm_sq: float, small_batch: float,
                      big_batch: float) -> tuple[float, float]:
    """Unbiased estimates of ``(|G|², tr(Σ))`` from squared gradient norms at two batches.

    ``small_norm_sq`` is ``|G_b|²`` (or a mean of several such squared norms, each at batch
    size ``small_batch``); ``big_norm_sq`` is ``|G_B|²`` at ``big_batch``. Both estimates are
    unbiased when the examples are drawn independently; either may be negative for one
    measurement — average them over many before dividing.

    >>> noise_scale_parts(2.0, 2.0, 8, 64)  # no change with the batch: no noise
    (2.0, 0.0)
    """
    if not (0 < small_batch < big_batch):
        raise RunError(f"the noise scale needs 0 < small batch < big batch, got small "
                       f"{small_batch} and big {big_batch}; measure at two different "
                       "batch sizes")
    norm_sq = (big_batch * big_norm_sq - small_batch * small_norm_sq) / (big_batch
                                                                        - small_batch)
    trace = (small_norm_sq - big_norm_sq) / (1.0 / small_batch - 1.0 / big_batch)
    return norm_sq, trace


def simple_noise_scale(norm_sq: Sequence[float], trace: Sequence[float]) -> float:
    """``B_simple = mean(tr(Σ) estimates) / mean(|G|² estimates)``, NaN when undefined.

    Non-finite pairs (a diverged step) are left out. The ratio is NaN when nothing is left
    or the mean ``|G|²`` estimate is not positive: the gradient is lost in the noise and
    more measurements are needed.

    >>> simple_noise_scale([0.5, -0.5], [3.0, 3.0])
    nan
    """
    if len(norm_sq) != len(trace):
        raise RunError(f"got {len(norm_sq)} |G|² estimates but {len(trace)} tr(Σ) "
                       "estimates; pass one of each per measurement")
    pairs = [(g, t) for g, t in zip(norm_sq, trace, strict=True)
             if math.isfinite(g) and math.isfinite(t)]
    if not pairs:
        return math.nan
    mean_norm = math.fsum(g for g, _ in pairs) / len(pairs)
    mean_trace = math.fsum(t for _, t in pairs) / len(pairs)
    return mean_trace / mean_norm if mean_norm > 0 else math.nan
