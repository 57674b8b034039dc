"""JSON-lines training logs: one JSON object per line, one line per epoch (``jsonl``).

The training scripts of DETR, DeiT, MAE, ConvNeXt and many repositories built on them
append ``json.dumps(log_stats) + "\\n"`` to ``<output_dir>/log.txt`` after each epoch:
``{"train_lr": ..., "train_loss": ..., "test_loss": ..., "test_acc1": ..., "epoch": 3,
"n_parameters": 86567656}``.

* **One run per file** (``log.txt`` or ``*.jsonl``), named by its path relative to SOURCE
  (and by its folder).
* **The time axis** is the first of the step columns of CSV logs (``step``,
  ``global_step``, ...) that every line has, else ``epoch``: those scripts log 0-based
  epochs after each one, so the line of epoch *e* is at step (*e* + 1) x steps per epoch
  (``steps_per_epoch`` or ``train_examples`` in the manifest; see "The epoch axis").
* **Metrics** are the keys holding numbers. A key whose value is the same on every line
  and that names no split (``n_parameters``) is a property of the run: a metaparameter.
  Lists and tables (COCO's ``test_coco_eval_bbox`` list of twelve statistics) are left
  out, with a warning naming them; ``--map`` cannot reach inside them.
* Two lines of one epoch with different values (two runs appended to one file) are
  refused, naming both lines.

>>> import pathlib, tempfile
>>> log = pathlib.Path(tempfile.mkdtemp()) / "log.txt"
>>> _ = log.write_text('{"train_loss": 2.0, "test_loss": 1.9, "epoch": 0, "n_parameters": 9}\\n'
...                    '{"train_loss": 1.5, "test_loss": 1.6, "epoch": 1, "n_parameters": 9}\\n')
>>> [(r.key, r.by_epoch, r.params, r.frame.rows()) for r in read_jsonl_runs(log.parent)]
[('log.txt', True, {'n_parameters': 9}, [(0, 1.9, 2.0), (1, 1.6, 1.5)])]
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from curvekit import structured
from curvekit.errors import IngestError, IngestWarning
from curvekit.ingest.csvlogs import STEP_COLUMNS, log_files
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.metrics import SPLITS
from curvekit.ingest.runs import MAX_COLUMNS, ReadOptions, RunLog, merge_rows
from curvekit.ingest.yamlish import param_value
from curvekit.names import check_name

__all__ = ["LOG_NAME", "is_jsonl_log", "read_jsonl_runs"]

LOG_NAME = "log.txt"
MAX_LOG_BYTES = 1 << 30
_WANDB = ("wandb-history.jsonl", "wandb-events.jsonl")


def is_jsonl_log(name: str, head: bytes) -> bool:
    """True for a JSON-lines training log: ``log.txt`` or ``*.jsonl`` (not W&B's own files)
    whose first line is a JSON object.

    >>> is_jsonl_log("log.txt", b'{"epoch": 0}\\n'), is_jsonl_log("log.txt", b"epoch 0\\n")
    (True, False)
    """
    low = name.lower()
    if low in _WANDB or not (low == LOG_NAME or low.endswith(".jsonl")):
        return False
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{")


def _line_error(path: Path, number: int) -> Callable[[str, int | None], IngestError]:
    def error(message: str, _: int | None) -> IngestError:
        return IngestError(f"{message.removeprefix(f'{path}: ')}; a JSON-lines log holds one "
                           "object per line: repair or remove the line", path=str(path),
                           line=number)
    return error


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _split_word(name: str) -> bool:
    first = name.replace("/", "_").replace("-", "_").split("_", 1)[0].lower()
    return first in SPLITS


def read_jsonl_run(path: Path, key: str, *, step_renames: tuple[str, ...] = (),
                   drop: frozenset[str] = frozenset(),
                   files: SourceFiles | None = None) -> RunLog:
    """One JSON-lines log as a run named ``key`` (see the module docs)."""
    files = files_of(path, files)
    data = files.read_bytes(path, limit=MAX_LOG_BYTES)
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    for number, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        entry = structured.loads(raw, "json", where=str(path), expect=dict,
                                 error=_line_error(path, number))
        rows.append(entry)
        lines.append(number)
    if not rows:
        raise IngestError(f"empty log; leave it out with --exclude '{key}'", path=str(path),
                          line=1)
    keys: dict[str, None] = {}
    for entry in rows:
        keys.update(dict.fromkeys(entry))
    chosen = [k for k in step_renames if k in keys]
    axis_key = chosen[0] if chosen else next(
        (k for k in STEP_COLUMNS if all(k in e for e in rows)), "epoch")
    if not all(axis_key in e for e in rows):
        row = next(i for i, e in enumerate(rows) if axis_key not in e)
        raise IngestError(f"no {axis_key!r} on this line: every line of a JSON-lines log "
                          f"needs its epoch (or a step: {', '.join(STEP_COLUMNS)}), or name "
                          "the key that counts with --map KEY=step", path=str(path),
                          line=lines[row])
    nested = sorted(k for k in keys if any(isinstance(e.get(k), list | dict) for e in rows))
    if nested:
        warnings.warn(f"{path}: left out {len(nested)} key(s) holding lists or tables "
                      f"({', '.join(nested[:5])}{', ...' if len(nested) > 5 else ''}): only "
                      "numbers are metrics", IngestWarning, stacklevel=2)
    params: dict[str, Any] = {}
    metrics: list[str] = []
    for k in keys:
        if k == axis_key or k in drop or k in nested or k in ("epoch", *STEP_COLUMNS):
            continue
        values = [e.get(k) for e in rows]
        if not any(_number(v) for v in values):
            continue  # text (a name, a path) is no measurement
        constant = all(_number(v) and v == values[0] for v in values)
        if constant and len(rows) > 1 and not _split_word(k):
            params[k] = param_value(values[0])
            continue
        bad = next((i for i, v in enumerate(values) if v is not None and not _number(v)),
                   None)
        if bad is not None:
            raise IngestError(f"{k!r} is {values[bad]!r} here, not a number; leave it out "
                              f"with --map '{k}='", path=str(path), line=lines[bad])
        check_name(k, "metric", fix=f"rename it with --map '{k}=<new name>'",
                   error=lambda m: IngestError(m, path=str(path)))
        metrics.append(k)
    if len(metrics) > MAX_COLUMNS:
        raise IngestError(f"the log has {len(metrics):,} metrics; curvekit reads at most "
                          f"{MAX_COLUMNS:,} per run", path=str(path))
    axis = "step" if axis_key != "epoch" else "epoch"
    frame = pl.DataFrame(
        {axis: pl.Series([e[axis_key] if _number(e[axis_key]) else math.nan for e in rows],
                         dtype=pl.Float64 if any(isinstance(e[axis_key], float) for e in rows)
                         else pl.Int64),
         **{k: pl.Series([float(e[k]) if _number(e.get(k)) else None for e in rows],
                         dtype=pl.Float64) for k in sorted(metrics)}})
    frame = merge_rows(frame, str(path), lambda row: lines[row] if row < len(lines)
                       else row + 1, axis)
    alias = Path(key).parent.as_posix()
    return RunLog(key, str(path), frame, params, aliases=(alias,) if alias != "." else (),
                  by_epoch=axis == "epoch")


def read_jsonl_runs(source: Path, options: ReadOptions | None = None) -> list[RunLog]:
    """Every JSON-lines log under ``source`` (or ``source`` itself), one run each."""
    opts = options or ReadOptions()
    files = files_of(source, opts.files)
    found = [(p, k) for p, k in log_files(source, (".txt", ".jsonl"), opts.select, files)
             if (p.name.lower() == LOG_NAME or p.name.lower().endswith(".jsonl"))
             and is_jsonl_log(p.name, files.read_head(p, 64))]
    return [read_jsonl_run(p, k, step_renames=opts.step_renames, drop=opts.drop, files=files)
            for p, k in found]
