"""DVCLive logs (``dvclive``): ``<dir>/plots/metrics/**/*.tsv`` and ``<dir>/params.yaml``.

DVCLive (``dvclive.Live``, and its Lightning, Keras and Hugging Face integrations) writes
one folder per run (``dvclive/`` by default): ``plots/metrics/<name>.tsv`` for every
``live.log_metric(name, value)`` -- a tab-separated ``step`` and value per line, in
sub-folders for names with ``/`` (``train/loss`` is ``plots/metrics/train/loss.tsv``;
older versions put a ``timestamp`` column first, which is not read) --, ``params.yaml``
(``live.log_params``), ``metrics.json`` (the latest values: a summary, not read) and ``dvc.yaml``.

* **One run per folder** holding ``plots/metrics/``, named by its path relative to SOURCE.
* **Metric names** are the files' paths below ``plots/metrics`` without ``.tsv``
  (``train/loss``, ``val/acc``), mapped by the one naming rule.
* **The step** is ``live.step``, which each integration advances its own way: Lightning's
  ``DVCLiveLogger`` sets it to Lightning's step (the 0-based index of the batch just
  trained, as in Lightning's CSV logs: such a run logs an ``epoch`` series of whole
  numbers beside its metrics, and is read with one step more done per row); the Keras
  callback calls ``next_step()`` once per epoch, and the Hugging Face callback once per
  ``on_log`` call (train and evaluation logs alternate). So:

  - steps 0, 1, 2, ... without a gap are counts of ``next_step()`` calls, not training
    steps: the run is read on the epoch axis and needs ``steps_per_epoch`` (or
    ``train_examples``) in the manifest;
  - a fractional ``epoch`` series (the Hugging Face Trainer's) that does not grow in
    proportion to the step says the step is no training step: refused, naming the
    Trainer's own ``trainer_state.json`` (which records the training step) as the log to
    import instead.
* **Metaparameters** from ``params.yaml`` by :func:`curvekit.ingest.configs.flatten`.

>>> import pathlib, tempfile
>>> live = pathlib.Path(tempfile.mkdtemp()) / "dvclive"
>>> (live / "plots" / "metrics" / "val").mkdir(parents=True)
>>> _ = (live / "params.yaml").write_text("data:\\n  batch_size: 128\\n")
>>> _ = (live / "plots" / "metrics" / "val" / "loss.tsv").write_text(
...     "step\\tloss\\n429\\t0.30\\n859\\t0.12\\n")
>>> _ = (live / "plots" / "metrics" / "epoch.tsv").write_text("step\\tepoch\\n429\\t0\\n859\\t1\\n")
>>> [(r.key, r.params, r.step_offset, r.frame.rows()) for r in read_dvclive_runs(live.parent)]
[('dvclive', {'batch_size': 128}, 1, [(429, 0.0, 0.3), (859, 1.0, 0.12)])]
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv

from curvekit.errors import IngestError
from curvekit.ingest.configs import flatten
from curvekit.ingest.csvlogs import skip_folder
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.runs import (
    MAX_COLUMNS,
    ReadOptions,
    RunLog,
    data_line,
    exact_integers,
    merge_rows,
)
from curvekit.ingest.yamlish import read_flat_yaml
from curvekit.names import check_name

__all__ = ["METRICS_DIR", "is_dvclive_folder", "read_dvclive_runs"]

METRICS_DIR = ("plots", "metrics")
PARAMS_FILE = "params.yaml"


def is_dvclive_folder(folder: Path, files: SourceFiles) -> bool:
    """True for a DVCLive run folder: it holds ``plots/metrics/``."""
    return files.is_dir(folder.joinpath(*METRICS_DIR))


def _series(path: Path, name: str, files: SourceFiles) -> pl.DataFrame:
    """One ``.tsv`` as (step, value) rows, one per step."""
    data = files.read_bytes(path)
    if not data.strip():
        return pl.DataFrame(schema={"step": pl.Int64, name: pl.Float64})
    header = data.split(b"\n", 1)[0].decode("utf-8", errors="replace").rstrip("\r").split("\t")
    if "step" not in header or len(header) < 2:
        raise IngestError(f"not a DVCLive metric file: its header {header!r} has no 'step' "
                          "column beside the value", path=str(path), line=1)
    value = header[-1]
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data), read_options=pacsv.ReadOptions(use_threads=False),
            parse_options=pacsv.ParseOptions(delimiter="\t"),
            convert_options=pacsv.ConvertOptions(
                column_types={"step": pa.string(), value: pa.float64()},
                include_columns=["step", value], null_values=[""],
                strings_can_be_null=True))
    except pa.ArrowInvalid as exc:
        raise IngestError(f"unreadable DVCLive metric file: {exc}", path=str(path)) from exc
    line_of = data_line(data)
    steps = exact_integers(table.column("step"), "step", str(path), line_of)
    frame = pl.DataFrame({"step": pl.Series(steps.to_pylist(), dtype=pl.Int64),
                          name: pl.Series(table.column(value).to_pylist(), dtype=pl.Float64)})
    return merge_rows(frame, str(path), line_of)


def _at(path: Path) -> Callable[[str], IngestError]:
    return lambda message: IngestError(message, path=str(path))


def _refuse_log_counter(frame: pl.DataFrame, key: str, path: str) -> None:
    """A fractional epoch series not in proportion to the step: the step counts log calls."""
    epochs = frame.select("step", "epoch").drop_nulls()
    values = epochs.get_column("epoch")
    if epochs.height < 2 or bool((values == values.floor()).all()):
        return
    last_step, last_epoch = epochs.row(-1)
    ratio = last_step / last_epoch if last_epoch else 0.0
    predicted = (values * ratio - epochs.get_column("step")).abs()
    if ratio > 0 and bool((predicted <= ratio * 0.01 + 1).all()):
        return
    first_step, first_epoch = epochs.row(0)
    raise IngestError(
        f"run {key!r}: its step is no training step: the epoch it logged ({first_epoch} at "
        f"step {first_step} ... {last_epoch} at step {last_step}) does not grow in proportion "
        "to it (DVCLive's Hugging Face callback advances the step once per log call); "
        "import the Trainer's own trainer_state.json (output_dir/checkpoint-*/, with "
        "--log-format hf), which records the training step", path=path)


def _read_run(folder: Path, key: str, files: SourceFiles, drop: frozenset[str]) -> RunLog:
    root = folder.joinpath(*METRICS_DIR)
    frames = []
    for here, dirs, names in files.walk(root):
        dirs[:] = sorted(d for d in dirs if not files.excluded(here / d))
        for name in sorted(names):
            path = here / name
            if not name.endswith(".tsv") or files.excluded(path):
                continue
            metric = path.relative_to(root).as_posix()[: -len(".tsv")]
            if metric in drop:
                continue
            check_name(metric, "metric", fix=f"rename it with --map '{metric}=<new name>'",
                       error=_at(path))
            frames.append(_series(path, metric, files))
    if len(frames) > MAX_COLUMNS:
        raise IngestError(f"{len(frames):,} metrics; curvekit reads at most {MAX_COLUMNS:,} "
                          "per run", path=str(root))
    frame = pl.DataFrame({"step": pl.Series([], dtype=pl.Int64)})
    if frames:
        frame = merge_rows(pl.concat(frames, how="diagonal"), str(root), lambda row: row + 2)
    params_path = folder / PARAMS_FILE
    params = flatten(read_flat_yaml(params_path, files=files)) \
        if files.exists(params_path) else {}
    offset, hint = 0, None
    if "epoch" in frame.columns:
        _refuse_log_counter(frame, key, str(root))
        epochs = frame.get_column("epoch").drop_nulls()
        if epochs.len() and bool((epochs == epochs.floor()).all()) \
                and bool((epochs.cast(pl.Int64) != frame.filter(pl.col("epoch").is_not_null())
                          .get_column("step")).any()):
            offset = 1  # Lightning's logger: the 0-based index of the batch just trained
    steps = frame.get_column("step")
    if frame.height >= 2 and bool((steps == pl.int_range(0, frame.height, eager=True)).all()):
        hint = ("DVCLive's steps run 0, 1, 2, ... without a gap: counts of next_step() calls "
                "(once per epoch in its Keras callback), not training steps")
    return RunLog(key, str(root), frame, params, step_offset=offset, axis_named=False,
                  epoch_hint=hint)


def read_dvclive_runs(source: Path, options: ReadOptions | None = None) -> list[RunLog]:
    """Every DVCLive run folder under ``source`` (or ``source`` itself); see the module
    docs."""
    opts = options or ReadOptions()
    files = files_of(source, opts.files)
    if source.is_file():
        raise IngestError("a DVCLive source is a folder (the one holding plots/metrics/, "
                          "or one above it)", path=str(source))
    found: list[tuple[Path, str]] = []
    for here, dirs, _ in files.walk(source):
        rel = here.relative_to(source).as_posix()
        if is_dvclive_folder(here, files):
            found.append((here, source.name if rel == "." else rel))
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if not skip_folder(here / d)
                         and opts.select.keeps_folder(f"{rel}/{d}".removeprefix("./")))
    return [_read_run(folder, key, files, opts.drop) for folder, key in found]
