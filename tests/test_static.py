"""Static images: the helper-process renderer draws what vl-convert draws in process, reports
its failures, and never outlives the command; plain-dict specs round-trip through Altair."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from curvekit.plotting.static import Renderer, RendererError, draw
from curvekit.plotting.vegalite import channel, dataset, records, to_altair

SPEC = json.dumps({
    "data": {"values": [{"x": 1, "y": 2}, {"x": 2, "y": 3}]}, "mark": "line",
    "encoding": {"x": {"field": "x", "type": "quantitative"},
                 "y": {"field": "y", "type": "quantitative"}}})


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_helper_process_draws_what_the_process_draws(fmt: str) -> None:
    with Renderer() as renderer:
        image = renderer.draw(SPEC, fmt)
    if fmt == "pdf":  # PDFs carry their creation time
        assert image.startswith(b"%PDF") and len(image) > 500
    else:
        assert image == draw(SPEC, fmt)


def test_helper_process_reports_a_bad_spec() -> None:
    with Renderer() as renderer, pytest.raises(RendererError, match="Invalid field type"):
        renderer.draw('{"mark": "point", "encoding": {"x": {"field": "x", "type": "nope"}}}',
                      "png")


def test_unused_renderer_stops_its_process() -> None:
    renderer = Renderer()
    process = renderer._process
    with renderer:
        pass
    assert process.poll() is not None


def test_failing_figure_command_leaves_no_helper(tmp_path: object) -> None:
    from click.testing import CliRunner

    from curvekit.cli import main

    started: list[Renderer] = []
    original = Renderer.__init__

    def spy(self: Renderer) -> None:
        original(self)
        started.append(self)

    pytest.MonkeyPatch().setattr(Renderer, "__init__", spy)
    try:
        result = CliRunner().invoke(main, ["figure", "99", "--home", str(tmp_path)])
    finally:
        pytest.MonkeyPatch().undo()
        Renderer.__init__ = original  # type: ignore[method-assign]
    assert result.exit_code == 1
    assert started and all(r._process.poll() is not None for r in started)


def test_draw_refuses_other_formats() -> None:
    with pytest.raises(ValueError, match="not a static format"):
        draw(SPEC, "html")


@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none()),
                min_size=1, max_size=20))
def test_records_are_json_ready(values: list[float | None]) -> None:
    rows = records(pl.DataFrame({"v": values}, schema={"v": pl.Float64}))
    text = json.dumps(rows, allow_nan=False)  # raises on NaN or inf
    for row, value in zip(json.loads(text), values, strict=True):
        if value is None or not math.isfinite(value):
            assert row["v"] is None
        else:
            assert row["v"] == value


def test_equal_tables_are_stored_once() -> None:
    datasets: dict = {}  # type: ignore[type-arg]
    a = dataset(pl.DataFrame({"x": [1, 2]}), datasets)
    b = dataset(pl.DataFrame({"x": [1, 2]}), datasets)
    c = dataset(pl.DataFrame({"x": [2, 1]}), datasets)
    assert a == b != c and len(datasets) == 2


def test_spec_round_trips_through_altair() -> None:
    datasets: dict = {}  # type: ignore[type-arg]
    layer = {"data": dataset(pl.DataFrame({"x": [1.0, 2.0], "y": [3.0, 4.0]}), datasets),
             "mark": {"type": "line"},
             "encoding": {"x": channel("x:Q"), "y": channel("y:Q", title="Y")}}
    spec = {"$schema": "https://vega.github.io/schema/vega-lite/v6.4.1.json",
            "layer": [layer, {**layer, "mark": {"type": "point"},  # its own data: kept apart
                              "data": dataset(pl.DataFrame({"x": [1.0], "y": [5.0]}),
                                              datasets)}], "width": 100,
            "datasets": datasets}
    chart = to_altair(spec)
    out = chart.to_dict()  # validates against the schema
    assert {k: v for k, v in out.items() if k != "config"} == spec
    assert (chart | chart).to_dict()["hconcat"][0]["layer"] == spec["layer"]
