"""How long a test waits for something that is bound to happen.

Tests synchronise on the event itself (a server that has finished its answer, a line from a
child process, a page's charts having drawn), never on elapsed time. The timeout of such a
wait only turns a hang into a failure, so it is far longer than any load on the machine
makes the event late: it never decides a passing run.
"""

from __future__ import annotations

PATIENCE = 300.0
"""Seconds a test waits for an event before it calls it a hang."""

PATIENCE_MS = int(PATIENCE * 1000)
""":data:`PATIENCE` in milliseconds, as the browser's waits take it."""

CHARTS_SETTLED = """() => [...document.querySelectorAll('.chart')].every(chart =>
  chart.getAttribute('data-rendered') === 'true'
  || chart.textContent.startsWith('This chart could not be drawn'))"""
"""True once every chart of a report page has drawn or shown why it could not: the page's
script sets ``data-rendered`` when vega-embed has finished, after the SVG first appears."""


def wait_for_charts(page: object) -> None:
    """Wait until every chart of the browser ``page`` (playwright) has settled."""
    page.wait_for_function(CHARTS_SETTLED, timeout=PATIENCE_MS)  # type: ignore[attr-defined]
