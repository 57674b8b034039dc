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

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.cli import main
from curvekit.errors import CurvekitError
from curvekit.noise import noise_scale_parts, simple_noise_scale

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


# --- the runner records it ----------------------------------------------------------------

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from dataclasses import replace  # noqa: E402

from curvekit.runner.plan import Sweep, TrialSpec  # noqa: E402
from curvekit.runner.train import NOISE_METRICS, gradient_noise, run_trial  # noqa: E402
from curvekit.runner.workloads import build_model  # noqa: E402


def trial(**changes: object) -> TrialSpec:
    base = TrialSpec(base_dir="t", model="fc_32", optimizer="sgd", batch_size=64, trial_id=1,
                     dataset="digits", parameters={"learning_rate": 0.5}, steps=60,
                     eval_every=20, seed=3)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_recording_the_noise_scale_leaves_training_unchanged() -> None:
    plain, noisy = run_trial(trial()), run_trial(trial(noise_micro_batches=8))
    assert set(noisy.columns) == set(plain.columns) | set(NOISE_METRICS)
    assert {k: noisy.columns[k] for k in plain.columns} == plain.columns
    norm_sq, trace, ratio = (noisy.columns[m] for m in NOISE_METRICS)
    assert len(ratio) == len(plain.columns["step"]) == 4
    assert all(math.isfinite(v) for v in (*norm_sq, *trace, *ratio))
    assert trace[0] > 0 and norm_sq[0] > 0  # at initialisation the gradient is clear
    assert ratio == pytest.approx([t / g for g, t in zip(norm_sq, trace, strict=True)])


def test_micro_batch_gradients_give_the_batch_gradient_and_keep_buffers() -> None:
    torch.manual_seed(0)
    model = build_model("fc_16_bn", (1, 8, 8), 10)
    x, y = torch.randn(32, 1, 8, 8), torch.randint(0, 10, (32,))
    before = [b.clone() for b in model.buffers()]
    got = gradient_noise(model, x, y, micro_batches=4)
    assert all(torch.equal(a, b) for a, b in zip(before, model.buffers(), strict=True))
    assert all(p.grad is None for p in model.parameters())
    plain = build_model("fc_16", (1, 8, 8), 10)
    loss = torch.nn.functional.cross_entropy  # the parts against a direct computation
    params = list(plain.parameters())
    flat = [torch.cat([g.reshape(-1) for g in torch.autograd.grad(
        loss(plain(x[i:i + 8]), y[i:i + 8]), params)]) for i in range(0, 32, 8)]
    small_sq = float(sum(f.square().sum() for f in flat)) / 4
    whole = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss(plain(x), y), params)])
    want = noise_scale_parts(small_sq, float(whole.square().sum()), 8, 32)
    mine = gradient_noise(plain, x, y, micro_batches=4)
    assert (mine[NOISE_METRICS[0]], mine[NOISE_METRICS[1]]) == pytest.approx(want, rel=1e-4)
    assert math.isfinite(got[NOISE_METRICS[2]])


@pytest.mark.parametrize("count", [1, 65])
def test_a_micro_batch_count_that_cannot_work_is_refused(count: int) -> None:
    with pytest.raises(CurvekitError, match=f"noise micro-batches {count}.*smallest batch "
                                            r"size \(64\)"):
        Sweep.create("d", dataset="digits", model="fc_16", optimizers=["sgd"],
                     batch_sizes=[64, 128], trials=1, steps=10, eval_every=5,
                     noise_micro_batches=count)


def test_a_plan_without_the_noise_scale_is_written_as_before() -> None:
    sweep = Sweep.create("d", dataset="digits", model="fc_16", optimizers=["sgd"],
                         batch_sizes=[64], trials=1, steps=10, eval_every=5)
    assert "noise_micro_batches" not in sweep.to_json()
    noisy = replace(sweep, noise_micro_batches=4)
    assert Sweep.from_json(noisy.to_json()) == noisy
    assert noisy.trial_specs()[0].noise_micro_batches == 4


def test_cli_run_records_the_noise_scale_and_fit_predicts_b_crit(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    space = tmp_path / "space.json"
    space.write_text(json.dumps({"learning_rate": {"type": "DISCRETE", "feasible_points": [0.5],
                                                   "scale": ""}}))
    argv = ["run", "noisy", "--model", "fc-16", "--optimizer", "sgd", "--batch-sizes",
            "8,32,128", "--trials", "2", "--steps", "40", "--eval-every", "5", "--device", "cpu",
            "--space", str(space), "--noise-micro-batches", "4", "--home", home, "--quiet"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    query = ("select batch_size, trial_id, step, "
             "first(value) filter (where metric = 'train/classification_error') as e, "
             "first(value) filter (where metric = 'train/gradient_norm_squared') as g, "
             "first(value) filter (where metric = 'train/gradient_noise_trace') as t "
             "from measurements where base_dir = 'noisy' group by 1, 2, 3 order by 1, 2, 3")
    got = CliRunner().invoke(main, ["query", query, "--home", home, "--format", "json"])
    rows = json.loads(got.output)
    assert len(rows) == 3 * 2 * 9 and all(math.isfinite(r["g"]) for r in rows)
    # The prediction, read off the definition: per trial reaching e < 0.5, mean t / mean g
    # over its evaluations up to the first that does; then the median over those trials.
    per_trial = []
    for key in sorted({(r["batch_size"], r["trial_id"]) for r in rows}):
        curve = [r for r in rows if (r["batch_size"], r["trial_id"]) == key]
        hit = next((r["step"] for r in curve if r["e"] < 0.5), None)
        if hit is not None:
            window = [r for r in curve if r["step"] <= hit]
            per_trial.append(float(np.mean([r["t"] for r in window]))
                             / float(np.mean([r["g"] for r in window])))
    fit = CliRunner().invoke(main, ["fit", "noisy/fc_16/sgd", "--metric",
                                    "train/classification_error", "--goal", "0.5",
                                    "--home", home, "--format", "json"])
    assert fit.exit_code == 0, fit.output
    row = json.loads(fit.output)[0]
    assert row["b_simple_trials"] == len(per_trial) >= 3
    assert row["b_simple"] == pytest.approx(float(np.median(per_trial)))
    assert row["b_simple_low"] <= row["b_simple"] <= row["b_simple_high"]
    table = CliRunner().invoke(main, ["fit", "noisy/fc_16/sgd", "--metric",
                                      "train/classification_error", "--goal", "0.5",
                                      "--home", home])
    assert "B_simple (predicted B_crit)" in table.output
    assert f"{row['b_simple']:,.0f} [{row['b_simple_low']:,.0f}–" in table.output
    bad = CliRunner().invoke(main, [*argv[:-5], "--noise-micro-batches", "9", "--home", home])
    assert bad.exit_code == 1
    assert bad.output.startswith("Error: noise micro-batches 9: the noise scale compares")
