"""Turn finished trials into the store's records: three flat tables, then ``WorkloadData``.

The runner's results take one intermediate form, three Arrow tables (the same shape the
shipped demo data set is stored in):

* ``studies``: base_dir, model, optimizer, batch_size, dataset, train_steps,
  parameter_configs (JSON), extra (JSON), member;
* ``trials``: base_dir, model, optimizer, batch_size, trial_id, status, steps,
  parameters (JSON), member;
* ``measurements``: base_dir, model, optimizer, batch_size, trial_id, step, one float64
  column per metric.

:func:`workload_data` turns them into one ``WorkloadData`` per workload for
:func:`curvekit.store.update.add_workload`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from curvekit import structured
from curvekit._version import __version__
from curvekit.records import StudyKey, StudyRecord, TrialRecord, Workload
from curvekit.runner.names import model_directory
from curvekit.runner.parts import PLAN_FILE, FinishedTrial
from curvekit.runner.plan import Sweep, TrialSpec

if TYPE_CHECKING:
    from curvekit.store.update import WorkloadData

__all__ = ["KEY_COLUMNS", "sweep_tables", "workload_data"]

KEY_COLUMNS = ("base_dir", "model", "optimizer", "batch_size")


def _json(value: Any) -> str:
    return structured.dumps(value, sort_keys=True, separators=(",", ":"))


def sweep_tables(sweep: Sweep, specs: Sequence[TrialSpec],
                 finished: Mapping[int, FinishedTrial], work_dir: Path, *,
                 adaptive: Mapping[str, Any] | None = None) -> dict[str, pa.Table]:
    """The three tables of a sweep whose trials (``specs``) have all finished.

    Only the batch sizes of ``specs`` become studies, each with as many trials as it has
    there; ``adaptive`` is an adaptive run's record, kept in every study's
    ``extra.runner.adaptive``.
    """
    model = model_directory(sweep.model)
    devices: dict[tuple[str, int], set[str]] = {}
    trials: list[dict[str, Any]] = []
    parts: list[pa.Table] = []
    for i, spec in enumerate(specs):
        meta, table, path = finished[i]
        devices.setdefault((spec.optimizer, spec.batch_size), set()).add(meta["device"])
        key = {"base_dir": sweep.base_dir, "model": model, "optimizer": spec.optimizer,
               "batch_size": spec.batch_size}
        trials.append({**key, "trial_id": spec.trial_id, "status": meta["status"],
                       "steps": meta["steps"], "parameters": _json(spec.parameters),
                       "member": str(path)})
        n = table.num_rows
        prefix = {k: pa.array([v] * n, pa.int64() if k == "batch_size" else pa.string())
                  for k, v in key.items()}
        prefix["trial_id"] = pa.array([spec.trial_id] * n, pa.int64())
        parts.append(pa.table({**prefix, **{c: table[c] for c in table.column_names}}))
    torch_versions = sorted({m["torch_version"] for m, _, _ in finished.values()})
    runner: dict[str, Any] = {"curvekit": __version__, "torch": torch_versions,
                              "trials": sweep.trials, "seed": sweep.seed,
                              "sampler": sweep.sampler, "eval_every": sweep.eval_every,
                              "model": sweep.model}
    if sweep.protocol is not None:  # how the single point of each study was chosen
        runner["protocol"] = sweep.protocol.to_json()
    if adaptive is not None:
        runner["adaptive"] = dict(adaptive)
    counts = Counter((spec.optimizer, spec.batch_size) for spec in specs)
    studies = [{"base_dir": sweep.base_dir, "model": model, "optimizer": sweep.directory(opt),
                "batch_size": b, "dataset": sweep.dataset, "train_steps": sweep.steps[b],
                "parameter_configs": _json(sweep.spaces[opt][b]),
                "extra": _json({"runner": {
                    **runner, "devices": sorted(devices.get((sweep.directory(opt), b), ())),
                    **({} if adaptive is None else
                       {"trials": counts[(sweep.directory(opt), b)]})}}),
                "member": str(work_dir / PLAN_FILE)}
               for opt in sweep.optimizers for b in sweep.batch_sizes
               if counts[(sweep.directory(opt), b)]]
    return {"studies": pa.Table.from_pylist(studies), "trials": pa.Table.from_pylist(trials),
            "measurements": pa.concat_tables(parts, promote_options="default")}


def workload_data(tables: Mapping[str, pa.Table], origin: Mapping[str, Any]
                  ) -> list[WorkloadData]:
    """One ``WorkloadData`` per workload in ``tables`` (see the module docstring)."""
    from curvekit.store.update import WorkloadData

    def key(row: Mapping[str, Any]) -> StudyKey:
        return StudyKey(row["base_dir"], row["model"], row["optimizer"], int(row["batch_size"]))

    studies: dict[str, list[StudyRecord]] = {}
    for row in tables["studies"].to_pylist():
        k = key(row)
        studies.setdefault(k.workload, []).append(StudyRecord(
            k, row["dataset"], False, int(row["train_steps"]),
            json.loads(row["parameter_configs"]), json.loads(row["extra"]), row["member"]))
    trials: dict[str, list[TrialRecord]] = {}
    for row in tables["trials"].to_pylist():
        k = key(row)
        trials.setdefault(k.workload, []).append(TrialRecord(
            k, int(row["trial_id"]), row["status"], int(row["steps"]),
            json.loads(row["parameters"]), row["member"]))
    measurements = tables["measurements"]
    metrics = [c for c in measurements.column_names
               if c not in (*KEY_COLUMNS, "trial_id", "step")]
    out = []
    for workload, records in studies.items():
        base_dir, model, optimizer = Workload.known(workload)
        rows = measurements.filter(
            pc.and_(pc.and_(pc.equal(measurements["base_dir"], base_dir),
                            pc.equal(measurements["model"], model)),
                    pc.equal(measurements["optimizer"], optimizer)))
        tables_by_trial: dict[tuple[StudyKey, int], pa.Table] = {}
        for trial in trials.get(workload, []):
            mask = pc.and_(pc.equal(rows["batch_size"], trial.key.batch_size),
                           pc.equal(rows["trial_id"], trial.trial_id))
            part = rows.filter(mask).select(["step", *metrics]).sort_by("step")
            # A metric a workload never reports (e.g. no test split) is left out.
            keep = ["step", *[m for m in metrics if part[m].null_count < part.num_rows
                              or part.num_rows == 0]]
            tables_by_trial[(trial.key, trial.trial_id)] = part.select(keep)
        out.append(WorkloadData(studies=records, trials=trials.get(workload, []),
                                measurements=tables_by_trial,
                                origin={**origin, "workload": workload}))
    return out
