"""Save charts as PNG, SVG, PDF, HTML or Vega-Lite JSON, with their provenance.

Static formats render without a browser (:mod:`curvekit.figures.static`). HTML and JSON
carry the provenance in the spec's ``usermeta``; PNG, SVG and PDF get a small JSON sidecar
beside them.

>>> import altair as alt, tempfile, pathlib, json
>>> chart = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q")
>>> out = save(chart, pathlib.Path(tempfile.mkdtemp()) / "c.json", {"plot": "demo"})
>>> json.loads(out.read_text())["usermeta"]["curvekit"]["plot"]
'demo'
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curvekit._version import __version__
from curvekit.errors import CurvekitError
from curvekit.figures.static import Renderer, draw
from curvekit.figures.vegalite import Spec, from_altair

if TYPE_CHECKING:
    import altair as alt

__all__ = ["FORMATS", "save"]

FORMATS = ("png", "svg", "pdf", "html", "json")


def save(chart: Spec | alt.TopLevelMixin, path: str | os.PathLike[str],
         provenance: dict[str, Any],
         *, fmt: str | None = None, scale: float = 1.0,
         renderer: Renderer | None = None) -> Path:
    """Write ``chart`` (a Vega-Lite spec or an Altair chart) to ``path`` in ``fmt``.

    ``fmt`` defaults to the suffix. Returns the path written. A ``renderer`` (started
    earlier) draws PNG, SVG and PDF in its helper process; otherwise they are drawn here.

    ``scale`` 1 gives the spec's sizes at 72 dpi (Figure 1: about 648 × 567 plus titles).
    """
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".") or "png").lower()
    if fmt not in FORMATS:
        raise CurvekitError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    meta = {"curvekit_version": __version__, **provenance}
    path.parent.mkdir(parents=True, exist_ok=True)
    spec = chart if isinstance(chart, dict) else from_altair(chart)
    spec = {**spec}
    spec["usermeta"] = {**spec.get("usermeta", {}), "curvekit": meta}
    if fmt == "json":
        path.write_text(json.dumps(spec, indent=1))
        return path
    text = json.dumps(spec)
    if fmt == "html":  # Vega, Vega-Lite and vega-embed bundled in the page: opens offline
        import vl_convert as vlc

        path.write_text(vlc.vegalite_to_html(text, bundle=True))
        return path
    image = renderer.draw(text, fmt, scale) if renderer is not None else draw(text, fmt, scale)
    path.write_bytes(image)
    path.with_name(path.name + ".json").write_text(json.dumps(meta, indent=1) + "\n")
    return path
