"""Weights & Biases run folders as the client leaves them on disk (part of ``wandb``).

``wandb.init()`` writes each run into ``wandb/run-<date>_<time>-<id>/``. Clients up to
0.8 kept the history there as text, ``wandb-history.jsonl`` (one JSON object per
``wandb.log`` call: the logged values, ``_step``, ``_runtime``, ``_timestamp``), beside
``config.yaml`` (each key as ``{desc: ..., value: ...}``), ``wandb-summary.json`` (the
last values) and ``wandb-metadata.json`` (``state``: ``finished``, ``running``, ``failed``,
``killed``, ``crashed``); some projects keep those files flat in ``wandb/``. Clients since
0.9 keep the history only in the binary ``run-<id>.wandb`` file (with ``config.yaml`` and
the rest under ``files/``), which curvekit does not read.

* **One run per folder** holding ``wandb-history.jsonl``, named by its path relative to
  SOURCE (W&B's ``wandb/latest-run`` link to the newest run folder is passed over, even
  with ``--follow-links``: that run is read under its own name); ``config.yaml`` and
  ``wandb-metadata.json`` are read beside it or in its ``files/`` folder.
* **The step** is ``_step`` -- unless the history also logs ``step``, ``global_step`` or
  ``trainer/global_step`` (as for W&B exports: ``_step`` counts ``wandb.log`` calls).
  W&B's own keys (``_runtime``, ``_timestamp``, ``_wandb``, ...) are left out, and so are
  values that are not numbers (images, videos, tables, histograms); a row left with no
  number (a video) is no measurement.
* **Status** from ``wandb-metadata.json``'s ``state``: ``finished`` is a finished run;
  ``running`` (a run whose process died, or a notebook never finished), ``failed``,
  ``killed`` and ``crashed`` did not finish (INCOMPLETE).
* **Metaparameters** from ``config.yaml`` (the ``value`` of each key, flattened by
  :func:`curvekit.ingest.configs.flatten`; ``_wandb`` and ``wandb_version`` left out).
* A run folder holding only the binary ``run-<id>.wandb`` is refused, with the commands
  that turn it into files curvekit reads: ``wandb sync <run folder>`` uploads it, then
  ``wandb.Api().run("<entity>/<project>/<id>").scan_history()`` written to CSV or Parquet
  (or a chart's *Export as CSV*) is imported with ``--log-format wandb``.

>>> import json, pathlib, tempfile
>>> run = pathlib.Path(tempfile.mkdtemp()) / "wandb" / "run-20200219_000833-abc"
>>> run.mkdir(parents=True)
>>> _ = (run / "config.yaml").write_text(
...     "wandb_version: 1\\nbatch_size:\\n  desc: null\\n  value: 32\\n")
>>> _ = (run / "wandb-metadata.json").write_text('{"state": "finished"}')
>>> _ = (run / "wandb-history.jsonl").write_text(
...     '{"loss": 2.0, "_runtime": 1.2, "_step": 0}\\n{"loss": 1.5, "_step": 1}\\n')
>>> [(r.key, r.params, r.finished, r.frame.rows())
...  for r in read_wandb_local(run.parent.parent)]
[('wandb/run-20200219_000833-abc', {'batch_size': 32}, True, [(0, 2.0), (1, 1.5)])]
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from curvekit import structured
from curvekit.errors import IngestError
from curvekit.ingest.configs import flatten
from curvekit.ingest.csvlogs import skip_folder
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.runs import MAX_COLUMNS, ReadOptions, RunLog, merge_rows
from curvekit.ingest.yamlish import read_flat_yaml
from curvekit.names import check_name

__all__ = ["ALIAS", "HISTORY_FILE", "is_alias", "is_local_run", "read_wandb_any",
           "read_wandb_local"]

HISTORY_FILE = "wandb-history.jsonl"
MAX_HISTORY_BYTES = 1 << 30
_STEPS = ("step", "global_step", "trainer/global_step")
_FINISHED = "finished"


ALIAS = "latest-run"
"""W&B's link to the newest run folder of ``wandb/``: the same run, read under its own name."""


def is_alias(path: Path) -> bool:
    """True for W&B's ``wandb/latest-run`` link (never a second run)."""
    return path.name == ALIAS and path.is_symlink()


def _binary(names: set[str] | list[str]) -> list[str]:
    return sorted(n for n in names if n.startswith("run-") and n.endswith(".wandb"))


def is_local_run(names: set[str]) -> bool:
    """True for the files of a W&B run folder: a text history, or the binary record."""
    return HISTORY_FILE in names or bool(_binary(names))


def _line_error(path: Path, number: int) -> Callable[[str, int | None], IngestError]:
    def error(message: str, _: int | None) -> IngestError:
        return IngestError(message.removeprefix(f"{path}: "), path=str(path), line=number)
    return error


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _side(folder: Path, name: str, files: SourceFiles) -> Path | None:
    for path in (folder / name, folder / "files" / name):
        if files.exists(path):
            return path
    return None


