"""Benchmark: importing training logs with ``curvekit add``.

Side by side in one run, each in a fresh process with the peak memory of its process tree:

* **CSV**: 1,000 runs of 1,000 evaluations each, as PyTorch Lightning's CSVLogger writes them
  (training and validation metrics on separate rows: 2,000 rows per file), 10 batch sizes,
  with a run manifest: ``curvekit add`` against a naive loader (pandas ``read_csv`` per
  file, tag each frame with its run and batch size, ``concat``, write one Parquet file; no
  checks, no merging of the sparse rows);
* **TensorBoard**: 100 runs x 1,000 steps x 4 scalars written by tensorboardX:
  ``curvekit add`` against TensorBoard's own loader (``EventAccumulator`` keeping every
  scalar, then pandas);
* **MLflow**: 100 runs x 1,000 steps x 4 metrics in a file store written by MLflow:
  ``curvekit add`` against ``MlflowClient.get_metric_history`` per run and metric, then
  pandas;
* **W&B chart exports**: 100 runs x 1,000 steps in 2 charts (train and validation loss),
  as the web UI's 'Export as CSV' writes them (every cell quoted, ``__MIN``/``__MAX``
  companions): ``curvekit add`` (one trial per run) against pandas (``read_csv``, melt the
  ``<run> - <metric>`` columns, pivot);
* **AlgoPerf**: 100 trial folders of 200 evaluations each, beside each a 20,000-row
  ``measurements.csv`` and ``hparams.json``: ``curvekit add`` (auto-detected) against pandas
  reading each ``eval_measurements.csv``.
* **Hugging Face Trainer**: 100 output folders, each with 10 ``checkpoint-*`` copies of its
  ``trainer_state.json`` (the history grows checkpoint by checkpoint) and the final one
  beside them: 1,000 steps, training entries every step and evaluations every 10 steps:
  ``curvekit add`` (which reads every copy to pick the most complete) against ``json.load``
  of each folder's final file, then pandas.

* **Sacred, DVCLive, timm, Ultralytics, JSON lines, MLflow SQLite, W&B run folders**: a
  realistic sweep of each, 50 runs x 100 epochs (5 batch sizes), written as those libraries
  write them (``tests/logformats.py``): ``curvekit add`` against pandas reading the same
  files (``json.load`` / ``read_csv`` / ``read_json(lines=True)`` / ``read_sql``) into one
  Parquet file, with no checks.

Usage::

    python benchmarks/add.py                  # all cases; the logs are generated once
    python benchmarks/add.py --only csv
    python benchmarks/add.py --only new       # the seven formats of 50 runs x 100 epochs
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, save, timed

BATCH_SIZES = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)

NAIVE_CSV = r"""
import glob, os, sys, tomllib
import pandas as pd
root = sys.argv[1]
with open(os.path.join(root, "runs.toml"), "rb") as fh:
    sizes = {r["run"]: r["batch_size"] for r in tomllib.load(fh)["runs"]}
frames = []
for path in sorted(glob.glob(os.path.join(root, "**", "metrics.csv"), recursive=True)):
    run = os.path.relpath(os.path.dirname(path), root)
    frame = pd.read_csv(path)
    frame["run"], frame["batch_size"] = run, sizes[run]
    frames.append(frame)
pd.concat(frames, ignore_index=True).to_parquet(sys.argv[2])
"""

NAIVE_TENSORBOARD = r"""
import os, sys
import pandas as pd
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
root = sys.argv[1]
frames = []
for run in sorted(os.listdir(root)):
    acc = EventAccumulator(os.path.join(root, run), size_guidance={"scalars": 0})
    acc.Reload()
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        frames.append(pd.DataFrame({"run": run, "tag": tag, "step": [e.step for e in events],
                                    "value": [e.value for e in events]}))
data = pd.concat(frames, ignore_index=True)
data.pivot_table(index=["run", "step"], columns="tag", values="value").reset_index(
    ).to_parquet(sys.argv[2])
