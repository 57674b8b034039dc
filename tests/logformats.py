"""Look-alikes of the logs of Sacred, DVCLive, timm, Ultralytics, JSON-lines training
scripts, MLflow's SQLite store and W&B's run folders, written byte for byte as those
libraries write them (none of them is installed here; MLflow's SQLite store is written with
``sqlite3`` in MLflow's own table layout).

Each writer follows the library's writing code:

* Sacred's ``FileStorageObserver.save_json``: ``json.dump(flatten(obj), f, sort_keys=True,
  indent=2)`` for ``run.json``, ``config.json`` and ``metrics.json`` (timestamps as ISO
  text);
* DVCLive 2.x/3.x ``plots/metrics/<name>.tsv``: a header ``step\\t<last part of the name>``
  and one ``f"{step}\\t{value}"`` line per ``log_metric``; ``params.yaml`` by ``yaml.dump``;
* timm's ``update_summary``: ``csv.DictWriter`` rows of ``epoch`` then ``train_*`` and
  ``eval_*``; ``args.yaml`` by ``yaml.safe_dump``;
* Ultralytics' ``save_metrics`` (8.0): ``'%23s,' * n`` for the header and ``'%23.5g,' * n``
  per epoch, each with the last comma stripped; YOLOv5's ``'%20s,'`` / ``'%20.5g,'``;
* DETR's ``main.py``: ``f.write(json.dumps(log_stats) + "\\n")``;
* W&B 0.8: ``wandb-history.jsonl`` one ``json.dumps(row)`` per ``wandb.log``,
  ``config.yaml`` as ``{key: {desc: null, value: ...}}`` with ``wandb_version: 1``.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from curvekit.ingest.mlflow_sqlite import SCHEMA

Series = tuple[Sequence[int], Sequence[float]]


def write_sacred_run(folder: Path, *, config: Mapping[str, Any],
                     metrics: Mapping[str, Series], status: str = "COMPLETED",
                     start: str = "2020-07-07T00:42:35.061832") -> Path:
    folder.mkdir(parents=True, exist_ok=True)

    def save(name: str, obj: Any) -> None:
        with open(folder / name, "w") as f:
            json.dump(obj, f, sort_keys=True, indent=2)

    save("run.json", {"artifacts": [], "command": "main", "experiment": {"name": "exp"},
                      "heartbeat": start, "host": {"hostname": "h"}, "meta": {},
                      "resources": [], "result": None, "start_time": start,
                      "status": status, "stop_time": start})
    save("config.json", dict(config))
    save("metrics.json", {name: {"steps": list(steps), "values": list(values),
                                 "timestamps": [f"2020-07-07T01:{i // 60 % 60:02d}:"
                                                f"{i % 60:02d}.000001"
                                                for i in range(len(steps))]}
                          for name, (steps, values) in metrics.items()})
    return folder


def write_dvclive(folder: Path, metrics: Mapping[str, Series],
                  params: Mapping[str, Any] | None = None) -> Path:
    for name, (steps, values) in metrics.items():
        path = folder / "plots" / "metrics" / f"{name}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"step\t{name.rsplit('/', 1)[-1]}"] + [f"{s}\t{v}" for s, v in
                                                        zip(steps, values, strict=True)]
        path.write_text("\n".join(lines) + "\n")
    folder.mkdir(parents=True, exist_ok=True)
    if params is not None:
        (folder / "params.yaml").write_text(yaml.dump(dict(params)))
    (folder / "dvc.yaml").write_text("params:\n- params.yaml\nmetrics:\n- metrics.json\n"
                                     "plots:\n- plots/metrics:\n    x: step\n")
    return folder


def write_timm(folder: Path, rows: Sequence[Mapping[str, float]],
               args: Mapping[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "args.yaml").write_text(yaml.safe_dump(dict(args), default_flow_style=False))
    with open(folder / "summary.csv", "w") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow(row)
    return folder


def write_ultralytics(folder: Path, rows: Sequence[Mapping[str, float]],
                      args: Mapping[str, Any], *, v5: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ("opt.yaml" if v5 else "args.yaml")).write_text(
        yaml.safe_dump(dict(args), sort_keys=False))
    width = 20 if v5 else 23
    keys = list(rows[0])
    n = len(keys)
    text = (f"%{width}s," * n % tuple(keys)).rstrip(",") + "\n"
    for row in rows:
        text += (f"%{width}.5g," * n % tuple(row[k] for k in keys)).rstrip(",") + "\n"
    (folder / "results.csv").write_text(text)
    return folder


def write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return path


def write_mlflow_db(path: Path, experiments: Mapping[int, str],
                    runs: Sequence[Mapping[str, Any]]) -> Path:
    """``runs``: dicts with ``id``, ``experiment``, ``status``, ``start``, ``params``,
    ``metrics`` ({key: [(step, value, timestamp)]}), and optionally ``name``, ``tags``,
    ``deleted``. NaN and infinities are stored as MLflow's SQL store stores them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    for eid, name in experiments.items():
        con.execute("INSERT INTO experiments VALUES (?, ?, ?, 'active', 0, 0)",
                    (eid, name, f"file:///tmp/mlruns/{eid}"))
    for run in runs:
        con.execute("INSERT INTO runs (run_uuid, name, status, start_time, end_time, "
                    "lifecycle_stage, experiment_id, artifact_uri) VALUES (?,?,?,?,?,?,?,?)",
                    (run["id"], run.get("name"), run["status"], run["start"], run["start"],
                     "deleted" if run.get("deleted") else "active", run["experiment"],
                     "mlflow-artifacts:/x"))
        for key, value in run.get("params", {}).items():
            con.execute("INSERT INTO params VALUES (?, ?, ?)", (key, str(value), run["id"]))
        for key, value in {"mlflow.runName": run.get("name") or run["id"],
                           **run.get("tags", {})}.items():
            con.execute("INSERT INTO tags VALUES (?, ?, ?)", (key, value, run["id"]))
        for key, points in run.get("metrics", {}).items():
            for step, value, stamp in points:
                is_nan = value != value
                stored = 0.0 if is_nan else max(min(value, 1.7976931348623157e308),
                                                -1.7976931348623157e308)
                con.execute("INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?)",
                            (key, stored, stamp, run["id"], step, is_nan))
    con.commit()
    con.close()
    return path


def write_wandb08(folder: Path, rows: Sequence[Mapping[str, Any]],
                  config: Mapping[str, Any], state: str = "finished") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "wandb-history.jsonl", "w") as f:
        for step, row in enumerate(rows):
            f.write(json.dumps({**row, "_runtime": 1.5 * step, "_timestamp": 1582070918.2 + step,
                                "_step": step}) + "\n")
    wrapped = {"wandb_version": 1, "_wandb": {"desc": None, "value": {"cli_version": "0.8.27"}},
               **{k: {"desc": None, "value": v} for k, v in config.items()}}
    (folder / "config.yaml").write_text(yaml.dump(wrapped, default_flow_style=False))
    (folder / "wandb-metadata.json").write_text(json.dumps({"state": state, "name": "run"},
                                                           indent=4))
    (folder / "wandb-summary.json").write_text(json.dumps(rows[-1] if rows else {}))
    return folder
