"""Steps-to-result tables from files: a paper's table or another tool's, for ``fit --table``.

A table is a CSV file with a header row, or a JSON file holding either a list of rows
(``[{"batch_size": 64, "steps": 46000}, ...]``) or an object of columns
(``{"batch_size": [...], "steps": [...]}``). Columns: ``batch_size`` and ``steps``
(``step`` is read as ``steps``), optional ``steps_sd`` (each row's standard deviation of
steps); other columns are ignored. Rows are numbered from 1 in the file's order (the CSV
header is not a row). The values are checked by :func:`curvekit.scaling.check_steps_table`,
the one rule for every table, whether it comes from a file or from Python.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "zhang.csv"
>>> _ = path.write_text("batch_size,steps\\n64,46000\\n128,23000\\n256,13282\\n512,7000\\n"
...                     "1024,3840\\n2048,2528\\n4096,1917\\n8192,1600\\n16384,1600\\n")
>>> fit = fit_table(path)
>>> f"{fit.critical.s_min:.5g}", f"{fit.critical.b_crit:.5g}"
('1293.8', '2190.6')
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from curvekit.errors import FitError
from curvekit.ingest.files import SourceFiles
from curvekit.scaling import Excess, TableFit, fit_steps_table
from curvekit.structured import loads

__all__ = ["fit_table", "read_steps_table"]

MAX_TABLE_BYTES = 16 << 20
"""The largest table file read (a steps-to-result table has one row per batch size)."""


def read_steps_table(path: str | Path) -> dict[str, list[Any]]:
    """The columns of a steps-to-result table file, as read (not yet checked).

    ``.json`` files are JSON; any other file is CSV with a header row.
    """
    path = Path(path)
    files = SourceFiles.of(path)
    text = files.read_text(path, limit=MAX_TABLE_BYTES)
    where = f"the table {path}"
    if path.suffix.lower() == ".json":
        data = loads(text, "json", where=where, expect=(dict, list),
                     error=lambda message, line: FitError(message))
        if isinstance(data, dict):
            return {str(k): v if isinstance(v, list) else [v] for k, v in data.items()}
        columns: dict[str, list[Any]] = {}
        for row, record in enumerate(data, start=1):
            if not isinstance(record, dict):
                raise FitError(f"{where}, row {row}: {record!r} is not an object of columns; "
                               'give rows such as {"batch_size": 64, "steps": 46000}')
            for name in columns.keys() | record.keys():
                columns.setdefault(str(name), [None] * (row - 1)).append(record.get(name))
        return columns
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff")))
    rows = [r for r in reader if any(cell.strip() for cell in r)]
    if not rows:
        raise FitError(f"{where} is empty; give a header row (batch_size,steps) and one row "
                       "per batch size")
    header = [name.strip() for name in rows[0]]
    out: dict[str, list[Any]] = {name: [] for name in header}
    for number, cells in enumerate(rows[1:], start=1):
        if len(cells) != len(header):
            raise FitError(f"{where}, row {number}: {len(cells)} cells under a header of "
                           f"{len(header)} ({','.join(header)}); give one value per column")
        for name, cell in zip(header, cells, strict=True):
            out[name].append(cell)
    return out


def fit_table(source: str | Path | Any, *, bootstrap: int = 0, seed: int = 0,
              level: float = 0.95, excess: float = 0.2, excess_reference: float | None = None,
              name: str | None = None) -> TableFit:
    """Fit both models to a steps-to-result table: a file (CSV or JSON, see the module
    docs), a frame, or a mapping of columns. ``curvekit fit --table FILE`` prints it.

    ``bootstrap`` samples give intervals where the table has ``steps_sd``, reasons where
    not (:func:`curvekit.scaling.fit_steps_table`); ``excess`` and ``excess_reference``
    define the batch size reported beside B_crit (:class:`curvekit.scaling.Excess`).

    >>> fit = fit_table({"batch_size": [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    ...                  "steps": [46000, 23000, 13282, 7000, 3840, 2528, 1917, 1600, 1600]},
    ...                 excess_reference=256)
    >>> round(fit.summary()["b_excess"], 1)
    745.3
    """
    if isinstance(source, (str, Path)):
        table: Any = read_steps_table(source)
        label = name or Path(source).name
    else:
        table, label = source, name or "table"
    return fit_steps_table(table, name=label, bootstrap=bootstrap, seed=seed, level=level,
                           excess=Excess(excess, excess_reference))
