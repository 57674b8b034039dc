"""Hugging Face ``transformers`` Trainer logs: ``trainer_state.json``.

The Trainer writes ``trainer_state.json`` into each checkpoint folder
(``<output_dir>/checkpoint-<step>/``) and, with ``trainer.save_state()``, into the output
folder itself. Its ``log_history`` is the curve: one entry per logging or evaluation call,
each with ``step`` (optimizer steps done: the step axis, no offset) and ``epoch`` (a
fraction), plus ``loss``, ``learning_rate``, ``grad_norm`` for training entries and
``eval_loss``, ``eval_accuracy``, ... for evaluations. Beside it: ``train_batch_size``,
``max_steps``, ``num_train_epochs``, ``logging_steps``, ``eval_steps`` and, in a
hyperparameter search, ``trial_name`` and ``trial_params``.

* **One run per output folder.** Checkpoints hold copies of one history, each a prefix of
  the next: the folder's most complete copy is read (of the newest checkpoint's and the
  output folder's own, the one with the largest ``global_step``, then the longest history;
  the folder's own file wins a tie), never one trial per checkpoint.
* **Names** follow :mod:`curvekit.ingest.metrics`: ``loss`` is ``train/loss``,
  ``eval_loss`` is ``val/loss`` (the Trainer records no loss function, so neither is known
  to be the cross-entropy),
  ``eval_accuracy`` is ``val/classification_error`` (as 1 - value); ``epoch`` is no metric.
  The end-of-training summary entry (``train_loss``, ``train_runtime``, ...) and the
  throughput figures of evaluations (``eval_runtime``, ``eval_samples_per_second``,
  ``eval_steps_per_second``) are measurements of the machine, not of the model, and are
  left out, like the wall-clock columns of other formats.
* **Parameters**: ``train_batch_size`` (the batch size: per device times the GPUs of one
  process; with gradient accumulation or several processes, give the batch size in the
  manifest), ``max_steps`` (the step budget: a run whose last step reaches it is
  complete), ``num_train_epochs`` and ``trial_params``.
* The ``training_args.bin`` beside it is a pickle and is never read.

>>> import json, pathlib, tempfile
>>> out = pathlib.Path(tempfile.mkdtemp()) / "bs32"
>>> (out / "checkpoint-20").mkdir(parents=True)
>>> history = [{"epoch": 0.5, "step": 10, "loss": 2.0, "learning_rate": 1e-4},
...            {"epoch": 1.0, "step": 20, "eval_loss": 1.8, "eval_accuracy": 0.4,
...             "eval_runtime": 0.5}]
>>> state = {"global_step": 20, "max_steps": 20, "train_batch_size": 32,
...          "num_train_epochs": 1, "log_history": history}
>>> _ = (out / "checkpoint-20" / "trainer_state.json").write_text(json.dumps(state))
>>> [(r.key, r.params, r.frame.rows()) for r in read_hf_runs(out.parent)]
[('bs32', {'max_steps': 20, 'num_train_epochs': 1, 'train_batch_size': 32}, \
[(10, None, None, 0.0001, 2.0), (20, 0.4, 1.8, None, None)])]
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import polars as pl

from curvekit import structured
from curvekit.errors import IngestError
from curvekit.ingest.csvlogs import skip_folder
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.runs import INT64_MAX, MAX_COLUMNS, RunLog, merge_rows
from curvekit.ingest.select import ALL, FileFilter
from curvekit.ingest.yamlish import param_value
from curvekit.names import check_name

__all__ = ["STATE_FILE", "read_hf_runs"]

STATE_FILE = "trainer_state.json"
MAX_STATE_BYTES = 256 << 20
"""The largest ``trainer_state.json`` read: a history of a million entries is ~200 MB."""
_CHECKPOINT = re.compile(r"^checkpoint-\d+$")
_PARAMS = ("train_batch_size", "max_steps", "num_train_epochs")
# Entries of these keys describe the machine (time, throughput) or the whole run, not the
# model at a step.
_SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second",
                           "train_steps_per_second", "total_flos"})
_MACHINE = re.compile(r"(^|_)(runtime|samples_per_second|steps_per_second)$")


def _load(path: Path, files: SourceFiles) -> dict[str, Any]:
    data = files.read_bytes(path, limit=MAX_STATE_BYTES, refuse="a trainer_state.json is a "
                            "few MB at most: is this the right file?")
    state: dict[str, Any] = structured.loads(
        data, "json", where=str(path), expect=dict,
        error=lambda message, line: IngestError(
            f"{message.removeprefix(f'{path}: ')}; a Trainer writes trainer_state.json as a "
            "JSON object: leave a damaged copy out", path=str(path), line=line))
    if not isinstance(state.get("log_history"), list):
        raise IngestError("not a Hugging Face trainer state: expected a JSON object with a "
                          "log_history list", path=str(path))
    return state


def _rank(path: Path, state: dict[str, Any]) -> tuple[float, int, int]:
    step = state.get("global_step")
    number = float(step) if isinstance(step, int | float) and not isinstance(step, bool) \
        and math.isfinite(step) else -1.0
    return number, len(state["log_history"]), 0 if _CHECKPOINT.match(path.parent.name) else 1


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _frame(state: dict[str, Any], path: Path) -> pl.DataFrame:
    """The history as one row per step: metric columns float64, in order of appearance."""
    steps: list[int] = []
    rows: list[dict[str, float]] = []
    names: dict[str, None] = {}
    for number, entry in enumerate(state["log_history"], 1):
        if not isinstance(entry, dict):
            raise IngestError(f"log_history entry {number} is not an object",
                              path=str(path), line=number)
        if _SUMMARY_KEYS & entry.keys():
            continue  # the end-of-training summary: averages and timings of the whole run
        step: Any = entry.get("step")
        if not _number(step) or not math.isfinite(step) or step != int(step) \
                or not 0 <= step <= INT64_MAX:
            raise IngestError(f"log_history entry {number} has step {step!r}, not a "
                              "non-negative integer", path=str(path), line=number)
        values = {}
        for key, value in entry.items():
            if key in ("step", "epoch") or _MACHINE.search(key) or not _number(value):
                continue  # text (a learning-rate schedule's name) is no measurement
            values[check_name(key, "metric", fix=f"rename it with --map '{key}=<new name>'",
                              error=lambda m: IngestError(m, path=str(path)))] = float(value)
            names.setdefault(key)
        if values:
            steps.append(int(step))
            rows.append(values)
    if len(names) > MAX_COLUMNS:
        raise IngestError(f"the history logs {len(names):,} metrics; curvekit reads at most "
                          f"{MAX_COLUMNS:,} per run", path=str(path))
    columns = sorted(names)
    frame = pl.DataFrame(
        {"step": pl.Series(steps, dtype=pl.Int64),
         **{c: pl.Series([r.get(c) for r in rows], dtype=pl.Float64) for c in columns}})
    return merge_rows(frame, str(path), lambda row: row + 1)


def _params(state: dict[str, Any], path: Path) -> dict[str, Any]:
    params = {k: param_value(state[k]) for k in _PARAMS if _number(state.get(k))}
    trial = state.get("trial_params")
    if isinstance(trial, dict):
        for key, value in trial.items():
            check_name(str(key), "metaparameter", fix="give the run's parameters in a "
                       "manifest ([[runs]] parameters = {...})",
                       error=lambda m: IngestError(m, path=str(path)))
            if isinstance(value, str | int | float | bool) or value is None:
                params[str(key)] = param_value(value)
            else:
                params[str(key)] = structured.dumps(value, sort_keys=True)
    return dict(sorted(params.items()))


def read_hf_runs(source: Path, *, select: FileFilter = ALL,
                 files: SourceFiles | None = None) -> list[RunLog]:
    """One run per output folder under ``source`` (see the module docs); ``select`` chooses
    which ``trainer_state.json`` files (paths relative to ``source``) are read, ``files``
    how (:mod:`curvekit.ingest.files`)."""
    files = files_of(source, files)
    found: dict[Path, list[Path]] = {}
    if source.is_file():
        if source.name != STATE_FILE:
            raise IngestError(f"a Hugging Face Trainer log is a file named {STATE_FILE}",
                              path=str(source))
        paths = [source]
        root = source.parent.parent if _CHECKPOINT.match(source.parent.name) \
            else source.parent
    else:
        root = source
        paths = []
        for here, dirs, names in files.walk(source):
            dirs[:] = sorted(d for d in dirs if not skip_folder(here / d)
                             and select.keeps_folder((here / d).relative_to(source).as_posix()))
            if STATE_FILE in names and select.keeps(
                    (here / STATE_FILE).relative_to(source).as_posix()):
                paths.append(here / STATE_FILE)
    for path in paths:
        folder = path.parent.parent if _CHECKPOINT.match(path.parent.name) else path.parent
        found.setdefault(folder, []).append(path)
    runs = []
    for folder, copies in sorted(found.items()):
        # checkpoint-N holds the state at global step N: only the newest checkpoint and the
        # folder's own file (save_state) can be the most complete, so only they are read.
        numbered = [p for p in copies if _CHECKPOINT.match(p.parent.name)]
        newest = max(numbered, key=lambda p: int(p.parent.name.split("-")[1]), default=None)
        read = [p for p in copies if p not in numbered] + ([newest] if newest else [])
        states = [(p, _load(p, files)) for p in read]
        path, state = max(states, key=lambda item: _rank(*item))
        rel = folder.relative_to(root).as_posix() if folder != root else "."
        key = (root.name or str(root)) if rel == "." else rel
        trial = state.get("trial_name")
        aliases = (str(trial),) if isinstance(trial, str) and trial and trial != key else ()
        runs.append(RunLog(key, str(path), _frame(state, path), _params(state, path),
                           aliases=aliases, files=tuple(str(p) for p in read if p != path)))
    return runs
