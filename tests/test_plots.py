"""Plots of any workload: Vega-Lite specs with log2 axes and the fit overlay, real PNGs."""

from __future__ import annotations

import json
import struct
import warnings
from collections.abc import Callable
from pathlib import Path

import altair as alt
import pytest
from click.testing import CliRunner

import curvekit
from curvekit.cli import main

WORKLOAD = "cifar_10/resnet_8/sgd"
NESTEROV = "cifar_10/resnet_8/nesterov_momentum"


@pytest.fixture(scope="module")
def home(converted_home: Callable[..., Path]) -> Path:
    return converted_home([WORKLOAD, NESTEROV], max_trials=8, name="plots")


def _plot(home: Path, out: Path, *extra: str) -> None:
    result = CliRunner().invoke(main, ["plot", "steps-to-result", WORKLOAD, "--metric",
                                       "val/classification_error", "--goal", "0.5", "--home",
                                       str(home), "--out", str(out), *extra])
    assert result.exit_code == 0, result.output


def test_spec_has_log2_axes_perfect_scaling_and_fit(home: Path, tmp_path: Path) -> None:
    _plot(home, tmp_path / "p.json", "--format", "json", "--fit")
    spec = json.loads((tmp_path / "p.json").read_text())
    alt.LayerChart.from_dict(spec)  # valid Vega-Lite (raises otherwise)
    layers = spec["layer"]
    assert len(layers) == 4  # regimes, fitted line, curve, perfect scaling
    curve = layers[2]
    assert curve["mark"]["point"]["shape"] == "triangle-up"
    for channel in ("x", "y"):
        scale = curve["encoding"][channel]["scale"]
        assert (scale["type"], scale["base"], scale["nice"]) == ("log", 2, False)
        rows = spec["datasets"][curve["data"]["name"]]
        values = [r["batch_size" if channel == "x" else "step"] for r in rows]
        lo, hi = scale["domain"]
        assert lo < min(values) and max(values) < hi  # padded: no marker on the frame
    # with a fit, the data and the perfect-scaling line have legend entries too
    assert curve["encoding"]["color"]["legend"] is not None
    assert layers[3]["encoding"]["strokeDash"]["scale"]["domain"] == ["perfect scaling"]
    assert curve["encoding"]["x"]["axis"]["title"] == "Batch Size"
    assert layers[3]["mark"]["strokeDash"] == [5, 4]
    assert layers[0]["encoding"]["color"]["title"].startswith("Regimes (fit: ")
    meta = spec["usermeta"]["curvekit"]
    assert meta["workloads"] == [WORKLOAD] and meta["goal"] == 0.5
    assert meta["fit"]["definition"] == "docs/fits.md"
    assert meta["store"]["manifest"]["dataset"] == "batch_science_synthetic"