"""

NAIVE_MLFLOW = r"""
import os, sys
import pandas as pd
from mlflow.tracking import MlflowClient
client = MlflowClient(tracking_uri="file:" + sys.argv[1])
experiment = client.get_experiment_by_name("sweep")
frames = []
for run in client.search_runs([experiment.experiment_id], max_results=10000):
    for key in run.data.metrics:
        history = client.get_metric_history(run.info.run_id, key)
        frames.append(pd.DataFrame({"run": run.info.run_id, "metric": key,
                                    "step": [m.step for m in history],
                                    "value": [m.value for m in history]}))
data = pd.concat(frames, ignore_index=True)
data.pivot_table(index=["run", "step"], columns="metric", values="value").reset_index(
    ).to_parquet(sys.argv[2])
"""

NAIVE_CHART = r"""
import glob, os, sys
import pandas as pd
frames = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.csv"))):
    wide = pd.read_csv(path)
    wide = wide[[c for c in wide.columns if not c.endswith(("__MIN", "__MAX"))]]
    long = wide.melt(id_vars="Step", var_name="column").dropna()
    long[["run", "metric"]] = long["column"].str.rsplit(" - ", n=1, expand=True)
    frames.append(long.drop(columns="column"))
data = pd.concat(frames, ignore_index=True)
data.pivot_table(index=["run", "Step"], columns="metric", values="value").reset_index(
    ).to_parquet(sys.argv[2])
"""

NAIVE_ALGOPERF = r"""
import glob, json, os, sys
import pandas as pd
frames = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "trial_*", "eval_measurements.csv"))):
    frame = pd.read_csv(path)
    frame["trial"] = os.path.basename(os.path.dirname(path))
    with open(os.path.join(os.path.dirname(path), "hparams.json")) as fh:
        frame = frame.assign(**json.load(fh))
    frames.append(frame)
pd.concat(frames, ignore_index=True).to_parquet(sys.argv[2])
"""


def make_chart_exports(root: Path, runs: int, evals: int) -> Path:
    """Two chart exports (train and validation loss) of ``runs`` runs, all cells quoted."""
    if (root / "runs.toml").is_file():
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    names = [f"sweep-{i}-{random.Random(i).randrange(10**6)}" for i in range(runs)]
    for metric, shift in (("train/loss", 0.0), ("val/loss", 0.05)):
        header = ["Step"] + [f"{n} - {metric}{c}" for n in names for c in ("", "__MIN",
                                                                              "__MAX")]
        lines = [",".join(f'"{h}"' for h in header)]
        for e in range(evals):
            step = e * 10
            cells = [str(step)]
            for i in range(runs):
                value = "" if (i % 7 == 0 and e > evals // 2) else \
                    f"{_curve(BATCH_SIZES[i % len(BATCH_SIZES)], i, step) + shift:.6f}"
                cells += [value] * 3
            lines.append(",".join(f'"{c}"' for c in cells))
        (root / f"wandb_export_{metric.replace('/', '_')}.csv").write_text(
            "\n".join(lines) + "\n")
    (root / "runs.toml").write_text("".join(
        f'[[runs]]\nrun = "{n}"\nbatch_size = {BATCH_SIZES[i % len(BATCH_SIZES)]}\n'
        for i, n in enumerate(names)))
    return root


def make_algoperf_logs(root: Path, trials: int, evals: int) -> Path:
    """AlgoPerf trial folders: eval_measurements.csv, a 100x longer measurements.csv,
    hparams.json and flags."""
    if (root / "runs.toml").is_file():
        return root
    shutil.rmtree(root, ignore_errors=True)
    for t in range(1, trials + 1):
        folder = root / "wmt_jax" / f"trial_{t}"
        folder.mkdir(parents=True)
        every = 100
        rows = ["accumulated_eval_time,accumulated_logging_time,accumulated_submission_time,"
                "global_step,preemption_count,score,test/bleu,test/loss,test/num_examples,"
                "total_duration,train/bleu,train/loss,validation/bleu,validation/loss,"
                "validation/num_examples"]
        for e in range(evals):
            step = 1 + e * every
            err = _curve(256, t, step)
            rows.append(f"{e * 4.1},{e * 0.03},{e * 80.2},{step},0,{e * 80.2},{30 - err},"
                        f"{err},3003,{e * 85.0},{31 - err},{err * 0.9},{29 - err},"
                        f"{err * 1.1},3000")
        (folder / "eval_measurements.csv").write_text("\n".join(rows) + "\n")
        per_step = ["global_step,grad_norm,loss"] + [
            f"{s},{1 + (s % 13) / 10},{_curve(256, t, s):.6f}" for s in range(evals * every)]
        (folder / "measurements.csv").write_text("\n".join(per_step) + "\n")
        (folder / "hparams.json").write_text(
            f'{{"learning_rate": {0.001 * t}, "beta1": 0.9, "warmup_factor": 0.05}}')
        (folder / "flags_0.json").write_text('{"framework": "jax"}')
    (root / "runs.toml").write_text('[[runs]]\nrun = "trial_*"\nbatch_size = 256\n')
    return root


NAIVE_HF = r"""
import json, os, sys
import pandas as pd
root = sys.argv[1]
frames = []
for run in sorted(r for r in os.listdir(root) if not r.startswith(".")):
    with open(os.path.join(root, run, "trainer_state.json")) as fh:
        state = json.load(fh)
    frame = pd.DataFrame([e for e in state["log_history"] if "train_runtime" not in e])
    frame["run"], frame["batch_size"] = run, state["train_batch_size"]
    frames.append(frame.groupby(["run", "step"], as_index=False).first())
