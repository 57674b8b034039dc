"""Regime and critical-batch fits recover known parameters; bad curves get clear errors."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import curvekit
from curvekit.scaling import (
    NOT_REACHED,
    Bootstrap,
    FitError,
    WorkloadFit,
    beyond_measured,
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
       slope=st.floats(-0.8, -0.3), seed=st.integers(0, 10**6))
def test_recovers_three_regimes(end: float, width: int, slope: float, seed: int) -> None:
    """Both bends are found within 0.75 octave when each is identifiable.

    A bend's position is known to about noise / (change of slope) octaves: with noise of
    0.04 (log2) per point, a change of slope under 0.3 (e.g. -0.22 to 0 over three octaves)
    can move the fitted bend by most of an octave, so such slopes are left out here.
    """
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


@pytest.fixture(scope="module")
def one_workload(converted_home: Callable[..., Path]) -> str:
    return str(converted_home(["cifar_10/resnet_8/nesterov_momentum", "mnist/fc_64_64_64/sgd"],
                              max_trials=10, evals_scale=0.15, name="fit"))


def test_fit_workload_and_cli(one_workload: str) -> None:
    import json

    from click.testing import CliRunner

    from curvekit.cli import main
    from curvekit.scaling import fit_workload
    from curvekit.store.store import Store

    store = Store.open(one_workload)
    w = "cifar_10/resnet_8/nesterov_momentum"
    at = curvekit.Selection(w, "val/classification_error", 0.3)
    fit = fit_workload(store, at, bootstrap_samples=50, seed=1)
    curve = curvekit.steps_to_result(store, at)
    assert fit.batch_sizes.tolist() == curve["batch_size"].to_list()
    assert fit.steps.tolist() == curve["step"].to_list()
    row = fit.summary()
    # ten trials per batch size: the regimes get intervals, B_crit one or the reason why not
    assert row["max_useful_batch_size_low"] is not None or row["model"] == "perfect"
    assert (row["b_crit_low"] is None) == ("b_crit_interval_note" in row)
    again = fit_workload(store, at, bootstrap_samples=50, seed=1)
    assert again.summary() == row
    runner = CliRunner()
    out = runner.invoke(main, ["fit", w, "--metric", "val/classification_error", "--goal",
                               "0.3", "--bootstrap", "20", "--home", one_workload,
                               "--format", "json"])
    assert out.exit_code == 0, out.output
    (parsed,) = json.loads(out.stdout)  # warnings go to stderr
    assert parsed["workload"] == w and "b_crit_low" in parsed and "model" in parsed
    table = runner.invoke(main, ["fit", "--all", "--home", one_workload])
    assert table.exit_code == 0, table.output
    assert "mnist/fc_64_64_64/sgd" in table.output  # goal from the rule
    usage = runner.invoke(main, ["fit", w, "--home", one_workload])
    assert usage.exit_code == 2 and "--goal" in usage.output
    few = runner.invoke(main, ["fit", w, "--metric", "val/classification_error", "--goal",
                               "0.0001", "--home", one_workload])
    assert few.exit_code == 1 and "a fit needs at least 3" in few.output


def test_paper_goal_rule(one_workload: str) -> None:
    from curvekit.goals import paper_goal, round_significant
    from curvekit.store.store import Store

    store = Store.open(one_workload)
    fixed = paper_goal(store, "cifar_10/resnet_8/nesterov_momentum")
    assert (fixed.metric, fixed.goal, fixed.trials, fixed.source) == (
        "val/classification_error", 0.3, 100, "Fig 1")
    rule = paper_goal(store, "mnist/fc_64_64_64/sgd")
    best = curvekit.best(store, curvekit.Selection("mnist/fc_64_64_64/sgd",
                                                   "val/classification_error", trials=100))
    worst = max(best["val/classification_error"].to_list())
    assert rule.source == "rule" and rule.goal == round_significant(worst, up=True)
    assert worst < rule.goal < worst * 1.1 + 1e-12  # every batch size reaches it


@pytest.mark.parametrize(("value", "up", "expected"), [
    (0.0123, True, 0.013), (0.0123, False, 0.012), (0.3, True, 0.3), (3.914, True, 4.0),
    (1234.5, True, 1300.0), (0.31999, False, 0.31), (0.0100000001, True, 0.011)])
def test_round_significant(value: float, up: bool, expected: float) -> None:
    from curvekit.goals import round_significant

    assert round_significant(value, up=up) == expected


MEASURED = np.array([16, 64, 256, 1024, 4096, 16384, 55000.0])


def _beyond_fit(intervals: dict[str, tuple[float, float]] | None = None) -> WorkloadFit:
    """A curve in perfect scaling up to the largest batch size: B_crit lies far past it."""
    steps = 2.0 ** 24 / MEASURED
    boot = None if intervals is None else Bootstrap(20, 0, 0.95, intervals, {}, {})
    return WorkloadFit("w/m/o", "val/error", 0.3, False, MEASURED, steps,
                       fit_regimes(MEASURED, steps), fit_critical_batch(MEASURED, steps), boot)


def test_beyond_measured() -> None:
    assert beyond_measured(55000.0 * (1 + 1e-12), MEASURED) is None  # rounding at the end
    assert beyond_measured(55001.0, MEASURED) == "above"
    assert beyond_measured(15.9, MEASURED) == "below"
    assert beyond_measured(None, MEASURED) is None
    assert beyond_measured(math.inf, MEASURED) is None
    assert fit_critical_batch(MEASURED, np.full(len(MEASURED), 1000.0)).b_crit_beyond == "below"


def test_b_crit_past_the_measured_batch_sizes_is_flagged() -> None:
    row = _beyond_fit().summary()
    assert row["b_crit"] > 10 * 55000  # type: ignore[operator]
    assert (row["b_crit_beyond"], row["min_batch_size"], row["max_batch_size"]) == (
        "above", 16.0, 55000.0)
    assert row["perfect_scaling_end_beyond"] is None
    assert "the data only say B_crit > 55,000" in str(row["range_note"])
    assert "S_min and E_min are extrapolated" in str(row["range_note"])
    with_interval = _beyond_fit({"b_crit": (30000.0, 9e11), "max_useful_batch_size": (8, 64)}
                                ).summary()
    assert (with_interval["b_crit_low_beyond"], with_interval["b_crit_high_beyond"]) == (
        None, "above")
    assert with_interval["max_useful_batch_size_low_beyond"] == "below"


def test_cli_fit_shows_bounds_and_notes(one_workload: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from click.testing import CliRunner

    import curvekit.scaling
    from curvekit.cli import main

    fitted = _beyond_fit({"b_crit": (30000.0, 9e11)})
    monkeypatch.setattr(curvekit.scaling, "fit_workload", lambda *a, **k: fitted)
    args = ["fit", "w/m/o", "--metric", "val/error", "--goal", "0.3", "--home", one_workload]
    table = CliRunner().invoke(main, args)
    assert table.exit_code == 0, table.output
    assert "> 55,000 [30,000–> 55,000]" in table.stdout
    assert f"{fitted.critical.b_crit:,.0f}" not in table.stdout  # type: ignore[union-attr]
    assert table.stderr.startswith("Note: w/m/o: B_crit lies above the largest measured "
                                   "batch size (55,000)")
    data = CliRunner().invoke(main, [*args, "--format", "json"])
    (row,) = json.loads(data.stdout)
    assert (row["b_crit_beyond"], row["b_crit_high_beyond"], row["max_batch_size"]) == (
        "above", "above", 55000.0)
    assert row["range_note"] and data.stderr == ""


def test_report_cells_show_bounds() -> None:
    import polars as pl

    from curvekit.goals import Goal
    from curvekit.reporting.data import WorkloadPage
    from curvekit.reporting.site import _cell, _index

    row = _beyond_fit({"b_crit": (9e10, 9e11)}).summary()
    cell = _cell(row, "b_crit")
    assert cell.startswith("&gt; 55,000 <span class='note'>[&gt; 55,000]</span><sup title=")
    assert "B_crit &gt; 55,000" in cell  # the note, escaped, as the mark's title
    empty = pl.DataFrame()
    data = WorkloadPage("w/m/o", Goal("w/m/o", "val/error", 0.3, False, 100, "rule"), [0.3],
                        [16, 55000], {"COMPLETE": 3}, empty, empty, empty, empty, fit=row)
    index = _index([(data, "w/m/o", "")])
    assert "&gt; 55,000" in index and f"{row['b_crit']:,.0f}" not in index
    assert "<li>† w/m/o: B_crit lies above the largest measured batch size" in index


def test_s_min_gets_no_interval_when_the_store_shows_many_metaparameters_searched(
        tmp_path: Path) -> None:
    """The demo's trials search 3 metaparameters (learning rate and its decay): their best
    trials cannot bound S_min, whatever the tail of their steps looks like, and the fit says
    so; B_crit's interval does not depend on it."""
    from curvekit.intervals import critical_intervals
    from curvekit.measure import searched_metaparameters, trial_hits
    from curvekit.scaling import fit_workload
    from curvekit.store.store import Store

    curvekit.demo(tmp_path / "home")
    store = Store.open(tmp_path / "home")
    at = curvekit.Selection("demo/digits/fc_128_128_128/sgd", "val/classification_error", 0.1)
    assert searched_metaparameters(store, at) == 3
    row = fit_workload(store, at, bootstrap_samples=50, seed=1, explain=False).summary()
    assert row["s_min_low"] is None and row["e_min_low"] is None
    assert "3 metaparameters vary across the trials" in str(row["s_min_interval_note"])
    hits = {int(b): g["step"].cast(float).fill_null(np.inf).to_numpy()
            for (b,), g in trial_hits(store, at).group_by("batch_size")}
    unknown = critical_intervals(hits, samples=50, seed=1)
    assert (row["b_crit_low"], row["b_crit_high"]) == unknown.intervals.get(
        "b_crit", (None, None))
