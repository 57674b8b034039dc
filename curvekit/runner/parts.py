"""A sweep's work folder: its plan and one Parquet part per finished trial.

Layout::

    <work_dir>/plan.json                                   the sweep (Sweep.to_json)
    <work_dir>/parts/<optimizer>/<batch_size>/<trial_id>.parquet

A part holds the trial's evaluation rows (``step`` and the metric columns) and, in the
Parquet footer under ``curvekit.trial``, its status, steps, metaparameters, seed, device and
timing. Each part is written to a temporary name and renamed into place, so a part exists
whole or not at all: a sweep killed at any moment resumes with every finished trial.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from curvekit import structured
from curvekit.errors import RunError
from curvekit.home import parse_json
from curvekit.outputs import write_file, writing
from curvekit.runner.plan import Sweep, TrialResult, TrialSpec

__all__ = ["PLAN_FILE", "FinishedTrial", "finished_trials", "open_work_dir", "part_path",
           "write_part"]

PLAN_FILE = "plan.json"
TRIAL_KEY = b"curvekit.trial"
FinishedTrial = tuple[dict[str, Any], pa.Table, Path]
"""A part's footer metadata, its table of rows and its path."""


def open_work_dir(work_dir: Path, sweep: Sweep) -> Sweep:
    """Create ``work_dir`` for ``sweep``, or check that it holds the same sweep.

    A folder whose plan differs in anything but the number of trials and added batch sizes
    belongs to another sweep: :class:`RunError` names the differences. Asking for more
    trials or batch sizes than before extends the plan (the finished trials stay valid).
    """
    plan = work_dir / PLAN_FILE
    with writing("the sweep's work folder", work_dir):
        if plan.is_file():
            fix = "use another --work-dir, or move that folder away"
            data = structured.load(plan, kind="json",
                                   error=lambda m, _: RunError(f"{m}; {fix}"))
            try:
                diff = Sweep.from_json(data).differences(sweep)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise RunError(f"{plan} is not a curvekit sweep plan ({exc!r}); {fix}") from exc
            if diff:
                raise RunError(f"{work_dir} holds another sweep (it differs in "
                               f"{', '.join(diff)}); rerun with the same options to resume "
                               "it, or use another --work-dir")
        work_dir.mkdir(parents=True, exist_ok=True)
        for partial in work_dir.glob("parts/*/*/.*.parquet.*"):  # written when the sweep died
            partial.unlink(missing_ok=True)
        for partial in [*work_dir.glob(".curvekit-*.tmp"),
                        *work_dir.glob("parts/*/*/.curvekit-*.tmp")]:
            partial.unlink(missing_ok=True)
    write_file(plan, structured.dumps(sweep.to_json(), indent=1, sort_keys=True) + "\n",
               "the sweep's plan")
    return sweep


def part_path(work_dir: Path, spec: TrialSpec) -> Path:
    """Where a trial's part lives."""
    return work_dir / "parts" / spec.optimizer / str(spec.batch_size) / f"{spec.trial_id}.parquet"


def _metadata(spec: TrialSpec) -> dict[str, Any]:
    data = asdict(spec)
    for transient in ("device", "threads"):  # how it ran, not what it is
        data.pop(transient)
    if not data["noise_micro_batches"]:  # parts written before it existed stay valid
        data.pop("noise_micro_batches")
    return data


def write_part(work_dir: Path, result: TrialResult) -> Path:
    """Write a finished trial's part atomically; returns its path (a full disk or a
    read-only work folder: :class:`~curvekit.errors.OutputError`, earlier parts kept)."""
    spec = result.spec
    columns = {"step": pa.array(result.columns["step"], pa.int64())}
    for name in sorted(c for c in result.columns if c != "step"):
        columns[name] = pa.array(result.columns[name], pa.float64())
    meta = {"spec": _metadata(spec), "status": result.status, "steps": result.steps,
            "seconds": result.seconds, "device": result.device,
            "torch_version": result.torch_version}
    table = pa.table(columns).replace_schema_metadata(
        {TRIAL_KEY: structured.dumps(meta).encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return write_file(part_path(work_dir, spec), sink.getvalue().to_pybytes(),
                      "a finished trial's part")


def finished_trials(work_dir: Path, specs: list[TrialSpec]) -> dict[int, FinishedTrial]:
    """The parts already written for ``specs``, by index into ``specs``.

    A part whose trial differs from its spec (metaparameters, seed, budget) was not made by
    this plan: :class:`RunError`. Unreadable parts (a disk that filled up) are ignored and
    their trials run again.
    """
    done: dict[int, FinishedTrial] = {}
    for i, spec in enumerate(specs):
        path = part_path(work_dir, spec)
        if not path.is_file():
            continue
        try:
            table = pq.read_table(path)
            meta = parse_json((table.schema.metadata or {})[TRIAL_KEY].decode(), RunError)
        except (OSError, pa.ArrowException, KeyError, ValueError, RunError):
            continue
        if meta.get("spec") != json.loads(structured.dumps(_metadata(spec))):
            raise RunError(f"{path} holds a trial that differs from this sweep's plan; "
                           "delete it (it will run again) or use another --work-dir")
        done[i] = (meta, table.replace_schema_metadata(None), path)
    return done
