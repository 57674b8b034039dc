"""Static images (PNG, SVG, PDF) of Vega-Lite specs, drawn without a browser by vl-convert.

:func:`draw` draws in this process. :class:`Renderer` draws in a helper process whose
JavaScript engine starts as soon as the renderer is created: a command that draws one
figure creates it first, so that the engine's start (about a second) overlaps the command's
imports and queries on the other core. A thread cannot do this: while the engine starts it
holds up the interpreter's other threads each time they read a file, so the command's
imports took longer than the engine saved.

This module imports nothing heavy: the helper process loads only vl-convert.

Examples
--------
>>> png = draw('{"data": {"values": [{"x": 1}]}, "mark": "point"}', "png")
>>> png[:4]
b'\\x89PNG'
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import TracebackType

from curvekit import structured
from curvekit._processes import python
from curvekit.errors import RendererError

__all__ = ["STATIC_FORMATS", "Renderer", "RendererError", "draw", "serve"]

STATIC_FORMATS = ("png", "svg", "pdf")

# Drawn first by a helper process: it starts the engine before the real spec arrives.
_WARM_UP = {"data": {"values": [{"x": 0}]}, "mark": "point"}


def draw(spec: str, fmt: str, scale: float = 1.0) -> bytes:
    """The image of ``spec`` (Vega-Lite JSON text) as PNG, SVG or PDF bytes.

    ``scale`` 1 gives the spec's sizes at 72 dpi (PNG only).
    """
    import vl_convert as vlc

    if fmt == "png":
        return bytes(vlc.vegalite_to_png(spec, scale=scale))
    if fmt == "svg":
        return str(vlc.vegalite_to_svg(spec)).encode()
    if fmt == "pdf":
        return bytes(vlc.vegalite_to_pdf(spec))
    raise ValueError(f"not a static format: {fmt!r}; choose one of {', '.join(STATIC_FORMATS)}")


class Renderer:
    """Draws one spec in a helper process started at construction.

    Use it as a context manager: a renderer that was never asked to draw (the command
    failed before) stops its process on exit.

    >>> with Renderer() as renderer:
    ...     svg = renderer.draw('{"data": {"values": [{"x": 1}]}, "mark": "point"}', "svg")
    >>> svg[:4]
    b'<svg'
    """

    def __init__(self) -> None:
        # Isolated, with this process's import path minus the working folder, and this very
        # copy of curvekit (curvekit._processes): nothing in the working folder runs.
        self._process = python("curvekit.plotting.static", "serve", purpose="renderer",
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)

    def draw(self, spec: str, fmt: str, scale: float = 1.0) -> bytes:
        """As :func:`draw`, in the helper process; raises RendererError if it fails."""
        header = structured.dumps({"format": fmt, "scale": scale}).encode() + b"\n"
        out, err = self._process.communicate(header + spec.encode())
        if self._process.returncode != 0:
            message = err.decode(errors="replace").strip().splitlines()
            raise RendererError(message[-1] if message else
                                f"the renderer exited with status {self._process.returncode}")
        return out

    def close(self) -> None:
        """Stop the helper process if it is still running."""
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        for stream in (self._process.stdin, self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def serve() -> int:
    """The helper process (started by :class:`Renderer`): start the engine, then draw the
    one spec sent on stdin and write the image to stdout."""
    draw(structured.dumps(_WARM_UP), "svg")
    header = sys.stdin.buffer.readline()
    if not header:  # the command stopped before it had anything to draw
        return 0
    options = json.loads(header)
    try:
        image = draw(sys.stdin.buffer.read().decode(), options["format"], options["scale"])
    except Exception as exc:  # reported to the parent on one line, without the JS stack
        lines = [line.strip() for line in str(exc).splitlines()
                 if line.strip() and not line.lstrip().startswith("at ")]
        print(" ".join(lines) or type(exc).__name__, file=sys.stderr)
        return 1
    sys.stdout.buffer.write(image)
    return 0
