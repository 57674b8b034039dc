"""Training logs for the import tests, written the way the logging libraries write them.

The curves follow S(B) = S_min (1 + B_crit / B): the best trial of batch size B reaches
``GOAL`` (validation error) at about S(B) steps, so steps to result, fits and plots have
something real to find.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

GOAL = 0.2
S_MIN, B_CRIT = 400.0, 128.0
BATCH_SIZES = (16, 32, 64, 128, 256, 512)


def steps_to_goal(batch_size: int, trial: int) -> float:
    return S_MIN * (1 + B_CRIT / batch_size) * (1 + 0.5 * trial)


def error_curve(batch_size: int, trial: int, steps: list[int]) -> list[float]:
    """Validation error falling from 0.9 through GOAL at steps_to_goal()."""
    rate = math.log(0.9 / GOAL) / steps_to_goal(batch_size, trial)
    return [0.9 * math.exp(-rate * s) for s in steps]


def eval_steps(batch_size: int, n: int = 25) -> list[int]:
    last = int(3 * S_MIN * (1 + B_CRIT / batch_size))
    return [round(i * last / (n - 1)) for i in range(n)]


def write_lightning(folder: Path, batch_size: int, trial: int, lr: float,
                    diverge: bool = False) -> Path:
    """PyTorch Lightning's CSVLogger: ``version_N/metrics.csv`` + ``hparams.yaml``.

    Lightning writes one row per log call with csv.DictWriter: the keys in order of first
    appearance, ``epoch`` and ``step`` among them; training and validation metrics are
    logged by separate calls, so they land on separate rows sharing a step.
    """
    folder.mkdir(parents=True, exist_ok=True)
    steps = eval_steps(batch_size)
    errors = error_curve(batch_size, trial, steps)
    rows: list[dict[str, float | int]] = []
    for i, (step, err) in enumerate(zip(steps, errors, strict=True)):
        loss = 2.3 * err / 0.9
        if diverge and i >= len(steps) // 2:
            loss = math.nan
        rows.append({"train_loss": loss * 0.9, "epoch": i // 5, "step": step})
        rows.append({"val_loss": loss, "val_acc": 1 - err, "epoch": i // 5, "step": step})
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    with open(folder / "metrics.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    (folder / "hparams.yaml").write_text(
        f"batch_size: {batch_size}\nlr: {lr}\nmomentum: 0.9\noptimizer: momentum\n")
    return folder / "metrics.csv"


def write_keras(path: Path, epochs: int, trial: int, batch_size: int,
                validation_freq: int = 1) -> Path:
    """Keras's CSVLogger: ``epoch`` then the sorted log keys, excel dialect (CRLF), one row
    per epoch; "NA" for a key an epoch did not log (validation_freq > 1)."""
    steps_per_epoch = 50
    keys = sorted(["loss", "accuracy", "val_loss", "val_accuracy"])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["epoch", *keys], dialect=csv.excel)
        writer.writeheader()
        for epoch in range(epochs):
            step = (epoch + 1) * steps_per_epoch
            err = error_curve(batch_size, trial, [step])[0]
            logs = {"loss": 2.3 * err, "accuracy": 1 - err * 0.8}
            if (epoch + 1) % validation_freq == 0:
                logs.update(val_loss=2.5 * err, val_accuracy=1 - err)
            writer.writerow({"epoch": epoch, **{k: logs.get(k, "NA") for k in keys}})
    return path


def write_plain(path: Path, batch_size: int, trial: int, *, step_name: str = "step",
                extra: str = "") -> Path:
    """A CSV with a step column and release-style metric names."""
    steps = eval_steps(batch_size)
    errors = error_curve(batch_size, trial, steps)
    lines = [f"{step_name},val/classification_error,train/cross_entropy_error{extra}"]
    lines += [f"{s},{e!r},{2 * e!r}" + ("," if extra else "")
              for s, e in zip(steps, errors, strict=True)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def manifest_toml(entries: list[tuple[str, int, dict[str, float]]], **workload: object) -> str:
    """A run manifest in TOML for (run pattern, batch size, parameters) entries."""
    lines = ["[workload]"] + [f"{k} = {v!r}".replace("'", '"') for k, v in workload.items()]
    for run, bs, params in entries:
        inline = ", ".join(f"{k} = {v!r}" for k, v in params.items())
        lines += ["[[runs]]", f'run = "{run}"', f"batch_size = {bs}",
                  f"parameters = {{ {inline} }}"]
    return "\n".join(lines) + "\n"
