"""Save charts as PNG, SVG, PDF, HTML or Vega-Lite JSON, with their provenance.

Static formats render without a browser (vl-convert). HTML and JSON carry the provenance
in the spec's ``usermeta``; PNG, SVG and PDF get a small JSON sidecar beside them.

>>> import altair as alt, tempfile, pathlib, json
>>> chart = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q")
>>> out = save(chart, pathlib.Path(tempfile.mkdtemp()) / "c.json", {"plot": "demo"})
>>> json.loads(out.read_text())["usermeta"]["curvekit"]["plot"]
'demo'
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import altair as alt

from curvekit._version import __version__
from curvekit.errors import CurvekitError
from curvekit.figures.builders import to_spec

__all__ = ["FORMATS", "save", "warm_up"]

FORMATS = ("png", "svg", "pdf", "html", "json")


def save(chart: alt.TopLevelMixin | dict[str, Any], path: str | os.PathLike[str],
         provenance: dict[str, Any],
         *, fmt: str | None = None, scale: float = 1.0) -> Path:
    """Write ``chart`` (an Altair chart or a Vega-Lite dict) to ``path`` in ``fmt``.

    ``fmt`` defaults to the suffix. Returns the path written.

    ``scale`` 1 gives the spec's sizes at 72 dpi (Figure 1: about 648 × 567 plus titles).
    """
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".") or "png").lower()
    if fmt not in FORMATS:
        raise CurvekitError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    meta = {"curvekit_version": __version__, **provenance}
    path.parent.mkdir(parents=True, exist_ok=True)
    # The builders emit valid specs (the tests validate them); skipping Altair's schema
    # validation here saves most of a second per figure.
    spec = chart if isinstance(chart, dict) else to_spec(chart)
    spec = {**spec}
    spec["usermeta"] = {**spec.get("usermeta", {}), "curvekit": meta}
    if fmt == "json":
        path.write_text(json.dumps(spec, indent=1))
        return path
    import vl_convert as vlc

    text = json.dumps(spec)
    if fmt == "html":  # Vega, Vega-Lite and vega-embed bundled in the page: opens offline
        path.write_text(vlc.vegalite_to_html(text, bundle=True))
        return path
    if fmt == "png":
        path.write_bytes(vlc.vegalite_to_png(text, scale=scale))
    elif fmt == "svg":
        path.write_text(vlc.vegalite_to_svg(text))
    else:
        path.write_bytes(vlc.vegalite_to_pdf(text))
    path.with_name(path.name + ".json").write_text(json.dumps(meta, indent=1) + "\n")
    return path


def warm_up() -> threading.Thread:
    """Start the static renderer's JavaScript engine in the background and return the thread.

    Starting the engine takes about a second; a command that will save a PNG, SVG or PDF
    calls this first, so that the start overlaps its imports and queries.
    """
    def start() -> None:
        import vl_convert as vlc

        vlc.vegalite_to_svg({"data": {"values": [{"x": 0}]}, "mark": "point"})

    thread = threading.Thread(target=start, name="curvekit-renderer-warm-up", daemon=True)
    thread.start()
    return thread
