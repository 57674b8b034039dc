"""The text of a CSV log before it is parsed: its dialect and the title lines above its
header.

* **Dialect** (:func:`dialect`, :func:`plain_csv`): a comma, or semicolons or tabs when the
  header has no comma; cells padded with spaces; with semicolons a decimal comma.
* **Titles** (:func:`title_lines`, :func:`without_title`): lines above the header that are
  not the log's columns (``# run 3 of sweep``, a plain title), found by one rule and made
  blank, so that every line keeps its number in messages.

>>> without_title(b"step,loss\\n0,1\\n", "r.csv")
(b'step,loss\\n0,1\\n', 1)
"""

from __future__ import annotations

import csv
import io
import re
import warnings

from curvekit.errors import IngestWarning

__all__ = ["TITLE_SNIFF_BYTES", "TITLE_SNIFF_LINES", "below_title", "dialect", "is_number",
           "plain_csv", "title_lines", "without_title"]

_DECIMAL_COMMA = re.compile(r"^[+-]?\d+,\d+(?:[eE][+-]?\d+)?$")


def dialect(header: bytes) -> tuple[str, bool]:
    """The separator of a CSV log and whether its cells are padded with spaces, read off its
    header line: a comma unless the line has none and has semicolons (spreadsheets of
    locales that write ``0,5``) or tabs; padded when a name starts or ends with a space
    (Ultralytics' and other right-aligned logs).

    >>> dialect(b"step,loss"), dialect(b"step;loss"), dialect(b"  epoch,  train/loss")
    ((',', False), (';', False), (',', True))
    """
    text = header.decode("utf-8-sig", errors="replace").rstrip("\r\n")
    separator = ","
    if "," not in text:
        separator = ";" if ";" in text else "\t" if "\t" in text else ","
    cells = next(csv.reader([text], delimiter=separator), [])
    return separator, any(c != c.strip() for c in cells)


def plain_csv(data: bytes, separator: str, padded: bool) -> bytes:
    """``data`` rewritten as a comma-separated file with unpadded cells, line for line (so
    that every message's line number is still the file's). With semicolons, a decimal comma
    (``0,5``) is a decimal point.

    >>> plain_csv(b"step;loss\\n100;0,5\\n", ";", False)
    b'step,loss\\n100,0.5\\n'
    """
    text = data.decode("utf-8-sig", errors="replace")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in csv.reader(io.StringIO(text, newline=""), delimiter=separator):
        cells = [c.strip() for c in row] if padded or separator != "," else row
        if separator == ";":
            cells = [c.replace(",", ".") if _DECIMAL_COMMA.match(c) else c for c in cells]
        writer.writerow(cells)
    return out.getvalue().encode()


TITLE_SNIFF_LINES = 64
"""How many lines at the start of a CSV log are looked at for a title above its header."""
TITLE_SNIFF_BYTES = 64 << 10
"""How many bytes of a CSV log format detection reads to look past a title."""


def is_number(cell: str) -> bool:
    """True for a cell that reads as a number (a decimal comma too).

    >>> is_number(" 0.5"), is_number("0,5"), is_number("NA")
    (True, True, False)
    """
    text = cell.strip()
    if _DECIMAL_COMMA.match(text):
        text = text.replace(",", ".")
    try:
        float(text)
    except ValueError:
        return False
    return True


def title_lines(data: bytes) -> int:
    """How many lines at the start of a CSV log are a title above its header (0: the first
    line is the header).

    The rule: the first *data row* is the first line holding a number; the header is the
    first line before it with the same separator and the same number of fields; every line
    above the header is a title (a comment such as ``# run 3 of sweep``, a plain title).
    Lines starting with ``#`` are titles whatever their fields. A file with no such header
    among its first :data:`TITLE_SNIFF_LINES` lines is read from its first line, as usual.

    >>> title_lines(b"# run 3 of sweep\\nstep,loss\\n0,2.5\\n10,2.1\\n")
    1
    >>> title_lines(b"Training log\\n\\nstep;loss\\n0;2,5\\n"), title_lines(b"step,loss\\n0,1\\n")
    (2, 0)
    """
    lines = _first_lines(data, TITLE_SNIFF_LINES)
    texts: list[str | None] = []  # None: blank, or a '#' comment
    for raw in lines:
        text = raw.decode("utf-8-sig", errors="replace").strip("\r\n")
        texts.append(None if not text.strip() or text.lstrip().startswith("#") else text)
    try:
        first = next((i for i, t in enumerate(texts) if t is not None
                      and any(is_number(c) for c in _cells(t, dialect(lines[i])[0]))), None)
        if first is None:
            return 0
        for i, line in enumerate(texts[:first]):
            if line is None:
                continue
            separator = dialect(lines[i])[0]  # the header says how the rows are separated
            if len(_cells(line, separator)) == len(_cells(texts[first] or "", separator)):
                return i
    except csv.Error:
        return 0
    return 0


def _first_lines(data: bytes, count: int) -> list[bytes]:
    """The first ``count`` lines of ``data`` (the last may be cut), without copying the
    rest of a large file."""
    lines: list[bytes] = []
    start = 0
    while len(lines) < count and start <= len(data):
        end = data.find(b"\n", start)
        if end < 0:
            lines.append(data[start:])
            break
        lines.append(data[start:end])
        start = end + 1
    return lines


def _cells(text: str, separator: str) -> list[str]:
    return next(csv.reader([text], delimiter=separator), [])


def below_title(head: bytes) -> bytes | None:
    """The header line of a CSV log whose first bytes are ``head``, when title lines stand
    above it (see :func:`title_lines`); None when the first line is the header.

    >>> below_title(b"# sweep 3\\nStep,a - loss\\n0,1\\n"), below_title(b"step,loss\\n0,1\\n")
    (b'Step,a - loss', None)
    """
    count = title_lines(head)
    if not count:
        return None
    lines = _first_lines(head, count + 1)
    return lines[count].rstrip(b"\r") if len(lines) > count else None


def without_title(data: bytes, path: str) -> tuple[bytes, int]:
    """``data`` with the title lines above its header (see :func:`title_lines`) made
    blank, so that every line keeps its number, and the header's 1-based line; an
    :class:`IngestWarning` says what was left out.

    >>> without_title(b"step,loss\\n0,1\\n", "r.csv")
    (b'step,loss\\n0,1\\n', 1)
    """
    count = title_lines(data)
    if not count:
        return data, 1
    lines = data.split(b"\n", count)
    left_out = [line.decode("utf-8-sig", errors="replace").strip() for line in lines[:count]]
    shown = [t if len(t) <= 60 else t[:60] + "..." for t in left_out if t]
    where = "line 1" if count == 1 else f"lines 1-{count}"
    warnings.warn(f"{path}: {where} ({'; '.join(repr(t) for t in shown)}) above the header "
                  f"on line {count + 1} {'is' if count == 1 else 'are'} not the log's "
                  f"columns (the rows below have the header's {_fields(lines[count])} fields): "
                  f"left out as a title, the columns read from line {count + 1}",
                  IngestWarning, stacklevel=3)
    return b"\n" * count + lines[count], count + 1


def _fields(text: bytes) -> int:
    """The number of fields of the first line of ``text``."""
    line = text.split(b"\n", 1)[0]
    separator = dialect(line)[0]
    return len(next(csv.reader([line.decode("utf-8-sig", errors="replace").strip("\r\n")],
                               delimiter=separator), []))
