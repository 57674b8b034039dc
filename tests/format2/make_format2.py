"""Make the frozen store of format 2 that tests/test_upgrade_format2.py upgrades.

Run with the code of the last commit that wrote format 2 on the import path, from a folder
outside the repository (``python -m`` and ``-c`` put the working folder first)::

    git worktree add --detach /tmp/format2-code <commit before store_format 3>
    cd /tmp && PYTHONPATH=/tmp/format2-code python /path/to/tests/format2/make_format2.py

It converts ``tiny_archive`` (the release's layout and quirks) and adds a workload whose
names are hostile (metrics named ``step``, ``Step``, ``metric``, ``batch_size``,
``val/err`` beside ``VAL/ERR``, text beyond ASCII), whose metrics are logged at different
steps (nulls between), with a repeated step, NaN and infinities, a trial without
evaluations and a study whose evaluations hold no metric at all; then copies the snapshot
into ``tests/format2/store`` with the answers that code gave (``answers.json``: each
workload's metrics, best and steps to result, and the sha256 of its wide measurements
frame as CSV and of every row of the measurements view as CSV).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa

import curvekit
from curvekit.records import StudyKey, StudyRecord, TrialRecord
from curvekit.release.synthetic import tiny_archive
from curvekit.store.layout import STORE_FORMAT
from curvekit.store.update import WorkloadData, add_workload

HERE = Path(__file__).resolve().parent
MINE = "mine/Net/sgd"


def _mine() -> WorkloadData:
    keys = [StudyKey("mine", "Net", "sgd", bs) for bs in (16, 32, 64)]
    studies = [StudyRecord(k, "mine", False, 100, {}, {}, "runs.toml") for k in keys]
    trials, measurements = [], {}
    for k in keys[:2]:
        for t in (0, 1, 2):
            trials.append(TrialRecord(k, t, "COMPLETE", 100,
                                      {"learning_rate": 0.1 * (t + 1), "Step": t,
                                       "metric": "cosine"}, f"bs{k.batch_size}-{t}.csv"))
            steps = list(range(0, 100 + 10 * t, 10))
            if t == 2:  # a trial without evaluations
                measurements[(k, t)] = pa.table({"step": pa.array([], pa.int64()),
                                                 "val/err": pa.array([], pa.float64())})
                continue
            rows = {"step": [], "metric": [], "value": []}
            for s in steps:
                for name, value in (("val/err", 0.9 / (1 + s / 50 + t)),
                                    ("VAL/ERR", 1 - 0.9 / (1 + s / 50 + t)),
                                    ("step", float(s)), ("Step", -float(s)),
                                    ("metric", math.nan if s == 30 else 0.5),
                                    ("batch_size", math.inf if s == 40 else 2.0),
                                    ("é/δ", 0.25)):
                    if name in ("VAL/ERR", "é/δ") and s % 20:  # logged every other time
                        continue
                    rows["step"].append(s)
                    rows["metric"].append(name)
                    rows["value"].append(value)
            measurements[(k, t)] = pa.table(rows)
    k = keys[2]  # a study whose evaluations hold no metric at all
    trials.append(TrialRecord(k, 0, "INCOMPLETE", 20, {"learning_rate": 0.2}, "bs64.csv"))
    measurements[(k, 0)] = pa.table({"step": pa.array([0, 10, 20], pa.int64())})
    return WorkloadData(studies, trials, measurements, {"format": "example"})


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> None:
    assert STORE_FORMAT == 2, "run with the code of the last commit that wrote format 2"
    tmp = Path(tempfile.mkdtemp())
    archive = tmp / "tiny.tar.bz2"
    manifest = tiny_archive(archive)
    home = tmp / "home"
    curvekit.fetch(home=home, archive=archive, manifest=manifest)
    add_workload(home, _mine())
    store = curvekit.open(home)
    answers = {}
    for workload in store.workloads():
        metrics = store.metrics(workload)
        metric = next((m for m in ("val/classification_error", "val/err") if m in metrics),
                      metrics[-1])
        best = curvekit.best(store, curvekit.Selection(workload, metric), explain=False)
        goal = float(best[metric].median())  # type: ignore[arg-type]
        steps = curvekit.steps_to_result(store, curvekit.Selection(workload, metric, goal),
                                         explain=False)
        wide = store.measurements(workload)
        answers[workload] = {"metric": metric, "goal": goal, "metrics": metrics,
                             "best": best.write_json(), "steps": steps.write_json(),
                             "measurements": _digest(wide.write_csv())}  # type: ignore[union-attr]
    answers["(sql)"] = {"rows": _digest(store.sql(
        "select * from measurements order by all").write_csv())}
    target = HERE / "store"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(store.path, target, ignore=shutil.ignore_patterns(".lease"))
    (HERE / "answers.json").write_text(json.dumps(answers, indent=1, sort_keys=True) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
