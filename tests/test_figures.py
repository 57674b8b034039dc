"""The paper's figures drawn so far: specs faithful to the figure spec, real PNGs."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import altair as alt
import pytest
from click.testing import CliRunner

from curvekit.cli import main
from curvekit.figures.paper import FIGURE1_PANELS, FIGURES

# Every workload of the figures but 3-6 and 23 (the gallery test needs some missing).
WORKLOADS = [p[1] for p in FIGURE1_PANELS] + [
    f"lm1b/transformer_{s}/nesterov_momentum" for s in ("wide", "shallow", "narrow_and_shallow")
] + [f"solution_quality/{d}/simple_cnn_base/nesterov_momentum" for d in ("mnist", "fashion_mnist")
     ] + [f"mnist/fc_{s}/sgd" for s in ("1024", "1024_1024", "1024_1024_1024", "64_64_64",
                                        "128_128_128", "256_256_256", "512_512_512",
                                        "2048_2048_2048")]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from curvekit.release.convert import convert
    from curvekit.release.synthetic import generate_archive

    tmp = tmp_path_factory.mktemp("figures")
    manifest = generate_archive(tmp / "a.tar.bz2", workloads=WORKLOADS,
                                max_trials_per_study=12, evals_scale=0.1, jobs=1)
    convert(tmp / "a.tar.bz2", tmp / "home", manifest=manifest)
    return tmp / "home"


def _spec(home: Path, tmp_path: Path, number: int) -> dict:  # type: ignore[type-arg]
    out = tmp_path / f"f{number}.json"
    result = CliRunner().invoke(main, ["figure", str(number), "--home", str(home), "--out",
                                       str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    spec = json.loads(out.read_text())
    alt.VConcatChart.from_dict(spec)  # valid Vega-Lite (raises otherwise)
    return spec  # type: ignore[no-any-return]


def _panels(spec: dict) -> list[dict]:  # type: ignore[type-arg]
    return [panel for row in spec["vconcat"] for panel in row["hconcat"]]


def test_figure1(home: Path, tmp_path: Path) -> None:
    spec = _spec(home, tmp_path, 1)
    panels = _panels(spec)
    assert [p["title"] for p in panels] == [p[0] for p in FIGURE1_PANELS]
    for panel in panels:
        curve, scaling = panel["layer"]
        assert curve["encoding"]["x"]["scale"] == {"type": "log", "base": 2}
        assert curve["encoding"]["y"]["axis"]["title"] == "Steps"
        assert scaling["mark"]["strokeDash"] == [5, 4]
    assert panels[8]["layer"][0]["encoding"]["y"]["scale"]["domain"] == [2**13, 2**21]
    assert "domain" not in panels[0]["layer"][0]["encoding"]["y"]["scale"]
    meta = spec["usermeta"]["curvekit"]
    assert meta["figure"] == 1 and len(meta["workloads"]) == 9
    assert [c["trials"] for c in meta["curves"]] == [p[5] for p in FIGURE1_PANELS]


def test_figure2_labels_and_no_scaling_lines(home: Path, tmp_path: Path) -> None:
    panels = _panels(_spec(home, tmp_path, 2))
    assert len(panels) == 3 and all(len(p["layer"]) == 1 for p in panels)
    labels = FIGURES[2].panels[1].curves
    assert [c.label for c in labels][-1] == "goal error = 4.05"
    assert FIGURES[2].panels[0].curves[1].label == "goal error = 0.01"


def test_figure8_heuristics_and_fashion_goal(home: Path, tmp_path: Path) -> None:
    panels = _panels(_spec(home, tmp_path, 8))
    for panel in panels:
        assert panel["layer"][0]["encoding"]["y"]["axis"]["title"] == (
            "Learning Rate / (1 - Momentum)")
        domain = panel["layer"][0]["encoding"]["color"]["scale"]["domain"]
        assert domain[-2:] == ["Linear Heuristic", "Square Root Heuristic"]
    assert FIGURES[8].panels[1].curves[0].goal == 0.3


def test_figure24_png(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "f24.png"
    result = CliRunner().invoke(main, ["figure", "24", "--home", str(home), "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert 640 < width < 1000 and 560 < height < 900  # 648×567 at 72 dpi, plus titles
    assert json.loads((out.parent / "f24.png.json").read_text())["figure"] == 24


def test_missing_workloads_and_unknown_figures(home: Path, tmp_path: Path) -> None:
    from curvekit.release.convert import convert
    from curvekit.release.synthetic import tiny_archive

    other = tmp_path / "other"
    convert(tmp_path / "t.tar.bz2", other, manifest=tiny_archive(tmp_path / "t.tar.bz2"))
    missing = CliRunner().invoke(main, ["figure", "1", "--home", str(other)])
    assert missing.exit_code == 1
    assert "mnist/simple_cnn_base/nesterov_momentum" in missing.output
    assert "curvekit fetch" in missing.output
    unknown = CliRunner().invoke(main, ["figure", "99", "--home", str(home)])
    assert unknown.exit_code == 1
    assert "there is no figure 99; the paper's figures are 1–24" in unknown.output


def test_figures_gallery_lists_missing_workloads(home: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["figures", "--out", str(tmp_path / "g"), "--home",
                                       str(home), "--format", "json"])
    assert result.exit_code == 0, result.output
    index = (tmp_path / "g" / "index.html").read_text()
    for number in sorted(set(range(1, 25)) - {3, 4, 5, 6, 23}):
        assert (tmp_path / "g" / f"figure-{number:02d}.json").is_file()
        assert f'href="figure-{number:02d}.json"' in index
    assert "figure 3 needs workloads missing from the store" in index


@pytest.mark.parametrize("number", [12, 18, 19])
def test_new_chart_kinds_render_to_svg(home: Path, tmp_path: Path, number: int) -> None:
    out = tmp_path / f"f{number}.svg"
    result = CliRunner().invoke(main, ["figure", str(number), "--home", str(home), "--out",
                                       str(out), "--format", "svg"])
    assert result.exit_code == 0, result.output
    svg = out.read_text()
    assert svg.startswith("<svg") and svg.count("<path") > 20


@pytest.mark.parametrize("number", [3, 4, 5, 6])
def test_normalized_and_comparison_specs(number: int) -> None:
    fig = FIGURES[number]
    for panel in fig.panels:
        labels = [c.label for c in panel.curves]
        assert panel.scaling_label in labels
        if number in (3, 5, 6):
            assert panel.normalize_at is not None
    assert FIGURES[3].size_px == (648, 850)
    assert [p.normalize_at for p in FIGURES[3].panels] == [1, 64, 16, 2, 2, 16]
    assert [p.normalize_at for p in FIGURES[5].panels] == [2, 128, 32]
    assert [c.trials for c in FIGURES[4].panels[1].curves] == [50, 100, 100]


def test_figure23_every_workload_at_its_paper_goal(home: Path) -> None:
    from curvekit.figures.render import _resolve
    from curvekit.store.store import Store

    fig = FIGURES[23]
    assert len(fig.panels) == 35 and fig.size_px == (1080, 1323)
    assert fig.panels[16].curves[0].workload == "mnist/fc_1024_1024/sgd"  # §5 order
    panel = _resolve(Store.open(home), fig.panels[0])
    assert panel.title == "cifar_10/resnet_8/nesterov_momentum, goal 0.3"
    assert panel.curves[0].goal == 0.3 and panel.curves[0].trials == 100


def _layers(panel: dict) -> list[dict]:  # type: ignore[type-arg]
    return panel["layer"]  # type: ignore[no-any-return]


def test_figure7_label_smoothing_groups_partition_the_trials(home: Path,
                                                             tmp_path: Path) -> None:
    from curvekit.store.store import Store

    panels = _panels(_spec(home, tmp_path, 7))
    assert [p["title"] for p in panels] == ["Best Validation Error Per Batch Size",
                                            "Steps to Reach 0.25 Validation Error"]
    best, steps = panels
    assert best["layer"][0]["encoding"]["y"]["title"] == "Validation Error"
    assert best["layer"][0]["encoding"]["color"]["legend"]["orient"] == "top-left"
    assert len(steps["layer"]) == 2  # curves and the perfect-scaling line of "= 0.10"
    labels = [c.label for c in FIGURES[7].panels[1].curves]
    assert labels == [f"Label Smoothing = {v}" for v in ("0.00", "0.01", "0.10")]
    # the three groups split the first 100 trials: together they give the ungrouped curve
    store = Store.open(home)
    w, cls = "imagenet/resnet_50/nesterov_momentum", "val/classification_error"
    whole = store.steps_to_result(w, cls, 0.25, trials=100)
    parts = [store.steps_to_result(w, cls, 0.25, trials=100, subset=("label_smoothing", v))
             for v in (0.0, 0.01, 0.1)]
    for bs, step in whole.select("batch_size", "step").iter_rows():
        assert step == min(p.filter(p["batch_size"] == bs)["step"].min() or 10**12
                           for p in parts)


@pytest.mark.parametrize("number", [9, 10, 11, 19, 20])
def test_scatter_figures(home: Path, tmp_path: Path, number: int) -> None:
    spec = _spec(home, tmp_path, number)
    panels = _panels(spec)
    fig = FIGURES[number]
    assert len(panels) == len(fig.panels) == fig.rows * fig.cols
    limits = set()
    for panel, declared in zip(panels, fig.panels, strict=True):
        contours, points, star = _layers(panel)
        assert points["encoding"]["x"]["title"] == "Learning Rate"  # not "Batch Size"
        assert points["encoding"]["y"]["title"] == "1 - Momentum"
        assert points["encoding"]["x"]["scale"]["type"] == "log"
        assert points["encoding"]["shape"]["scale"]["domain"] == [
            "Goal Achieved", "Goal Not Achieved", "Infeasible"]
        assert contours["mark"]["color"] == "black"
        levels = {row["level"] for row in spec["datasets"][contours["data"]["name"]]}
        assert len(levels) == 10
        assert len(spec["datasets"][star["data"]["name"]]) <= 1
        assert panel["title"] == declared.title
        limits.add((tuple(points["encoding"]["x"]["scale"]["domain"]),
                    tuple(points["encoding"]["y"]["scale"]["domain"])))
    assert len(limits) == 1  # every panel has the same limits
    meta = spec["usermeta"]["curvekit"]["curves"]
    if number == 9:
        assert fig.panels[0].title == "Batch Size 128"
        assert {c["example_budget"] for c in meta} == {30_301_028}
        (xlim, ylim), = limits
        assert xlim == pytest.approx((10**-4.5, 10**-0.5)) and ylim == pytest.approx((1e-6, 10))
    if number == 10:
        assert {c["step_budget"] for c in meta} == {25_000}
    if number == 11:
        assert {c["batch_size"] for c in meta} == {1024} and {c["goal"] for c in meta} == {4.2}
    if number in (19, 20):  # half-decade limits over the plotted trials of all panels
        (xlim, _), = limits
        for lo, hi in (xlim,):
            assert round(2 * math.log10(lo), 9) % 1 == 0 and round(2 * math.log10(hi), 9) % 1 == 0
    assert all(c["statuses"] == ["COMPLETE", "INFEASIBLE"] and c["trials"] is None for c in meta)


def test_trial_outcomes_match_a_literal_reading(home: Path) -> None:
    """Markers and star against the §1.8 definitions, read straight from the tables."""
    from curvekit.measure import trial_outcomes
    from curvekit.store.store import Store

    store = Store.open(home)
    w, metric, goal, bs = "lm1b/transformer_base/nesterov_momentum", "val/cross_entropy_error", \
        3.9, 1024
    out = trial_outcomes(store, w, metric, goal, bs, step_budget=50_000.0)
    trials = store.trials(w, batch_size=bs, statuses=["COMPLETE", "INFEASIBLE"])
    rows = store.measurements(w, batch_size=bs)
    assert out["trial_id"].to_list() == sorted(trials["trial_id"].to_list())
    first: dict[int, int] = {}
    for t, step, value in rows.select("trial_id", "step", metric).iter_rows():
        if step <= 50_000 and value is not None and not math.isnan(value) and value < goal:
            first[t] = min(first.get(t, step), step)
    status = dict(trials.select("trial_id", "status").iter_rows())
    for t, outcome, winner in out.select("trial_id", "outcome", "winner").iter_rows():
        expected = ("Infeasible" if status[t] == "INFEASIBLE" else
                    "Goal Achieved" if t in first else "Goal Not Achieved")
        assert outcome == expected
        assert winner == (bool(first) and t == min(first, key=lambda k: (first[k], k)))


def test_figure12_budgets_and_eligibility(home: Path, tmp_path: Path) -> None:
    from curvekit.store.store import Store

    spec = _spec(home, tmp_path, 12)
    panels = _panels(spec)
    assert len(panels) == 8 and FIGURES[12].size_px == (648, 972)
    assert panels[2]["title"] == panels[3]["title"] == "Simple CNN on Fashion MNIST"
    store = Store.open(home)
    for panel, declared in zip(panels, FIGURES[12].panels, strict=True):
        layer = panel["layer"][0]
        assert layer["encoding"]["x"]["scale"]["type"] == "log"
        assert layer["encoding"]["y"]["scale"]["domain"] == list(declared.ylim or ())
        data = spec["datasets"][(layer.get("data") or panel["data"])["name"]]
        train = dict(store.studies(declared.curves[0].workload)
                     .select("batch_size", "train_steps").iter_rows())
        budgets = {c.label: c for c in declared.curves}
        for row in data:
            c = budgets[row["curve"]]
            need = c.step_budget if c.step_budget is not None else (
                (c.example_budget or 0) / row["batch_size"])
            assert train[int(row["batch_size"])] >= need
    labels = [c.label for c in FIGURES[12].panels[5].curves]
    assert labels[:3] == ["0.2 epochs", "0.5 epochs", "1 epochs"]
    assert FIGURES[12].panels[5].curves[0].example_budget == pytest.approx(6_060_205.6)


def test_figure15_train_metrics_with_fallback(home: Path, tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="no train/average_precision"):
        from curvekit.figures.render import figure
        from curvekit.store.store import Store

        chart, meta = figure(15, Store.open(home))
    titles = [p["title"] for row in chart.to_dict()["vconcat"] for p in row["hconcat"]]
    assert titles[0] == "Simple CNN on MNIST (train)"
    assert titles[4] == "ResNet-50 on Open Images (validation)"
    assert [c["metric"] for c in meta["curves"]][:2] == ["train/classification_error"] * 2


def test_figure16_common_anchor_and_figure18_band(home: Path, tmp_path: Path) -> None:
    from curvekit.store.store import Store

    panels = _panels(_spec(home, tmp_path, 16))
    title = panels[0]["layer"][0]["encoding"]["y"]["axis"]["title"]
    store = Store.open(home)
    reached = [set(store.steps_to_result(c.workload, c.metric, 0.03, trials=100)["batch_size"])
               for c in FIGURES[16].panels[0].curves]
    assert title == f"Steps / (Steps at B={min(set.intersection(*reached))})"
    band, line = _panels(_spec(home, tmp_path, 18))[0]["layer"]
    assert band["mark"]["type"] == "area" and band["encoding"]["y2"]["field"] == "high"
    assert band["encoding"]["y"]["scale"]["type"] == "log"
    assert "base" not in band["encoding"]["y"]["scale"]  # log10
    assert line["encoding"]["x"]["scale"]["base"] == 2


def test_half_decade_limits_are_strict() -> None:
    from curvekit.figures.builders import half_decade_limits

    assert half_decade_limits([0.01, 0.1]) == pytest.approx((10**-2.5, 10**-0.5))
    assert half_decade_limits([10**-2.5, 0.3]) == pytest.approx((1e-3, 10**-0.5))


@pytest.mark.parametrize("number", [2, 19])
def test_altair_chart_wraps_the_spec_and_validates(home: Path, number: int) -> None:
    from curvekit.figures.render import figure, figure_spec
    from curvekit.store.store import Store

    store = Store.open(home)
    chart, meta = figure(number, store)
    spec, meta2 = figure_spec(number, store)
    assert isinstance(chart, alt.VConcatChart) and meta == meta2
    with alt.data_transformers.disable_max_rows():
        wrapped = chart.to_dict()  # validated against the Vega-Lite schema
    for row in wrapped["vconcat"]:  # Altair moves a lone layer's data up to its chart
        for panel in row["hconcat"]:
            if "data" in panel:
                for layer in panel["layer"]:
                    layer.setdefault("data", panel["data"])
                del panel["data"]
    assert {k: v for k, v in wrapped.items() if k != "config"} == spec
    # usable as any Altair chart in a notebook
    assert chart.properties(title="x").configure_axis(labelFontSize=9).to_dict(
        validate=False)["config"]["axis"] == {"labelFontSize": 9}


def test_figure_command_does_not_import_altair(home: Path, tmp_path: Path) -> None:
    """The CLI draws from plain Vega-Lite dicts: importing Altair would cost half a second."""
    import subprocess
    import sys

    code = ("import sys; from curvekit.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code\n"
            "assert 'altair' not in sys.modules, 'altair was imported'")
    out = tmp_path / "f8.json"
    done = subprocess.run([sys.executable, "-c", code, "figure", "8", "--home", str(home),
                           "--out", str(out), "--format", "json"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["vconcat"]
