"""The paper's figures drawn so far: specs faithful to the figure spec, real PNGs."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import altair as alt
import pytest
from click.testing import CliRunner

from curvekit.cli import main
from curvekit.figures.paper import FIGURE1_PANELS, FIGURES


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from curvekit.release.convert import convert
    from curvekit.release.synthetic import generate_archive

    tmp = tmp_path_factory.mktemp("figures")
    manifest = generate_archive(tmp / "a.tar.bz2", workloads=[p[1] for p in FIGURE1_PANELS],
                                max_trials_per_study=10, evals_scale=0.1, jobs=1)
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
    assert unknown.exit_code == 1 and "figure 99 is not available" in unknown.output


def test_figures_gallery_lists_missing_workloads(home: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["figures", "--out", str(tmp_path / "g"), "--home",
                                       str(home), "--format", "svg"])
    assert result.exit_code == 0, result.output
    index = (tmp_path / "g" / "index.html").read_text()
    for number in (1, 2, 8, 13, 14, 17, 24):  # drawable from Figure 1's workloads
        assert (tmp_path / "g" / f"figure-{number:02d}.svg").is_file()
        assert f'src="figure-{number:02d}.svg"' in index
    assert "figure 3 needs workloads missing from the store" in index


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
    from curvekit.figures.render import _paper_goals
    from curvekit.store.store import Store

    fig = FIGURES[23]
    assert len(fig.panels) == 35 and fig.size_px == (1080, 1323)
    assert fig.panels[16].curves[0].workload == "mnist/fc_1024_1024/sgd"  # §5 order
    panel = _paper_goals(Store.open(home), fig.panels[0])
    assert panel.title == "cifar_10/resnet_8/nesterov_momentum, goal 0.3"
    assert panel.curves[0].goal == 0.3 and panel.curves[0].trials == 100
