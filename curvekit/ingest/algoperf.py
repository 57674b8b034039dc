"""AlgoPerf (MLCommons' training-algorithms benchmark) logs: one run per trial folder.

The benchmark's runner writes, for each trial of a workload
(``<workload>/trial_<n>/``):

* ``eval_measurements.csv`` -- **the curve**: one row per evaluation, placed by
  ``global_step`` (the optimizer steps done), with ``train/<metric>``,
  ``validation/<metric>`` and ``test/<metric>`` columns;
* ``measurements.csv`` -- the per-step log (minibatch loss, gradient norm), which repeats the
  evaluations at their steps: not a run of its own, not read;
* ``events.out.tfevents.*`` -- the same values again, for TensorBoard: not read;
* ``hparams.json`` -- the trial's hyperparameters, read as its metaparameters;
* ``flags_0.json``, ``meta_data_0.json`` -- the runner's flags and the machine: not read.

Bookkeeping columns of the curve are left out: the clocks (``accumulated_*_time``,
``total_duration``, ``score``, the submission time the benchmark scores), the
``preemption_count`` and the ``*/num_examples`` counts. The batch size is the submission's
choice and is not logged: give it in a run manifest (``run = "trial_*"``). A run is named by
its trial folder (``trial_1``), or also by its file (``trial_1/eval_measurements.csv``).

>>> import pathlib, tempfile
>>> trial = pathlib.Path(tempfile.mkdtemp()) / "trial_1"; trial.mkdir()
>>> _ = (trial / "eval_measurements.csv").write_text(
...     "accumulated_eval_time,global_step,score,validation/loss,validation/num_examples\\n"
...     "1.5,1,0.5,1.2,3554\\n9.5,334,80.1,0.3,3554\\n")
>>> _ = (trial / "hparams.json").write_text('{"beta1": 0.9, "optimizer": "amos"}')
>>> [(r.key, r.frame.rows(), r.params) for r in read_algoperf_runs(trial.parent)]
[('trial_1', [(1, 1.2), (334, 0.3)], {'beta1': 0.9, 'optimizer': 'amos'})]
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from curvekit import structured
from curvekit.errors import IngestError
from curvekit.ingest.csvlogs import (
    ALGOPERF_CURVE,
    _header,
    log_files,
    read_csv_run,
    read_header_line,
)
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.runs import ReadOptions, RunLog

__all__ = ["BOOKKEEPING", "HPARAMS", "is_trial_folder", "read_algoperf_runs"]

BOOKKEEPING = re.compile(r"^(accumulated_\w+_time|total_duration|score|preemption_count"
                         r"|.*/num_examples)$")
"""Columns of ``eval_measurements.csv`` that are clocks and counts, not metrics."""
HPARAMS = "hparams.json"
MAX_HPARAMS_BYTES = 1 << 20
"""The largest ``hparams.json`` read: a trial's few dozen hyperparameters fit in far less."""


def is_trial_folder(names: set[str]) -> bool:
    """A folder of AlgoPerf's layout: it holds the curve (``eval_measurements.csv``).

    >>> is_trial_folder({"eval_measurements.csv", "measurements.csv", "hparams.json"})
    True
    """
    return ALGOPERF_CURVE in names


def _hparams(path: Path, files: SourceFiles) -> dict[str, Any]:
    """The scalar hyperparameters of ``hparams.json`` (nested values are left out)."""
    if not files.exists(path):
        return {}
    data = files.read_bytes(path, limit=MAX_HPARAMS_BYTES,
                            refuse=f"an AlgoPerf {HPARAMS} holds a few hyperparameters: "
                            "check the file")
    obj = structured.loads(
        data, "json", where=str(path), expect=dict,
        error=lambda message, line: IngestError(
            f"{message.removeprefix(f'{path}: ')} (a JSON object of hyperparameters); fix the "
            "file, or give the trial's parameters in a run manifest and leave it out with "
            f"--exclude '{HPARAMS}'", path=str(path), line=line))
    return {k: v for k, v in obj.items()
            if isinstance(v, bool | int | float | str) and not (isinstance(v, str) and not v)}


def read_algoperf_runs(source: Path, options: ReadOptions | None = None) -> list[RunLog]:
    """Every trial under ``source`` (a study's folder, a workload's folder, one trial's
    folder or its ``eval_measurements.csv``) as one run."""
    opts = options or ReadOptions()
    files = files_of(source, opts.files)
    runs = []
    for path, rel in log_files(source, (ALGOPERF_CURVE,), opts.select, files):
        if path.name != ALGOPERF_CURVE:
            continue  # e.g. "old_eval_measurements.csv"
        folder = Path(rel).parent.as_posix()
        key = folder if folder != "." else (source if source.is_dir() else path.parent).name
        first = read_header_line(path, files)
        names = _header(first, str(path)) if first.strip() else []
        drop = opts.drop | {n for n in names if BOOKKEEPING.match(n)}
        run = read_csv_run(path, key, step_renames=opts.step_renames, drop=drop, files=files)
        run.aliases = tuple(dict.fromkeys((rel, *run.aliases)))
        run.params = _hparams(path.with_name(HPARAMS), files)
        runs.append(run)
    return runs