pd.concat(frames, ignore_index=True).to_parquet(sys.argv[2])
"""


def _curve(bs: int, trial: int, step: int) -> float:
    s_goal = 4000 * (1 + 512 / bs) * (1 + trial / 20)
    return 0.9 * math.exp(-math.log(0.9 / 0.1) * step / s_goal)


def make_csv_logs(root: Path, runs: int, evals: int) -> Path:
    """Lightning CSVLogger folders (version_N/metrics.csv) and a run manifest."""
    if (root / "runs.toml").exists():
        return root
    start = time.perf_counter()
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(0)
    entries = []
    for n in range(runs):
        bs = BATCH_SIZES[n % len(BATCH_SIZES)]
        trial = n // len(BATCH_SIZES)
        folder = root / f"version_{n}"
        folder.mkdir(parents=True)
        last = int(12000 * (1 + 512 / bs))
        lines = ["train_loss,epoch,step,val_loss,val_acc"]
        for i in range(evals):
            step = i * last // (evals - 1)
            err = _curve(bs, trial, step) * (1 + 0.02 * rng.random())
            lines.append(f"{2.3 * err * 0.9!r},{i // 10},{step},,")
            lines.append(f",{i // 10},{step},{2.3 * err!r},{1 - err!r}")
        (folder / "metrics.csv").write_text("\n".join(lines) + "\n")
        lr = 10 ** rng.uniform(-3, 0)
        entries.append(f'[[runs]]\nrun = "version_{n}"\nbatch_size = {bs}\n'
                       f"parameters = {{ learning_rate = {lr!r}, momentum = 0.9 }}\n")
    (root / "runs.toml").write_text("".join(entries))
    print(f"wrote {runs} CSV logs in {time.perf_counter() - start:.0f} s", flush=True)
    return root


def make_tensorboard_logs(root: Path, runs: int, evals: int) -> Path:
    if (root / ".done").exists():
        return root
    from tensorboardX import SummaryWriter

    start = time.perf_counter()
    shutil.rmtree(root, ignore_errors=True)
    for n in range(runs):
        bs = BATCH_SIZES[n % len(BATCH_SIZES)]
        with SummaryWriter(str(root / f"run_{n:03d}")) as writer:
            last = int(12000 * (1 + 512 / bs))
            for i in range(evals):
                step = i * last // (evals - 1)
                err = _curve(bs, n // len(BATCH_SIZES), step)
                writer.add_scalar("train/loss", 2.1 * err, step)
                writer.add_scalar("val/loss", 2.3 * err, step)
                writer.add_scalar("val/acc", 1 - err, step)
                writer.add_scalar("lr", 0.1, step)
            writer.add_hparams({"batch_size": bs, "lr": 0.1}, {"hparam/none": 0.0},
                               name="hparams")
    (root / ".done").write_text("")
    print(f"wrote {runs} TensorBoard runs in {time.perf_counter() - start:.0f} s", flush=True)
    return root


def make_mlflow_logs(root: Path, runs: int, evals: int) -> Path:
    if (root / ".done").exists():
        return root / "mlruns" / (root / ".done").read_text().strip()
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    start = time.perf_counter()
    shutil.rmtree(root, ignore_errors=True)
    client = MlflowClient(tracking_uri=f"file:{root / 'mlruns'}")
    experiment = client.create_experiment("sweep")
    for n in range(runs):
        bs = BATCH_SIZES[n % len(BATCH_SIZES)]
        run = client.create_run(experiment).info.run_id
        last = int(12000 * (1 + 512 / bs))
        metrics = []
        for i in range(evals):
            step = i * last // (evals - 1)
            err = _curve(bs, n // len(BATCH_SIZES), step)
            for key, value in (("train_loss", 2.1 * err), ("val_loss", 2.3 * err),
                               ("val_accuracy", 1 - err), ("lr", 0.1)):
                metrics.append(Metric(key, value, 1_700_000_000_000 + i, step))
        for k in range(0, len(metrics), 1000):
            client.log_batch(run, metrics=metrics[k:k + 1000],
                             params=[Param("batch_size", str(bs)),
                                     Param("learning_rate", "0.1")] if k == 0 else [])
        client.set_terminated(run)
    (root / ".done").write_text(str(experiment))
    print(f"wrote {runs} MLflow runs in {time.perf_counter() - start:.0f} s", flush=True)
    return root / "mlruns" / str(experiment)


def make_hf_logs(root: Path, runs: int, evals: int) -> Path:
    """Trainer output folders: checkpoint-* copies of a growing trainer_state.json."""
    if (root / ".done").exists():
        return root
    import json

    start = time.perf_counter()
    shutil.rmtree(root, ignore_errors=True)
    for n in range(runs):
        bs = BATCH_SIZES[n % len(BATCH_SIZES)]
        folder = root / f"run_{n:03d}"
        history: list[dict[str, float]] = []
        for step in range(1, evals + 1):
            err = _curve(bs, n // len(BATCH_SIZES), step * 10)
            history.append({"epoch": step / evals, "step": step, "loss": 2.1 * err,
                            "grad_norm": 1.0, "learning_rate": 0.1 * (1 - step / evals)})
            if step % 10 == 0:
                history.append({"epoch": step / evals, "step": step, "eval_loss": 2.3 * err,
                                "eval_accuracy": 1 - err, "eval_runtime": 1.0,
                                "eval_samples_per_second": 100.0,
                                "eval_steps_per_second": 10.0})
            if step % (evals // 10) == 0:
                state = {"global_step": step, "max_steps": evals, "train_batch_size": bs,
                         "num_train_epochs": 1, "log_history": history}
                (folder / f"checkpoint-{step}").mkdir(parents=True)
                (folder / f"checkpoint-{step}" / "trainer_state.json").write_text(
                    json.dumps(state, indent=2))
        history.append({"epoch": 1.0, "step": evals, "train_loss": 1.0, "train_runtime": 9.0,
                        "train_samples_per_second": 1.0, "train_steps_per_second": 1.0,
                        "total_flos": 1.0})
        (folder / "trainer_state.json").write_text(json.dumps(
            {"global_step": evals, "max_steps": evals, "train_batch_size": bs,
             "num_train_epochs": 1, "log_history": history}, indent=2))
    (root / ".done").write_text("")
    print(f"wrote {runs} Trainer folders in {time.perf_counter() - start:.0f} s", flush=True)
    return root


NEW_FORMATS = ("sacred", "dvclive", "timm", "ultralytics", "jsonl", "mlflow-sqlite",
               "wandb-local")
NEW_BATCH_SIZES = (32, 64, 128, 256, 512)

NAIVE_NEW = {
    "sacred": r"""
