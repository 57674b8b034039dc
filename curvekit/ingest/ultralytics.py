"""Ultralytics YOLO training runs (``ultralytics``): ``results.csv`` beside ``args.yaml``
(YOLOv8 and later) or ``opt.yaml`` (YOLOv5).

Each training run's folder (``runs/detect/train``, ``runs/train/exp2``) holds
``results.csv`` -- one row per epoch, its header and cells padded with spaces to line up
(``"   epoch,   train/box_loss, ..."``) -- and the run's arguments; YOLOv5 adds
``hyp.yaml`` (also inside ``opt.yaml``), and both write TensorBoard event files with the
same scalars (a by-product: not read).

* **One run per folder**, named by its path relative to SOURCE.
* **The epoch axis**: YOLOv5 and YOLOv8 8.0 number epochs from 0, later versions from 1;
  a file whose first row is epoch 1 is read as 1-based. The row of the *n*-th epoch is at
  step *n* x steps per epoch (give ``steps_per_epoch``, or ``train_examples`` with the
  dataset's training images, in the manifest). The ``time`` column (seconds since the
  start) is a clock, left out.
* **Names** as logged (``train/box_loss``, ``metrics/mAP50(B)``, ``lr/pg0``), mapped by
  the one naming rule; mAP, precision and recall are fractions already.
* **Metaparameters** from ``args.yaml`` / ``opt.yaml``; the batch size is its ``batch``
  (YOLOv8) or ``batch_size`` (YOLOv5; the total over GPUs). ``batch: -1`` (AutoBatch
  chose it at run time) is no batch size: give it in the manifest.

>>> import pathlib, tempfile
>>> run = pathlib.Path(tempfile.mkdtemp()) / "train"
>>> run.mkdir()
>>> _ = (run / "args.yaml").write_text("epochs: 2\\nbatch: 16\\nlr0: 0.01\\n")
>>> _ = (run / "results.csv").write_text(
...     "                  epoch,         train/box_loss,       metrics/mAP50(B)\\n"
...     "                      0,                 1.6878,                0.15826\\n"
...     "                      1,                  1.267,                0.25946\\n")
>>> [(r.key, r.params, r.frame.rows()) for r in read_ultralytics_runs(run.parent)]
[('train', {'batch_size': 16, 'epochs': 2, 'lr0': 0.01}, [(0, 1.6878, 0.15826), \
(1, 1.267, 0.25946)])]
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from curvekit.errors import IngestError
from curvekit.ingest.configs import flatten
from curvekit.ingest.csvlogs import (
    MAX_HEADER_BYTES,
    _header,
    frame_from_table,
    log_files,
    read_table_bytes,
)
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.runs import ReadOptions, RunLog
from curvekit.ingest.yamlish import read_flat_yaml

__all__ = ["ARGS_FILES", "RESULTS_FILE", "read_ultralytics_runs"]

RESULTS_FILE = "results.csv"
ARGS_FILES = ("args.yaml", "opt.yaml")
"""The run's arguments: YOLOv8's ``args.yaml``, YOLOv5's ``opt.yaml``."""
_PADDING = re.compile(rb"[ \t]*,[ \t]*")
_CLOCKS = ("time",)


def _params(folder: Path, files: SourceFiles) -> dict[str, Any]:
    args = next((folder / n for n in ARGS_FILES if files.exists(folder / n)), None)
    if args is None:
        return {}
    params = flatten(read_flat_yaml(args, files=files))
    batch = params.pop("batch", None)
    if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0 \
            and "batch_size" not in params:
        params["batch_size"] = batch  # YOLOv8's name for it; -1 is AutoBatch: unknown
    return dict(sorted(params.items()))


def read_ultralytics_run(path: Path, key: str, *, step_renames: tuple[str, ...] = (),
                         drop: frozenset[str] = frozenset(),
                         files: SourceFiles | None = None) -> RunLog:
    """One ``results.csv`` as a run named ``key`` (see the module docs)."""
    files = files_of(path, files)
    raw = files.read_bytes(path)
    if len(raw.split(b"\n", 1)[0]) > MAX_HEADER_BYTES:
        raise IngestError("the header line is too long for a results.csv", path=str(path),
                          line=1)
    data = b"\n".join(_PADDING.sub(b",", line.strip()) for line in raw.splitlines())
    names = _header(data, str(path))
    table = read_table_bytes(data, str(path), names,
                             text=[n for n in names if n in ("epoch", *step_renames)],
                             skip={n for n in names if n in drop or n in _CLOCKS})
    frame, by_epoch = frame_from_table(table, str(path), data, step_renames=step_renames)
    if by_epoch and frame.height and frame.item(0, "epoch") == 1:
        frame = frame.with_columns(pl.col("epoch") - 1)  # 1-based: the n-th epoch is n - 1
    return RunLog(key, str(path), frame, _params(path.parent, files), by_epoch=by_epoch,
                  aliases=(f"{key}/{RESULTS_FILE}",))


def read_ultralytics_runs(source: Path, options: ReadOptions | None = None) -> list[RunLog]:
    """Every ``results.csv`` under ``source`` (or ``source`` itself), one run each."""
    opts = options or ReadOptions()
    files = files_of(source, opts.files)
    runs = []
    for path, rel in log_files(source, (RESULTS_FILE,), opts.select, files):
        if path.name != RESULTS_FILE:
            continue
        folder = Path(rel).parent.as_posix()
        key = (path.parent.name or rel) if folder == "." else folder
        runs.append(read_ultralytics_run(path, key, step_renames=opts.step_renames,
                                         drop=opts.drop, files=files))
    return runs