def _history(path: Path, files: SourceFiles, renames: tuple[str, ...],
             drop: frozenset[str]) -> pl.DataFrame:
    data = files.read_bytes(path, limit=MAX_HISTORY_BYTES)
    rows: list[tuple[int, dict[str, Any]]] = []
    for number, raw in enumerate(data.splitlines(), 1):
        if raw.strip():
            rows.append((number, structured.loads(raw, "json", where=str(path), expect=dict,
                                                  error=_line_error(path, number))))
    present = {k for _, r in rows for k in r}
    axis = next((k for k in (*renames, *_STEPS) if k in present), "_step")
    metrics: dict[str, None] = {}
    kept: list[tuple[int, dict[str, Any]]] = []
    for number, row in rows:
        values = {k: v for k, v in row.items() if _number(v) and k != axis
                  and not k.startswith("_") and k not in drop and k not in _STEPS}
        if not values:
            continue  # media, tables, a row of W&B's own keys: no measurement
        if not _number(row.get(axis)):
            raise IngestError(f"this row has no {axis} (the step of the others); every row "
                              "with a metric needs one", path=str(path), line=number)
        metrics.update(dict.fromkeys(values))
        kept.append((number, {**values, axis: row[axis]}))
    if len(metrics) > MAX_COLUMNS:
        raise IngestError(f"the history logs {len(metrics):,} metrics; curvekit reads at most "
                          f"{MAX_COLUMNS:,} per run", path=str(path))
    for name in metrics:
        check_name(name, "metric", fix=f"rename it with --map '{name}=<new name>'",
                   error=lambda m: IngestError(m, path=str(path)))
    lines = [n for n, _ in kept]
    steps = [r[axis] for _, r in kept]
    frame = pl.DataFrame(
        {"step": pl.Series(steps, dtype=pl.Float64 if any(isinstance(s, float) for s in steps)
                           else pl.Int64),
         **{m: pl.Series([float(r[m]) if m in r else None for _, r in kept],
                         dtype=pl.Float64) for m in sorted(metrics)}})
    return merge_rows(frame, str(path), lambda row: lines[row] if row < len(lines) else 0)


def _state(folder: Path, files: SourceFiles) -> bool | None:
    path = _side(folder, "wandb-metadata.json", files)
    if path is None:
        return None
    meta = structured.loads(files.read_bytes(path, limit=16 << 20), "json", where=str(path),
                            expect=dict, error=lambda m, line: IngestError(
                                m.removeprefix(f"{path}: "), path=str(path), line=line))
    state = meta.get("state")
    return None if not isinstance(state, str) else state == _FINISHED


def _config(folder: Path, files: SourceFiles) -> dict[str, Any]:
    path = _side(folder, "config.yaml", files)
    if path is None:
        return {}
    raw = read_flat_yaml(path, files=files)
    values = {k: v.get("value") if isinstance(v, dict) and "value" in v else v
              for k, v in raw.items()}
    return flatten(values, skip=("_wandb", "wandb_version"))


def _refuse_binary(folder: Path, key: str, names: list[str]) -> IngestError:
    return IngestError(
        f"W&B run {key!r} keeps its history only in the binary {names[0]} (W&B's own record "
        "format, written by clients since 0.9), which curvekit does not read: upload it "
        f"with `wandb sync {folder}`, then export the history (wandb.Api().run(\"<entity>/"
        "<project>/<run id>\").scan_history() written to a CSV or Parquet file, or a "
        "chart's Export as CSV) and import that file with --log-format wandb; or leave the "
        f"run out with --exclude '{key}'", path=str(folder / names[0]))


def read_wandb_local(source: Path, options: ReadOptions | None = None) -> list[RunLog]:
    """Every W&B run folder under ``source`` (see the module docs)."""
    opts = options or ReadOptions()
    files = files_of(source, opts.files)
    if source.is_file():
        source = source.parent
    runs = []
    for here, dirs, names in files.walk(source):
        rel = here.relative_to(source).as_posix()
        dirs[:] = sorted(d for d in dirs if not skip_folder(here / d) and not is_alias(here / d)
                         and opts.select.keeps_folder(f"{rel}/{d}".removeprefix("./")))
        kept = {n for n in names if opts.select.keeps(f"{rel}/{n}".removeprefix("./"))}
        if not is_local_run(kept):
            continue
        key = source.name if rel == "." else rel
        if HISTORY_FILE not in kept:
            raise _refuse_binary(here, key, _binary(kept))
        frame = _history(here / HISTORY_FILE, files, opts.step_renames, opts.drop)
        runs.append(RunLog(key, str(here / HISTORY_FILE), frame, _config(here, files),
                           finished=_state(here, files)))
    return runs


def read_wandb_any(source: Path, options: ReadOptions | None = None) -> list[RunLog]:
    """W&B runs: local run folders where ``source`` holds any, else exported histories
    (:mod:`curvekit.ingest.wandb`)."""
    from curvekit.ingest.wandb import read_wandb_runs

    opts = options or ReadOptions()
    files = files_of(source, opts.files)
    top = source.parent if source.is_file() else source
    for here, dirs, names in files.walk(top):
        dirs[:] = [d for d in dirs if not skip_folder(here / d) and not is_alias(here / d)]
        if is_local_run(set(names)):
            return read_wandb_local(source, opts)
    return read_wandb_runs(source, opts)