def test_png_renders_with_a_sidecar(home: Path, tmp_path: Path) -> None:
    _plot(home, tmp_path / "p.png")
    data = (tmp_path / "p.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    # 360×300 plot area, axes, legend, at the default PNG scale of 2
    assert 800 < width < 1800 and 640 < height < 1200
    assert json.loads((tmp_path / "p.png.json").read_text())["plot"] == "steps-to-result"
    no_fit = json.loads(CliRunner().invoke(main, [
        "plot", "steps-to-result", WORKLOAD, "--metric", "val/classification_error",
        "--goal", "0.5", "--home", str(home), "--out", str(tmp_path / "n.json"),
        "--format", "json"]).output and (tmp_path / "n.json").read_text())
    assert len(no_fit["layer"]) == 2


def _run(home: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["plot", *args, "--home", str(home)])
    return result.exit_code, result.output


def test_plot_metaparameters(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    code, output = _run(home, "metaparameters", NESTEROV, "--metric",
                        "val/classification_error", "--goal", "0.5", "--out", str(out),
                        "--format", "json")
    assert code == 0, output
    spec = json.loads(out.read_text())
    domain = spec["layer"][0]["encoding"]["color"]["scale"]["domain"]
    assert domain == ["Optimal Effective Learning Rate", "Linear Heuristic",
                      "Square Root Heuristic"]
    assert spec["usermeta"]["curvekit"]["plot"] == "metaparameters"
    code, output = _run(home, "metaparameters", NESTEROV, "--metric",
                        "val/classification_error", "--goal", "0.5", "--parameter", "momentum",
                        "--out", str(out), "--format", "json")
    assert code == 0, output
    spec = json.loads(out.read_text())
    assert spec["layer"][0]["encoding"]["y"]["axis"]["title"] == "Momentum"
    assert len(spec["layer"]) == 1  # no heuristic lines on momentum
    code, output = _run(home, "metaparameters", NESTEROV, "--metric",
                        "val/classification_error", "--goal", "0.5", "--parameter", "warmup")
    assert code == 1 and "no metaparameter 'warmup'" in output


def test_plot_scatter_and_best(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.png"
    code, output = _run(home, "scatter", NESTEROV, "--metric", "val/classification_error",
                        "--goal", "0.5", "--batch-size", "256", "--out", str(out))
    assert code == 0, output
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "s.png.json").read_text())["batch_size"] == 256
    code, output = _run(home, "scatter", NESTEROV, "--metric", "val/classification_error",
                        "--goal", "0.5", "--batch-size", "3")
    assert code == 1 and "no loaded trials at batch size 3" in output
    best = tmp_path / "b.json"
    code, output = _run(home, "best", WORKLOAD, "--metric", "val/classification_error",
                        "--goal", "0.3", "--max-steps", "5000", "--out", str(best),
                        "--format", "json")
    assert code == 0, output
    spec = json.loads(best.read_text())
    assert spec["layer"][1]["mark"]["type"] == "rule"
    assert spec["usermeta"]["curvekit"]["step_budget"] == 5000


def test_html_is_self_contained_with_provenance(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.html"
    _plot(home, out, "--format", "html")
    page = out.read_text()
    assert "https://cdn" not in page and "vegaEmbed" in page  # libraries bundled: offline
    assert '"curvekit"' in page and "steps-to-result" in page  # provenance in usermeta
    assert not (tmp_path / "p.html.json").exists()  # no sidecar for HTML
    assert '<meta http-equiv="Content-Security-Policy"' in page  # runs only its own scripts
    assert "'unsafe-eval'" not in page and "'unsafe-inline'" not in page


def test_plots_say_when_the_data_are_generated(home: Path, tmp_path: Path) -> None:
    from curvekit.plotting.plots import plot_best
    from curvekit.store.catalog import SYNTHETIC_NOTE
    from curvekit.store.store import Store
    from curvekit.store.update import add_workload
    from tests.test_update import workload

    _plot(home, tmp_path / "p.json", "--format", "json")
    title = json.loads((tmp_path / "p.json").read_text())["title"]
    assert title["subtitle"] == SYNTHETIC_NOTE
    assert title["text"] == f"{WORKLOAD}, val/classification_error < 0.5"
    # A store of one's own runs only is not marked.
    add_workload(tmp_path / "own", workload("my_data/mlp/sgd", batch_sizes=(16, 64)))
    store = Store.open(tmp_path / "own")
    metric = store.metrics("my_data/mlp/sgd")[0]
    chart, _ = plot_best(store, curvekit.Selection("my_data/mlp/sgd", metric))
    assert chart.to_dict()["title"] == "my_data/mlp/sgd"


def test_synthetic_data_are_marked_per_workload(home: Path, tmp_path: Path) -> None:
    """A store converted from a generated archive, with one's own workload added: plots of
    the generated workloads say so, a plot of one's own does not."""
    import shutil

    from curvekit.plotting.plots import plot_best
    from curvekit.store.catalog import SYNTHETIC_NOTE, synthetic_note, synthetic_workloads
    from curvekit.store.store import Store
    from curvekit.store.update import add_workload
    from tests.test_update import workload

    mixed = tmp_path / "mixed"
    shutil.copytree(home, mixed, symlinks=True)
    add_workload(mixed, workload("my_data/mlp/sgd", batch_sizes=(16, 64)))
    store = Store.open(mixed)
    assert synthetic_workloads(store) == {WORKLOAD, NESTEROV}
    assert synthetic_note(store, ["my_data/mlp/sgd"]) is None
    assert synthetic_note(store, [WORKLOAD]) == SYNTHETIC_NOTE
    own, _ = plot_best(store, curvekit.Selection("my_data/mlp/sgd", "valid/error"))
    assert own.to_dict()["title"] == "my_data/mlp/sgd"
    generated, _ = plot_best(store, curvekit.Selection(WORKLOAD, "val/classification_error"))
    assert generated.to_dict()["title"]["subtitle"] == SYNTHETIC_NOTE


def test_plot_best_goal_line_lies_inside_the_axis_with_its_value(home: Path) -> None:
    from curvekit.plotting.plots import plot_best
    from curvekit.plotting.vegalite import from_altair
    from curvekit.store.store import Store

    store = Store.open(home)
    for goal in (0.01, 0.3, 0.99):  # below, among and above the best values
        chart, _ = plot_best(store, curvekit.Selection(WORKLOAD, "val/classification_error",
                                                       goal))
        spec = from_altair(chart)
        rule = spec["layer"][1]
        assert rule["mark"]["type"] == "rule"
        lo, hi = rule["encoding"]["y"]["scale"]["domain"]
        assert lo < goal < hi
        assert rule["encoding"]["opacity"]["scale"]["domain"] == [
            f"goal: val/classification_error < {goal}"]
        values = [r["value"] for r in spec["datasets"][spec["layer"][0]["data"]["name"]]]
        assert lo < min(values) and max(values) < hi


def test_compare_names_every_workload_in_the_title(home: Path) -> None:
    from curvekit.plotting.plots import plot_steps_to_result
    from curvekit.store.store import Store

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the batch sizes left out are explained elsewhere
        chart, _ = plot_steps_to_result(
            Store.open(home), curvekit.Selection(WORKLOAD, "val/classification_error", 0.5),
            compare=[NESTEROV])
    title = chart.to_dict()["title"]
    text = title["text"] if isinstance(title, dict) else title
    assert f"{WORKLOAD} vs {NESTEROV}" in text
