"""Vega-Lite specs as plain dicts: what the chart builders write and the renderers read.

The builders write specs directly rather than through Altair's objects: a nine-panel figure
is then built in milliseconds, where Altair's objects took a quarter of a second and
importing Altair another half. Altair stays the notebook interface: :func:`to_altair` wraps
a spec as an Altair chart, and :func:`from_altair` turns any Altair chart into a spec.

Examples
--------
>>> import polars as pl
>>> datasets: dict = {}
>>> ref = dataset(pl.DataFrame({"x": [1.0, float("nan")], "y": [2, 3]}), datasets)
>>> datasets[ref["name"]]
[{'x': 1.0, 'y': 2}, {'x': None, 'y': 3}]
>>> channel("x:Q", title="Batch Size")
{'field': 'x', 'type': 'quantitative', 'title': 'Batch Size'}
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import polars as pl

from curvekit import structured

if TYPE_CHECKING:
    import altair as alt

__all__ = ["SCHEMA", "Spec", "channel", "dataset", "from_altair", "records", "to_altair",
           "top_level"]

Spec = dict[str, Any]
"""A Vega-Lite specification: JSON-ready dicts, lists, strings, numbers and None."""

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.4.1.json"
"""The Vega-Lite version the specs are written for (the one Altair 6 and vl-convert use)."""

_TYPES = {"Q": "quantitative", "N": "nominal", "O": "ordinal", "T": "temporal"}


def records(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """The rows of ``frame`` as JSON-ready dicts: NaN and ±inf become None (JSON null)."""
    floats = [c for c, t in frame.schema.items() if t.is_float()]
    if floats:
        frame = frame.with_columns(
            pl.when(pl.col(c).is_finite()).then(pl.col(c)).otherwise(None).alias(c)
            for c in floats)
    return frame.to_dicts()


def dataset(frame: pl.DataFrame, datasets: dict[str, list[dict[str, Any]]]) -> Spec:
    """Add ``frame``'s rows to ``datasets`` under a name derived from their content and
    return the data reference to put in a layer (equal tables are stored once)."""
    rows = records(frame)
    name = _name(rows)
    datasets[name] = rows
    return {"name": name}


def _name(rows: list[dict[str, Any]]) -> str:
    """The name Altair gives the same rows, so that a wrapped spec keeps its names."""
    if rows == [{}]:
        return "empty"
    text = structured.dumps(rows, sort_keys=True, default=str)
    return "data-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def channel(shorthand: str, **properties: Any) -> Spec:
    """An encoding channel from ``"field:T"`` (T one of Q, N, O, T) and its properties."""
    name, _, kind = shorthand.rpartition(":")
    return {"field": name, "type": _TYPES[kind], **properties}


def subtitled(title: str | Spec | None, subtitle: str) -> Spec:
    """A chart title (its text, or title properties) with ``subtitle`` under it, in red.

    >>> subtitled("Figure 1", "Synthetic")["subtitle"]
    'Synthetic'
    """
    base = dict(title) if isinstance(title, dict) else {"text": title or ""}
    return {**base, "subtitle": subtitle, "subtitleColor": "#b00000"}


def top_level(spec: Spec, datasets: dict[str, list[dict[str, Any]]]) -> Spec:
    """``spec`` as a complete document: the schema URL first, the named datasets last."""
    return {"$schema": SCHEMA, **spec, "datasets": datasets}


def to_altair(spec: Spec) -> alt.TopLevelMixin:
    """Wrap a spec as an Altair chart, for notebooks: it displays, saves, takes
    ``.properties()`` and ``.configure_*()``, and concatenates with other charts.

    ``to_altair(spec).to_dict()`` is ``spec`` plus Altair's default ``config``.
    """
    import altair as alt

    datasets = spec.get("datasets", {})

    def wrap(part: Spec) -> Any:
        # Data go back inline: Altair gathers them into the top level's datasets itself,
        # under the same names, whatever the chart is later concatenated with.
        part = {k: v for k, v in part.items() if k not in ("$schema", "datasets")}
        if isinstance(part.get("data"), dict) and part["data"].get("name") in datasets:
            part["data"] = {"values": datasets[part["data"]["name"]]}
        for key, kind in (("vconcat", alt.VConcatChart), ("hconcat", alt.HConcatChart),
                          ("layer", alt.LayerChart)):
            if key in part:
                return kind(**{**part, key: [wrap(p) for p in part[key]]})
        if "encoding" in part:
            part["encoding"] = alt.FacetedEncoding(**part["encoding"])
        return alt.Chart(**part)

    chart: alt.TopLevelMixin = wrap(spec)
    return chart


def from_altair(chart: alt.TopLevelMixin) -> Spec:
    """An Altair chart's spec, with its data inlined however many rows it has.

    Altair refuses more than 5,000 rows by default; a scatter of every trial of a large
    workload has more. Schema validation is skipped: the tests validate the builders' specs.
    """
    import altair as alt

    with alt.data_transformers.disable_max_rows():
        spec: Spec = chart.to_dict(validate=False)
    return spec