import glob, json, os, sys
import pandas as pd
frames = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*", "metrics.json"))):
    with open(path) as fh:
        metrics = json.load(fh)
    with open(os.path.join(os.path.dirname(path), "config.json")) as fh:
        config = json.load(fh)
    for key, entry in metrics.items():
        frames.append(pd.DataFrame({"run": path, "metric": key, "step": entry["steps"],
                                    "value": entry["values"], "bs": config["batch_size"]}))
pd.concat(frames, ignore_index=True).to_parquet(sys.argv[2])
""",
    "dvclive": r"""
import glob, os, sys
import pandas as pd
frames = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*", "dvclive", "plots", "metrics", "**",
                                          "*.tsv"), recursive=True)):
    frame = pd.read_csv(path, sep="\t")
    frames.append(pd.DataFrame({"run": path.split(os.sep)[-5], "metric": path,
                                "step": frame["step"], "value": frame.iloc[:, -1]}))
pd.concat(frames, ignore_index=True).to_parquet(sys.argv[2])
""",
    "timm": r"""
import glob, os, sys
import pandas as pd, yaml
frames = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*", "summary.csv"))):
    frame = pd.read_csv(path)
    with open(os.path.join(os.path.dirname(path), "args.yaml")) as fh:
        frame["bs"] = yaml.safe_load(fh)["batch_size"]
    frames.append(frame.assign(run=path))
