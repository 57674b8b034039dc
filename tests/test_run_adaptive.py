"""Adaptive runs (``curvekit run --adaptive``): where the rounds put their trials, that they
stop at the budget or the target, resume after a crash mid-round without redoing a trial,
give the same rounds for the same seed, and leave ordinary studies in the store."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.errors import RunError
from curvekit.runner.adaptive import (
    ADAPTIVE_FILE,
    FIRST_GRID_MIN,
    Adaptive,
    Round,
    allocate,
    first_grid,
    fitted_round,
    round_rows,
    run_rounds,
    stop_reason,
    trial_cost,
)

INF = math.inf


# -- the rule, on generated studies -----------------------------------------------------------

def _study(draw: Any, sizes: list[int]) -> dict[int, list[float]]:
    out = {}
    for b in sizes:
        n = draw(st.integers(0, 8))
        out[b] = draw(st.lists(st.one_of(st.just(INF), st.integers(1, 5000).map(float)),
                               min_size=n, max_size=n))
    return out


@st.composite
def studies(draw: Any) -> tuple[dict[int, list[float]], dict[int, float], int, int]:
    sizes = sorted(draw(st.sets(st.sampled_from([2 ** k for k in range(12)]), min_size=1,
                                max_size=6)))
    hits = _study(draw, sizes)
    costs = {b: float(draw(st.integers(1, 10 ** 6))) for b in sizes}
    cap = draw(st.integers(1, 12))
    hits = {b: h[:cap] for b, h in hits.items()}
    return hits, costs, draw(st.integers(1, 30)), cap


@settings(max_examples=40, deadline=None)
@given(studies(), st.booleans(), st.one_of(st.none(), st.floats(0.5, 5000.0)))
def test_allocation_places_every_trial_it_can_within_the_cap(
        case: tuple[dict[int, list[float]], dict[int, float], int, int], interval: bool,
        b_crit: float | None) -> None:
    hits, costs, count, cap = case
    added, why = allocate(hits, costs, count, cap=cap, seed=1, interval=interval,
                          b_crit=b_crit)
    room = sum(cap - len(h) for h in hits.values())
    enabling = any("interval needs" in w for w in why.values())
    # a round that makes an interval possible holds only the trials expected to be needed
    assert sum(added.values()) == min(count, room) or (enabling and 0 < sum(added.values())
                                                       < min(count, room))
    assert all(k > 0 for k in added.values()) and set(why) == set(added)
    assert all(len(hits[b]) + k <= cap for b, k in added.items())
    assert (added, why) == allocate(hits, costs, count, cap=cap, seed=1, interval=interval,
                                    b_crit=b_crit)  # deterministic


def _at_goal(h: list[float]) -> int:
    return sum(1 for v in h if math.isfinite(v))


@settings(max_examples=60, deadline=None)
@given(studies(), st.one_of(st.none(), st.floats(0.5, 5000.0)))
def test_without_an_interval_the_trials_go_where_one_becomes_possible(
        case: tuple[dict[int, list[float]], dict[int, float], int, int],
        b_crit: float | None) -> None:
    # The calibrated interval needs 4 batch sizes reaching the goal and 4 with 3 trials at
    # it: a round without an interval serves the first count it lacks, where there is room.
    hits, costs, count, cap = case
    added, why = allocate(hits, costs, count, cap=cap, seed=1, interval=False, b_crit=b_crit)
    reached = [b for b, h in hits.items() if _at_goal(h)]
    full = [b for b, h in hits.items() if _at_goal(h) >= 3]
    if len(reached) < 3 or not added:
        return
    if len(reached) < 4:
        wanted = {b for b in hits if b not in reached and len(hits[b]) < cap}
        words = "a calibrated interval needs 4"
    elif len(full) < 4:
        wanted = {b for b in hits if _at_goal(hits[b]) < 3 and len(hits[b]) < cap}
        words = "have 3 trials at the goal, a calibrated interval needs 4"
        # at most as many batch sizes as the interval lacks, each short of 3
        assert len(added) <= 4 - len(full) and set(added) <= wanted
    else:
        return
    if wanted:
        assert set(added) & wanted
        assert all(words in w for w in why.values())


def test_short_batch_sizes_needing_the_fewest_trials_get_only_what_they_need() -> None:
    sizes = [2, 8, 32, 128, 512]
    exact = {b: 100 * (1 + 32 / b) for b in sizes}
    hits = {b: [exact[b]] * 2 + [INF] for b in sizes}
    hits[2] = [exact[2]] * 4  # one batch size with 3 trials at the goal
    hits[32] = [exact[32], INF, INF]  # 1 of 3: about 5 trials from its third
    even = {b: 1.0 for b in sizes}
    added, why = allocate(hits, even, 3, cap=50, interval=False, b_crit=32.0)
    # 3 more batch sizes are needed; 8, 128 and 512 (2 of 3 at the goal, 0.6 a trial by
    # (2 + 1) / (3 + 2)) expect their third in 1.7 trials, 32 in 5: one each
    assert added == {8: 1, 128: 1, 512: 1}
    # a larger round gives each the 2 trials it expects to need, and no more
    added, _ = allocate(hits, even, 10, cap=50, interval=False, b_crit=32.0)
    assert added == {8: 2, 128: 2, 512: 2}
    assert "1 batch sizes have 3 trials at the goal" in why[8]
    assert "2.0 octaves from B_crit" in why[8]
    # of two equally near their third, the one farther from B_crit is served
    hits[128] = [INF] * 3
    added, _ = allocate(hits, even, 10, cap=50, interval=False, b_crit=32.0)
    assert set(added) == {8, 512, 32}


def test_a_side_of_b_crit_without_two_batch_sizes_gets_trials_there() -> None:
    # B_crit 64 with only one batch size reaching the goal above it: the interval needs two
    law = {b: 100 * (1 + 64 / b) for b in (4, 8, 16, 32, 128)}
    hits = {b: [law[b]] * 4 for b in law} | {512: [INF] * 3, 2048: [INF] * 5, 2: [INF]}
    added, why = allocate(hits, {b: 1.0 for b in hits}, 5, cap=50, interval=False,
                          b_crit=64.0)
    assert set(added) == {512}
    assert "fewer than 2 batch sizes reaching the goal above it" in why[512]


def test_without_three_points_the_trials_go_where_no_trial_reached_the_goal() -> None:
    hits = {4: [300.0, INF], 16: [INF, INF], 64: [40.0], 256: [INF]}
    added, why = allocate(hits, {4: 1.0, 16: 1.0, 64: 1.0, 256: 1.0}, 3, cap=10)
    assert set(added) == {16, 256} and sum(added.values()) == 3
    assert "a fit needs 3" in why[16]


@pytest.mark.parametrize("b_crit", [32, 128])
def test_studies_measured_alike_send_the_trials_to_the_ends_of_the_curve(b_crit: int) -> None:
    # Studies of the law S = 100 (1 + B_crit / B) with the interval's trial noise (each
    # trial exceeds the law by exp(0.5 U²)), the same 16 draws at every batch size: no
    # batch size is measured worse than another, and B_crit is fixed by the two asymptotes,
    # so the trials go to the two smallest and two largest batch sizes, not to B_crit's
    # own. The forecast is a simulation, so this holds over draws, not for each: over 20
    # generated data sets, at least 80% of the trials (about 93% measured) go to the ends
    # and at most 10% (about 3%) to B_crit's batch size.
    import numpy as np

    sizes = [2, 8, 32, 128, 512, 2048]
    ends = at_b_crit = 0
    for seed in range(20):
        excess = np.exp(0.5 * np.random.default_rng(seed).uniform(0, 1, 16) ** 2)
        hits = {b: list(100 * (1 + b_crit / b) * excess) for b in sizes}
        added, why = allocate(hits, {b: 1.0 for b in sizes}, 4, cap=50, seed=seed)
        assert sum(added.values()) == 4
        assert all("the forecast interval of B_crit narrows" in w for w in why.values())
        ends += sum(k for b, k in added.items() if b in (2, 8, 512, 2048))
        at_b_crit += added.get(b_crit, 0)
    assert ends >= 0.8 * 80 and at_b_crit <= 0.1 * 80


def test_first_round_spans_the_batch_sizes_on_every_other_one() -> None:
    assert first_grid([2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1197]) == [
        2, 8, 32, 128, 512, 1197]
    assert first_grid([2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]) == [
        2, 8, 32, 128, 512, 1024]
    assert first_grid([16, 32, 64, 128, 256, 512]) == [16, 32, 64, 128, 256, 512]


@given(st.sets(st.integers(1, 10 ** 6), min_size=1, max_size=40))
def test_first_round_keeps_the_ends_and_no_gap_wider_than_two_steps(sizes: set[int]) -> None:
    ordered = sorted(sizes)
    grid = first_grid(ordered)
    assert grid[0] == ordered[0] and grid[-1] == ordered[-1]
    assert len(grid) >= min(len(ordered), FIRST_GRID_MIN)
    steps = [ordered.index(b) for b in grid]
    assert all(0 < b - a <= 2 for a, b in itertools.pairwise(steps))


def test_trial_cost_counts_training_and_evaluation_examples() -> None:
    assert trial_cost(5000, 2, 10, 1797) == 3 * 5000 * 2 + 501 * 1797
    assert trial_cost(25, 4, 10, 100) == 3 * 25 * 4 + 4 * 100  # 0, 10, 20 and the last step


def test_stop_reasons() -> None:
    settings_ = Adaptive("val/classification_error", 0.05, trial_budget=20, target_width=0.3)
    fitted = Round(2, {8: 2}, {8: ""}, {8: 4, 32: 4}, 20.0, 17.0, 22.0, 2, "", True)
    assert stop_reason(settings_, fitted, 8, True)[0] == "target"  # 5 / 20 = 0.25
    wide = Round(2, {8: 2}, {8: ""}, {8: 4, 32: 4}, 20.0, 10.0, 30.0, 2, "", True)
    assert stop_reason(settings_, wide, 8, True) == ("", "")
    assert stop_reason(settings_, wide, 20, True)[0] == "budget"
    unfit = Round(2, {8: 2}, {8: ""}, {8: 4, 32: 4}, fitted=True, note="no fit")
    assert stop_reason(settings_, unfit, 20, True)[0] == "budget"
    assert "0.3 not reached" in stop_reason(settings_, unfit, 20, True)[1]
    # a point without an interval never meets the target, and the stop gives the fit's reason
    bare = Round(2, {8: 2}, {8: ""}, {8: 4, 32: 4}, 20.0, None, None, 4,
                 "only 2 batch sizes have 3 trials at the goal", True)
    assert stop_reason(settings_, bare, 8, True) == ("", "")
    stopped, words = stop_reason(settings_, bare, 20, True)
    assert stopped == "budget" and "no interval wide" not in words
    assert "B_crit has no interval (only 2 batch sizes have 3 trials at the goal)" in words


class _Fit:
    def __init__(self, row: dict[str, Any]) -> None:
        self.row = row

    def summary(self) -> dict[str, Any]:
        return self.row


def test_a_round_without_an_interval_keeps_the_fits_reason() -> None:
    why = "only 3 batch sizes have 3 trials at the goal; estimating ... needs at least 4"
    row = {"b_crit": 20.0, "b_crit_low": None, "b_crit_high": None, "points": 5,
           "b_crit_interval_note": why}
    pending = Round(2, {8: 1}, {8: ""}, {8: 3, 32: 3})
    done = fitted_round(pending, {8: [10.0]}, lambda: _Fit(row))
    assert done.note == why and done.width is None and done.b_crit == 20.0


def _fake_run(tmp_path: Path, intervals: list[tuple[float, float] | None],
              target: float) -> Any:
    """run_rounds with a fit that gives round i the i-th interval (None: declined)."""
    sizes = [4, 16, 64, 256]
    settings_ = Adaptive("val/classification_error", 0.1, trial_budget=20, target_width=target,
                         round_trials=2)

    def fit_round(counts: dict[int, int], rounds: list[Round]
                  ) -> tuple[dict[int, list[float]], Round]:
        hits = {b: [100.0 * (1 + 16 / b)] * counts[b] for b in sizes}
        span = intervals[min(len(rounds), len(intervals)) - 1]
        row: dict[str, Any] = {"b_crit": 16.0, "points": 4, "b_crit_low": None,
                               "b_crit_high": None,
                               "b_crit_interval_note": "declined for the test"}
        if span is not None:
            row.update(b_crit_low=span[0], b_crit_high=span[1])
        return hits, fitted_round(rounds[-1], hits, lambda: _Fit(row))

    return run_rounds(tmp_path, settings_, batch_sizes=sizes, initial=2,
                      costs={b: 1.0 for b in sizes}, seed=0, train=lambda counts: None,
                      fit_round=fit_round, publish=lambda *args: None)


def test_the_target_stops_a_run_only_with_a_real_interval(tmp_path: Path) -> None:
    # rounds 1-2 get no interval (a huge target is still not met), round 3 one of width 0.5
    result = _fake_run(tmp_path / "a", [None, None, (12.0, 20.0)], target=1000.0)
    assert result.stopped == "target" and len(result.rounds) == 3
    assert [r.note for r in result.rounds[:2]] == ["declined for the test"] * 2
    assert "0.500 of B_crit wide, within the target 1000" in result.reason
    # never an interval: the budget stops it, naming the fit's reason
    result = _fake_run(tmp_path / "b", [None], target=1000.0)
    assert result.stopped == "budget" and result.last.trials == 20
    assert result.reason.endswith("B_crit has no interval (declined for the test), the target "
                                  "1000 not reached")


def test_settings_are_checked() -> None:
    with pytest.raises(RunError, match="target width"):
        Adaptive("val/classification_error", 0.05, 10, target_width=-1).check()
    with pytest.raises(RunError, match="goal"):
        Adaptive("val/classification_error", math.nan, 10).check()
    with pytest.raises(RunError, match="trial budget"):
        Adaptive("val/classification_error", 0.05, 0).check()


def test_round_rows_show_why_and_the_interval() -> None:
    rounds = [Round(1, {4: 2, 16: 2}, {4: "first", 16: "first"}, {4: 2, 16: 2}, fitted=True,
                    note="only 2 batch sizes reach the goal"),
              Round(2, {4: 1}, {4: "sensitivity +1.00"}, {4: 3, 16: 2}, 20.0, 15.0, 25.0, 3,
                    "", True)]
    rows = round_rows({"rounds": [r.to_json() for r in rounds]})
    assert [(r["round"], r["batch size"], r["trials added"]) for r in rows] == [
        (1, 4, 2), (1, 16, 2), (2, 4, 1)]
    assert rows[2]["B_crit [95% interval]"] == "20.0 [15.0–25.0]"
    assert rows[2]["relative width"] == "0.500" and rows[2]["why"] == "sensitivity +1.00"


# -- whole runs, tiny ---------------------------------------------------------------------------

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

import curvekit  # noqa: E402
from curvekit.cli import main  # noqa: E402

WORKLOAD = "tiny/fc_16/sgd"
TINY: dict[str, Any] = dict(dataset="digits", model="fc_16", optimizers=["sgd"],
                            batch_sizes=[4, 16, 64, 256], eval_every=10, device="cpu", seed=5,
                            steps={4: 150, 16: 100, 64: 60, 256: 40})
SETTINGS = Adaptive("val/classification_error", 0.4, trial_budget=14, round_trials=3,
                    bootstrap=50)


def _rounds(result: Any) -> list[dict[str, Any]]:
    return [r.to_json() for r in result.adaptive.rounds]


def _parts(work: Path) -> dict[str, int]:
    return {str(p.relative_to(work)): p.stat().st_mtime_ns
            for p in sorted(work.glob("parts/**/*.parquet"))}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    home = tmp_path_factory.mktemp("adaptive") / "home"
    return curvekit.run("tiny", **TINY, home=home, adaptive=SETTINGS), home


@pytest.mark.slow
def test_the_budget_is_respected_and_the_studies_are_ordinary_prefixes(
        reference: tuple[Any, Path]) -> None:
    result, home = reference
    last = result.adaptive.last
    assert result.adaptive.stopped == "budget" and "14 of 14" in result.adaptive.reason
    assert result.trials == last.trials == 14 == sum(last.totals.values())
    assert len(result.adaptive.rounds) >= 3  # 8 first, then rounds of 3 (3, 3)
    assert result.adaptive.rounds[0].totals == {4: 2, 16: 2, 64: 2, 256: 2}
    store = curvekit.open(home)
    trials = store.trials(WORKLOAD)
    for b, n in last.totals.items():
        ids = sorted(trials.filter(trials["batch_size"] == b)["trial_id"].to_list())
        assert ids == list(range(1, n + 1))  # a study is the sequence's first n trials
    # each trial is the trial of an ordinary sweep of that many trials: same metaparameters
    plain = curvekit.runner.plan.Sweep.create(
        "tiny", dataset="digits", model="fc_16", optimizers=["sgd"], batch_sizes=[4, 16, 64, 256],
        trials=max(last.totals.values()), steps=TINY["steps"], eval_every=10, seed=5)
    specs = {(s.batch_size, s.trial_id): s.parameters for s in plain.trial_specs()}
    for row in trials.iter_rows(named=True):
        assert row["learning_rate"] == pytest.approx(
            specs[(row["batch_size"], row["trial_id"])]["learning_rate"], rel=1e-12)
    # the record: in the work folder and in every study of the store
    record = json.loads((result.work_dir / ADAPTIVE_FILE).read_text())
    assert record["stopped"] == "budget" and len(record["rounds"]) == len(
        result.adaptive.rounds)
    extra = json.loads(store.studies(WORKLOAD)["extra"][0])["runner"]
    assert extra["adaptive"]["rounds"] == record["rounds"]
    # the last round's fit is the one `fit` gives
    fitted = curvekit.scaling.fit_workload(
        store, curvekit.Selection(WORKLOAD, "val/classification_error", 0.4),
        bootstrap_samples=50, seed=5, explain=False)
    if last.b_crit is not None:
        assert fitted.critical is not None
        assert last.b_crit == pytest.approx(fitted.critical.b_crit)


@pytest.mark.slow
def test_rounds_are_deterministic_per_seed(reference: tuple[Any, Path],
                                           tmp_path: Path) -> None:
    again = curvekit.run("tiny", **TINY, home=tmp_path / "home", adaptive=SETTINGS)
    assert _rounds(again) == _rounds(reference[0])


@pytest.mark.slow
def test_a_run_killed_mid_round_resumes_without_redoing_a_finished_trial(
        reference: tuple[Any, Path], tmp_path: Path) -> None:
    home = tmp_path / "home"
    first_round = sum(reference[0].adaptive.rounds[0].totals.values())
    calls = {"n": 0}

    def crash(stage: str, done: int, total: int | None) -> None:
        calls["n"] += 1
        if calls["n"] == first_round + 1:  # one trial into the second round
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        curvekit.run("tiny", **TINY, home=home, adaptive=SETTINGS, progress=crash)
    work = home / "runs" / "tiny" / "fc_16"
    record = json.loads((work / ADAPTIVE_FILE).read_text())
    assert len(record["rounds"]) == 2 and not record["rounds"][1]["fitted"]
    before = _parts(work)
    assert len(before) == first_round + 1
    result = curvekit.run("tiny", **TINY, home=home, adaptive=SETTINGS)
    after = _parts(work)
    assert {k: after[k] for k in before} == before  # no finished trial trained again
    assert result.ran == 14 - len(before) and result.resumed == len(before)
    assert _rounds(result) == _rounds(reference[0])
    # once finished, the same command trains nothing and gives the same rounds
    done = curvekit.run("tiny", **TINY, home=home, adaptive=SETTINGS)
    assert done.ran == 0 and _rounds(done) == _rounds(reference[0]) and _parts(work) == after
    # other settings on this folder are refused, naming them
    with pytest.raises(RunError, match="goal"):
        curvekit.run("tiny", **TINY, home=home,
                     adaptive=Adaptive("val/classification_error", 0.3, 14, round_trials=3,
                                       bootstrap=50))


@pytest.mark.slow
def test_cli_adaptive_without_an_interval_stops_at_the_budget_with_the_fits_reason(
        tmp_path: Path) -> None:
    # So few trials never give the calibrated interval (4 batch sizes with 3 trials at the
    # goal): even a huge target is not met, and the stop says why there is no interval.
    # The target stop with a real interval is tested on run_rounds above.
    home = str(tmp_path / "home")
    args = ["run", "tiny", "--model", "fc_16", "--optimizer", "sgd",
            "--batch-sizes", "4,16,64,256", "--steps", "4:150,16:100,64:60,256:40",
            "--eval-every", "10", "--seed", "5", "--device", "cpu", "--quiet", "--home", home,
            "--adaptive", "--metric", "val/classification_error", "--goal", "0.4",
            "--trial-budget", "20", "--target-width", "1000", "--round-trials", "3",
            "--bootstrap", "50"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "Stopped (budget): the trial budget is spent (20 of 20 trials); B_crit has no " \
           "interval (only " in result.stderr
    assert "the target 1000 not reached" in result.stderr
    assert "no interval wide" not in result.stderr
    assert "Rounds of the adaptive run:" in result.stderr
    assert "a calibrated interval needs 4" in result.stderr  # the rounds' rule says why
    assert int(result.stdout.split(" trials")[0]) == 20
    shown = CliRunner().invoke(main, ["fit", WORKLOAD, "--metric", "val/classification_error",
                                      "--goal", "0.4", "--home", home])
    assert shown.exit_code == 0, shown.output
    assert f"{WORKLOAD}: an adaptive run at val/classification_error < 0.4" in shown.stdout
    assert "first round: 2 trials at every batch size" in shown.stdout


def test_cli_adaptive_options_are_checked(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    runner = CliRunner()
    alone = runner.invoke(main, ["run", "x", "--metric", "val/classification_error",
                                 "--home", home])
    assert alone.exit_code == 2
    assert "--metric only applies to an adaptive run" in alone.output
    missing = runner.invoke(main, ["run", "x", "--adaptive", "--metric",
                                   "val/classification_error", "--home", home])
    assert missing.exit_code == 2 and "--adaptive needs --goal, --trial-budget" in missing.output
    two = runner.invoke(main, ["run", "x", "--optimizer", "sgd,adam", "--adaptive", "--metric",
                               "val/classification_error", "--goal", "0.1", "--trial-budget",
                               "10", "--home", home])
    assert two.exit_code == 1 and "give one optimizer" in two.output
    metric = runner.invoke(main, ["run", "x", "--optimizer", "sgd", "--adaptive", "--metric",
                                  "val/accuracy", "--goal", "0.1", "--trial-budget", "10",
                                  "--model", "fc_8", "--batch-sizes", "8,32", "--home", home])
    assert metric.exit_code == 1 and "'val/accuracy' is not a metric this run records" in (
        metric.output)
    assert not list((tmp_path / "home").glob("runs/x/*/parts/**/*.parquet"))


@pytest.mark.slow
def test_the_report_shows_the_rounds(reference: tuple[Any, Path], tmp_path: Path) -> None:
    from curvekit.reporting.site import report

    result, home = reference
    report(curvekit.open(home), tmp_path / "site", bootstrap=20, figures=False)
    page = next((tmp_path / "site" / "workloads").glob("*.html")).read_text()
    assert "<h2>Adaptive run</h2>" in page
    assert f"{len(result.adaptive.rounds)} rounds at val/classification_error &lt; 0.4" in page
    assert "first round: 2 trials at every batch size" in page


def test_an_adaptive_run_needs_the_store_and_the_tuned_protocol(tmp_path: Path) -> None:
    settings_ = Adaptive("val/classification_error", 0.1, trial_budget=10)
    with pytest.raises(RunError, match="drop --no-store"):
        curvekit.run("x", model="fc_8", optimizers=["sgd"], batch_sizes=[8, 32], store=False,
                     home=tmp_path / "home", device="cpu", adaptive=settings_)
    with pytest.raises(RunError, match="does not search: drop --adaptive or --protocol"):
        curvekit.run("x", model="fc_8", optimizers=["sgd"], batch_sizes=[8, 32],
                     protocol="linear-scaling", base_batch_size=8, base_learning_rate=0.1,
                     home=tmp_path / "home", device="cpu", adaptive=settings_)
    assert not (tmp_path / "home" / "runs").exists()  # refused before any folder is made
