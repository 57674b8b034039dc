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

__all__ = ["SCHEMA", "Spec", "channel", "dataset", "expression_text", "field", "from_altair",
           "records", "to_altair", "top_level", "vega_string"]

Spec = dict[str, Any]
"""A Vega-Lite specification: JSON-ready dicts, lists, strings, numbers and None."""

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.4.1.json"
"""The Vega-Lite version the specs are written for (the one Altair 6 and vl-convert use)."""

_TYPES = {"Q": "quantitative", "N": "nominal", "O": "ordinal", "T": "temporal"}

# -- text from the store in a spec ---------------------------------------------------------
# Names come from users' logs. In a spec they are strings that Vega draws as text (titles,
# axis and legend titles, legend labels, drop-down options, tooltip values), with three
# exceptions, each written by one function below:
# * an expression curvekit writes (a filter): each text is a string literal (vega_string);
# * a column name: Vega-Lite reads ".", "[...]" and quotes in a field as a path (field);
# * a channel's title: Vega-Lite copies it between double quotes into expressions it writes
#   itself (each mark's description, tooltips), escaping the quotes but not backslashes.
#   top_level gives such a title to the channel escaped (expression_text) and to its axis or
#   legend as it is, so that what is drawn and what is described both read as the name.

_GUIDES = {"x": "axis", "y": "axis", "color": "legend", "fill": "legend", "stroke": "legend",
           "opacity": "legend", "fillOpacity": "legend", "strokeOpacity": "legend",
           "strokeWidth": "legend", "strokeDash": "legend", "size": "legend",
           "shape": "legend", "angle": "legend"}


def vega_string(text: str) -> str:
    r"""``text`` as a string literal in a Vega expression.

    >>> print(vega_string('a"b\\c é'))
    "a\"b\\c \u00e9"
    """
    return structured.dumps(text, ensure_ascii=True)


def expression_text(text: str) -> str:
    r"""``text`` as Vega-Lite must be given it where it writes it between double quotes into
    an expression after escaping the quotes only (a channel's title): backslashes doubled.

    >>> print(expression_text('a\\"b'))
    a\\"b
    """
    return text.replace("\\", "\\\\")


def field(name: str) -> str:
    r"""The Vega-Lite field that reads the column ``name`` itself, never a path into it:
    every character a field path gives a meaning to (``.``, brackets, quotes, backslash)
    is escaped.

    >>> print(field("a.b['0']"))
    a\.b\[\'0\'\]
    """
    return "".join("\\" + c if c in ".[]'\"\\" else c for c in name)


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
    """An encoding channel from ``"column:T"`` (T one of Q, N, O, T) and its properties; the
    column is named by :func:`field`, and titled by its own name where that needed escapes
    (Vega-Lite would otherwise title it with the escapes)."""
    name, _, kind = shorthand.rpartition(":")
    escaped = field(name)
    if escaped != name:
        properties = {"title": name, **properties}
    return {"field": escaped, "type": _TYPES[kind], **properties}


def subtitled(title: str | Spec | None, subtitle: str) -> Spec:
    """A chart title (its text, or title properties) with ``subtitle`` under it, in red.

    >>> subtitled("Figure 1", "Synthetic")["subtitle"]
    'Synthetic'
    """
    base = dict(title) if isinstance(title, dict) else {"text": title or ""}
    return {**base, "subtitle": subtitle, "subtitleColor": "#b00000"}


def top_level(spec: Spec, datasets: dict[str, list[dict[str, Any]]]) -> Spec:
    """``spec`` as a complete document: the schema URL first, the named datasets last, and
    every channel title safe where Vega-Lite copies it (see :func:`expression_text`)."""
    return {"$schema": SCHEMA, **_titles_guarded(spec), "datasets": datasets}


def _titles_guarded(node: Any) -> Any:
    if isinstance(node, list):
        return [_titles_guarded(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _titles_guarded(value) for key, value in node.items()}
    encoding = out.get("encoding")
    if isinstance(encoding, dict):
        out["encoding"] = {name: _guarded_channel(name, definition)
                           for name, definition in encoding.items()}
    return out


def _guarded_channel(name: str, definition: Any) -> Any:
    if isinstance(definition, list):  # tooltip: a list of channels
        return [_guarded_channel("", d) for d in definition]
    if not isinstance(definition, dict) or not isinstance(definition.get("title"), str | list):
        return definition
    title = definition["title"]
    escaped = ([expression_text(str(t)) for t in title] if isinstance(title, list)
               else expression_text(title))
    if escaped == title:
        return definition
    out = {**definition, "title": escaped}
    guide = _GUIDES.get(name)
    if guide is not None and out.get(guide, {}) is not None:
        # drawn as it is by the axis or legend; described (escaped) by the channel
        out[guide] = {"title": title, **(out.get(guide) or {})}
    return out


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