pd.concat(frames, ignore_index=True).to_parquet(sys.argv[2])
""",
    "ultralytics": r"""
import glob, os, sys
import pandas as pd, yaml
frames = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*", "results.csv"))):
    frame = pd.read_csv(path, skipinitialspace=True)
    frame.columns = [c.strip() for c in frame.columns]
    with open(os.path.join(os.path.dirname(path), "args.yaml")) as fh:
        frame["bs"] = yaml.safe_load(fh)["batch"]
    frames.append(frame.assign(run=path))
pd.concat(frames, ignore_index=True).to_parquet(sys.argv[2])
""",
    "jsonl": r"""
import glob, os, sys
import pandas as pd
frames = [pd.read_json(p, lines=True).assign(run=p)
          for p in sorted(glob.glob(os.path.join(sys.argv[1], "*", "log.txt")))]
data = pd.concat(frames, ignore_index=True)
data.drop(columns=[c for c in data.columns if data[c].dtype == object and c != "run"]
          ).to_parquet(sys.argv[2])
""",
    "mlflow-sqlite": r"""
import sqlite3, sys
import pandas as pd
con = sqlite3.connect(f"file:{sys.argv[1]}/mlflow.db?mode=ro", uri=True)
data = pd.read_sql("SELECT run_uuid, key, step, value FROM metrics", con)
data.pivot_table(index=["run_uuid", "step"], columns="key", values="value").reset_index(
    ).to_parquet(sys.argv[2])
""",
    "wandb-local": r"""
import glob, os, sys
import pandas as pd
frames = [pd.read_json(p, lines=True).assign(run=p)
          for p in sorted(glob.glob(os.path.join(sys.argv[1], "wandb", "*",
                                                 "wandb-history.jsonl")))]
