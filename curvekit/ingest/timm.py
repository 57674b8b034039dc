"""timm's training output (``timm``): ``summary.csv`` beside ``args.yaml``.

``pytorch-image-models``' ``train.py`` (and the many repositories that copy it) writes into
its output folder ``args.yaml`` (every command-line argument) and, after each epoch, a row
of ``summary.csv``: ``epoch,train_loss,eval_loss,eval_top1,eval_top5`` (newer versions add
``lr``).

* **One run per output folder**, named by its path relative to SOURCE.
* **The epoch axis**: ``epoch`` is 0-based and a row is written when its epoch ends, so
  the row of epoch *e* is at step (*e* + 1) x steps per epoch (give ``steps_per_epoch``, or
  ``train_examples``, in the manifest). A resumed run (``--resume``, ``start_epoch``)
  starts at a later epoch: its rows keep their epochs.
* **Units**: timm's top-1 and top-5 accuracies are percentages (``accuracy()`` returns
  ``correct * 100 / batch``): they are divided by 100 as they are read (correctly rounded:
  the float64 nearest the quotient), so ``eval_top1`` = 95.12 becomes the accuracy 0.9512
  (stored as ``val/classification_error`` = 0.0488).
* **Metaparameters** from ``args.yaml``; its ``batch_size`` is the batch of one process:
  a run on several GPUs (``torchrun --nproc_per_node``) trained with that times the
  process count, which ``args.yaml`` does not record: give it in the manifest.

>>> import pathlib, tempfile
>>> out = pathlib.Path(tempfile.mkdtemp()) / "run1"
>>> out.mkdir()
>>> _ = (out / "args.yaml").write_text("batch_size: 200\\nlr: 0.0004\\nepochs: 300\\n")
>>> _ = (out / "summary.csv").write_text("epoch,train_loss,eval_loss,eval_top1\\n"
...                                      "0,4.1,3.9,12.5\\n1,3.2,3.0,25.0\\n")
>>> [(r.key, r.by_epoch, r.params["batch_size"], r.frame.rows())
...  for r in read_timm_runs(out.parent)]
[('run1', True, 200, [(0, 4.1, 3.9, 0.125), (1, 3.2, 3.0, 0.25)])]
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import polars as pl
import pyarrow.compute as pc

from curvekit.ingest.configs import flatten
from curvekit.ingest.csvlogs import log_files, read_csv_run
from curvekit.ingest.files import files_of
from curvekit.ingest.runs import ReadOptions, RunLog
from curvekit.ingest.yamlish import read_flat_yaml

__all__ = ["ARGS_FILE", "PERCENT", "SUMMARY_FILE", "read_timm_runs"]

SUMMARY_FILE = "summary.csv"
ARGS_FILE = "args.yaml"
PERCENT = re.compile(r"(^|_)(top1|top5|acc1|acc5)$")
"""timm's columns in percent (``eval_top1``, ``eval_top5``)."""


def read_timm_runs(source: Path, options: ReadOptions | None = None) -> list[RunLog]:
    """Every ``summary.csv`` under ``source`` (or ``source`` itself) as one run, named by
    its folder; see the module docs."""
    opts = options or ReadOptions()
    files = files_of(source, opts.files)
    runs = []
    for path, rel in log_files(source, (SUMMARY_FILE,), opts.select, files):
        if path.name != SUMMARY_FILE:
            continue
        folder = Path(rel).parent.as_posix()
        key = (path.parent.name or rel) if folder == "." else folder
        run = read_csv_run(path, key, step_renames=opts.step_renames, drop=opts.drop,
                           files=files)
        percent = [c for c in run.frame.columns if PERCENT.search(c)]
        # pyarrow's division is IEEE's, correctly rounded: 95.15 / 100 is 0.9515 (polars
        # multiplies by the reciprocal over a column, which gives 0.9515000000000001)
        frame = run.frame.with_columns(
            pl.Series(c, pc.divide(run.frame.get_column(c).to_arrow(), 100.0))
            for c in percent)
        args = path.with_name(ARGS_FILE)
        params = flatten(read_flat_yaml(args, files=files)) if files.exists(args) else {}
        runs.append(replace(run, frame=frame, params=params, aliases=(rel,)))
    return runs
