"""Save charts as PNG, SVG, PDF, HTML or Vega-Lite JSON, with their provenance.

Static formats render without a browser (:mod:`curvekit.plotting.static`). HTML and JSON
carry the provenance in the spec's ``usermeta``; PNG, SVG and PDF get a small JSON sidecar
beside them. An HTML file holds Vega, Vega-Lite and vega-embed (it opens offline), the spec
as an escaped JSON island and a Content-Security-Policy that lets only those two inline
scripts run (:mod:`curvekit.plotting.page`): names in the store never become markup.

>>> import altair as alt, tempfile, pathlib, json
>>> chart = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q")
>>> out = save(chart, pathlib.Path(tempfile.mkdtemp()) / "c.json", {"plot": "demo"})
>>> json.loads(out.read_text())["usermeta"]["curvekit"]["plot"]
'demo'
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curvekit import structured
from curvekit._version import __version__
from curvekit.errors import FigureError
from curvekit.outputs import write_file
from curvekit.plotting.static import Renderer, draw
from curvekit.plotting.vegalite import Spec, from_altair

if TYPE_CHECKING:
    import altair as alt

__all__ = ["FORMATS", "html_page", "save"]

FORMATS = ("png", "svg", "pdf", "html", "json")


def save(chart: Spec | alt.TopLevelMixin, path: str | os.PathLike[str],
         provenance: dict[str, Any],
         *, fmt: str | None = None, scale: float = 1.0,
         renderer: Renderer | None = None) -> Path:
    """Write ``chart`` (a Vega-Lite spec or an Altair chart) to ``path`` in ``fmt``.

    ``fmt`` defaults to the suffix. Returns the path written. A ``renderer`` (started
    earlier) draws PNG, SVG and PDF in its helper process; otherwise they are drawn here.
    Each file is written whole or not at all (:func:`curvekit.outputs.write_file`): a full
    disk, a read-only folder or a name too long is an :class:`~curvekit.errors.OutputError`.
    A PNG, SVG or PDF written to a device or pipe (``/dev/stdout``) gets no sidecar.

    ``scale`` 1 gives the spec's sizes at 72 dpi (Figure 1: about 648 × 567 plus titles).
    """
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".") or "png").lower()
    if fmt not in FORMATS:
        raise FigureError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    meta = {"curvekit_version": __version__, **provenance}
    spec = chart if isinstance(chart, dict) else from_altair(chart)
    spec = {**spec}
    spec["usermeta"] = {**spec.get("usermeta", {}), "curvekit": meta}
    what = f"the {fmt.upper()} chart"
    if fmt == "json":
        return write_file(path, structured.dumps(spec, indent=1), what)
    text = structured.dumps(spec)
    if fmt == "html":
        return write_file(path, html_page(spec), what)
    image = renderer.draw(text, fmt, scale) if renderer is not None else draw(text, fmt, scale)
    write_file(path, image, what)
    if path.is_file():  # not beside /dev/stdout or a pipe
        write_file(path.with_name(path.name + ".json"), structured.dumps(meta, indent=1) + "\n",
                   "the chart's provenance")
    return path


def html_page(spec: Spec) -> str:
    """A self-contained HTML page that draws ``spec`` in a browser, offline.

    Its title is the chart's title; the page runs nothing but the bundled Vega libraries
    and the embedding script (allowed by their hashes).
    """
    import vl_convert as vlc

    from curvekit.plotting.page import standalone_page

    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(str(t) for t in title)
    bundle: str = vlc.javascript_bundle()  # type: ignore[call-arg]
    return standalone_page(spec, str(title) if title else "curvekit chart", bundle)