pd.concat(frames, ignore_index=True).to_parquet(sys.argv[2])
""",
}


def make_new_format_logs(fmt: str, root: Path, runs: int, epochs: int) -> Path:
    """A sweep of ``runs`` runs of ``epochs`` epochs in one of :data:`NEW_FORMATS`, written
    by the look-alike writers of the test suite; with a manifest giving steps per epoch."""
    if (root / ".done").exists():
        return root
    from tests.logformats import (
        write_dvclive,
        write_jsonl,
        write_mlflow_db,
        write_sacred_run,
        write_timm,
        write_ultralytics,
        write_wandb08,
    )

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    spe = 100
    manifest = f"[workload]\nsteps_per_epoch = {spe}\n"
    db_runs = []
    for n in range(runs):
        bs = NEW_BATCH_SIZES[n % len(NEW_BATCH_SIZES)]
        trial = n // len(NEW_BATCH_SIZES)
        errs = [_curve(bs, trial, (e + 1) * spe * 20) for e in range(epochs)]
        lr = 0.01 * (1 + trial)
        if fmt == "sacred":  # log_scalar without step=: Sacred numbers the points
            steps = list(range(epochs))
            write_sacred_run(root / str(n + 1), config={"batch_size": bs, "lr": lr,
                                                         "model": {"width": 128}},
                             metrics={"train_loss": (steps, [2.1 * x for x in errs]),
                                      "val_loss": (steps, [2.3 * x for x in errs]),
                                      "val_acc": (steps, [1 - x for x in errs])})
        elif fmt == "dvclive":
            steps = [(e + 1) * spe - 1 for e in range(epochs)]
            write_dvclive(root / f"run{n:03d}" / "dvclive", {
                "train/loss": (steps, [2.1 * x for x in errs]),
                "val/loss": (steps, [2.3 * x for x in errs]),
                "val/acc": (steps, [1 - x for x in errs]),
                "epoch": (steps, list(range(epochs)))},
                params={"data": {"batch_size": bs}, "model": {"optimizer": {"lr": lr}}})
        elif fmt == "timm":
            write_timm(root / f"run{n:03d}", [
                {"epoch": e, "train_loss": 2.1 * x, "eval_loss": 2.3 * x,
                 "eval_top1": 100 * (1 - x), "eval_top5": 100 * (1 - x / 3), "lr": lr}
                for e, x in enumerate(errs)], {"batch_size": bs, "lr": lr, "epochs": epochs})
        elif fmt == "ultralytics":
            write_ultralytics(root / f"run{n:03d}", [
                {"epoch": e, "train/box_loss": 2.1 * x, "train/cls_loss": x,
                 "metrics/mAP50(B)": 1 - x, "val/box_loss": 2.3 * x, "lr/pg0": lr}
                for e, x in enumerate(errs)], {"epochs": epochs, "batch": bs, "lr0": lr})
        elif fmt == "jsonl":
            write_jsonl(root / f"run{n:03d}" / "log.txt", [
                {"train_lr": lr, "train_loss": 2.1 * x, "test_loss": 2.3 * x,
                 "test_acc1": 1 - x, "test_coco_eval_bbox": [x] * 12, "epoch": e,
                 "n_parameters": 41302368} for e, x in enumerate(errs)])
            manifest += f'[[runs]]\nrun = "run{n:03d}/log.txt"\nbatch_size = {bs}\n'
        elif fmt == "mlflow-sqlite":
            db_runs.append({"id": f"{n:032x}", "name": f"run{n}", "experiment": 1,
                            "status": "FINISHED", "start": n,
                            "params": {"batch_size": bs, "lr": lr, "epochs": epochs},
                            "metrics": {k: [(e, f(x), e) for e, x in enumerate(errs)]
                                        for k, f in (("train_loss", lambda v: 2.1 * v),
                                                     ("val_loss", lambda v: 2.3 * v),
                                                     ("val_acc", lambda v: 1 - v))}})
        else:
            write_wandb08(root / "wandb" / f"run-2020_{n:04d}",
                          [{"train_loss": 2.1 * x, "val_loss": 2.3 * x, "val_acc": 1 - x}
                           for x in errs], {"batch_size": bs, "lr": lr})
    if fmt == "mlflow-sqlite":
        write_mlflow_db(root / "mlflow.db", {1: "sweep"}, db_runs)
    if fmt not in ("wandb-local", "dvclive"):  # those two log training steps
        (root / "runs.toml").write_text(manifest)
    (root / ".done").write_text("")
    return root


def compare(label: str, source: Path, naive: str, naive_arg: Path, extra: list[str],
            repeat: int) -> dict[str, object]:
    runs = []
    for k in range(repeat):
        home = WORK / f"home-add-{label}"
        shutil.rmtree(home, ignore_errors=True)
        runs.append(timed(f"curvekit add ({label}) #{k + 1}",
                          [sys.executable, "-m", "curvekit", "add", str(source), "--name",
                           f"bench/{label}/sgd", "--home", str(home), *extra]))
    out = WORK / f"naive-{label}.parquet"
    env = {"MLFLOW_ALLOW_FILE_STORE": "true"}
    baseline = [timed(f"naive ({label}) #{k + 1}", [sys.executable, "-c", naive, str(naive_arg),
                                                    str(out)], env=env)
                for k in range(repeat)]
    best = min(runs, key=lambda r: r.seconds)
    base = min(baseline, key=lambda r: r.seconds)
    print(f"{label:12s} curvekit add {best.seconds:7.2f} s {best.peak_rss_mb:7.0f} MB | "
          f"naive {base.seconds:7.2f} s {base.peak_rss_mb:7.0f} MB | "
          f"ratio {best.seconds / base.seconds:.2f}", flush=True)
    return {"curvekit": runs, "naive": baseline, "ratio": best.seconds / base.seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["csv", "tensorboard", "mlflow", "wandb-chart",
                                           "algoperf", "hf", "new", *NEW_FORMATS],
                        action="append")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--evals", type=int, default=1000)
    parser.add_argument("--small-runs", type=int, default=100,
                        help="runs of the TensorBoard and MLflow cases")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    only = set(args.only or ["csv", "tensorboard", "mlflow", "wandb-chart", "algoperf", "hf",
                             *NEW_FORMATS])
    if "new" in only:
        only = (only - {"new"}) | set(NEW_FORMATS)
    results: dict[str, object] = {"runs": args.runs, "evals": args.evals,
                                  "small_runs": args.small_runs, "cpus": os.cpu_count()}
    if "csv" in only:
        logs = make_csv_logs(WORK / f"add-csv-{args.runs}x{args.evals}", args.runs, args.evals)
        results["csv"] = compare("csv", logs, NAIVE_CSV, logs,
                                 ["--manifest", str(logs / "runs.toml")], args.repeat)
    if "tensorboard" in only:
        logs = make_tensorboard_logs(WORK / f"add-tb-{args.small_runs}x{args.evals}",
                                     args.small_runs, args.evals)
        results["tensorboard"] = compare("tensorboard", logs, NAIVE_TENSORBOARD, logs, [],
                                         args.repeat)
    if "mlflow" in only:
        logs = make_mlflow_logs(WORK / f"add-mlflow-{args.small_runs}x{args.evals}",
                                args.small_runs, args.evals)
        results["mlflow"] = compare("mlflow", logs, NAIVE_MLFLOW, logs.parent, [],
                                    args.repeat)
    if "hf" in only:
        logs = make_hf_logs(WORK / f"add-hf-{args.small_runs}x{args.evals}", args.small_runs,
                            args.evals)
        results["hf"] = compare("hf", logs, NAIVE_HF, logs, [], args.repeat)
    if "wandb-chart" in only:
        logs = make_chart_exports(WORK / f"add-chart-{args.small_runs}x{args.evals}",
                                  args.small_runs, args.evals)
        results["wandb_chart"] = compare("wandb-chart", logs, NAIVE_CHART, logs,
                                         ["--manifest", str(logs / "runs.toml")], args.repeat)
    if "algoperf" in only:
        logs = make_algoperf_logs(WORK / f"add-algoperf-{args.small_runs}x200",
                                  args.small_runs, 200)
        results["algoperf"] = compare("algoperf", logs / "wmt_jax", NAIVE_ALGOPERF,
                                      logs / "wmt_jax", ["--manifest", str(logs / "runs.toml")],
                                      args.repeat)
    for fmt in (f for f in NEW_FORMATS if f in only):
        logs = make_new_format_logs(fmt, WORK / f"add-{fmt}-50x100", 50, 100)
        extra = ["--manifest", str(logs / "runs.toml")] if (logs / "runs.toml").exists() \
            else []
        results[fmt.replace("-", "_")] = compare(fmt, logs, NAIVE_NEW[fmt], logs, extra,
                                                 args.repeat)
    # a partial run (--only) keeps the full run's results file as it is
    name = "add" if not args.only else "add-new-formats" if only == set(NEW_FORMATS) \
        else "add-" + "-".join(sorted(only))
    print(f"results in {save(name, results)}")


if __name__ == "__main__":
    main()
