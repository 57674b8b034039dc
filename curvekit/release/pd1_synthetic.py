"""Synthetic PD1 archives in the published layout, at any scale.

The real ``pd1.tar.gz`` cannot be rebuilt from public sources, so converters are tested on
files forged in its layout (``docs/datasets.md`` lists what is published and observed):

- a gzip-compressed tar with a ``pd1/`` folder holding ``README.txt``, ``LICENSE``, one task
  configuration JSON per task and the four data files ``pd1_{matched,unmatched}_phase{0,1}
  _results.jsonl.gz`` (each gzip-compressed JSON Lines), members in any order (``order``);
- one line per trial with every documented column: identity (``dataset``, ``model``,
  ``status``, ``trial_dir``, ``study_dir``, ``study_group``, ``hparams``, ``model_shape``),
  the per-evaluation arrays aligned with ``global_step``, the ``best_*`` scalars,
  ``effective_lr`` and ``hps.*`` metaparameters (the four tuned ones, the batch size, the
  activation for the max-pooling CNNs, fixed ones; columns that do not apply are null or,
  on some lines, absent);
- the quirks: trials without any evaluation (``diverged``, every array and ``best_*``
  null), partial curves of diverged runs, ``done`` runs with extreme losses, tasks without
  ``test/*`` (imagenet, lm1b, translate_wmt, uniref50), uniref50's epoch arrays
  ``0, …, 0, 1`` with null elements, a repeated last epoch, null elements inside metric
  arrays, the ImageNet ResNet-50 1024 task only in the unmatched phase-0 file, and the
  matched phase-0 Halton points repeated in matched phase 1;
- metric values are float32 numbers written as doubles; momentum is β (sampled as 1 − β
  log-uniform in 1e-3 … 1).

The returned :class:`~curvekit.release.pd1.Pd1Manifest` carries the file's md5 and sha256
and the generator's own counts (lines per file, matched trials without evaluations).

>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp()) / "pd1.tar.gz"
>>> m = generate_pd1(out, points=8)
>>> m.counts["matched_phase1_lines"], m.counts["matched_phase0_lines"] < 23 * 8
(184, True)
"""

from __future__ import annotations

import gzip
import io
import math
import os
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from scipy.stats import qmc

from curvekit import structured
from curvekit.errors import ArchiveError
from curvekit.outputs import output_stream
from curvekit.release.pd1 import DATA_FILES, ROOT, Pd1Manifest, file_hashes, load_pd1_manifest

__all__ = ["SYNTHETIC", "TASKS", "Task", "generate_pd1", "pd1_full_scale_kwargs"]

SYNTHETIC = "pd1_synthetic"
"""The dataset name of a generated archive's manifest (figures and pages say so)."""
_MTIME = 1_630_000_000  # 2021-08-26, the same for every member
FULL_POINTS = 400


@dataclass(frozen=True)
class Task:
    """One PD1 task: its study group's fields and its evaluation grid."""

    short: str
    dataset: str
    model: str
    variant: str
    batch_size: int
    evals: int
    train_size: int
    test: bool
    floor: float  # the best validation error rate reachable
    matched: bool = True  # in the matched files (ImageNet ResNet-50 1024 is not)

    @property
    def study_group(self) -> str:
        """``short,dataset,model,variant,batch_size``."""
        return f"{self.short},{self.dataset},{self.model},{self.variant},{self.batch_size}"

    @property
    def activation(self) -> str | None:
        """``hps.activation_fn``: relu or tanh for the max-pooling CNNs, else None."""
        return self.variant.rpartition("_")[2] if self.model == "max_pooling_cnn" else None


def _t(short: str, ds: str, model: str, variant: str, sizes: Sequence[tuple[int, int]],
       train: int, test: bool, floor: float) -> list[Task]:
    return [Task(short, ds, model, variant, b, n, train, test, floor) for b, n in sizes]


TASKS: tuple[Task, ...] = (
    *_t("cifar10_wrn", "cifar10", "wide_resnet", "wrn", [(256, 53), (2048, 7)], 45_000, True,
        0.04),
    *_t("cifar100_wrn", "cifar100", "wide_resnet", "wrn", [(256, 36), (2048, 5)], 45_000,
        True, 0.2),
    *_t("fashion_maxp_cnn", "fashion_mnist", "max_pooling_cnn", "max_pool_relu",
        [(256, 40), (2048, 5)], 50_000, True, 0.08),
    *_t("fashion_maxp_cnn", "fashion_mnist", "max_pooling_cnn", "max_pool_tanh",
        [(256, 40), (2048, 5)], 50_000, True, 0.09),
    *_t("fashion_smpl_cnn", "fashion_mnist", "simple_cnn", "simple_cnn",
        [(256, 50), (2048, 6)], 50_000, True, 0.08),
    *_t("imagenet_resnet50", "imagenet", "resnet", "resnet50", [(256, 20), (512, 20)],
        1_271_167, False, 0.24),
    Task("imagenet_resnet50", "imagenet", "resnet", "resnet50", 1024, 20, 1_271_167, False,
         0.24, matched=False),
    *_t("lm1b_trfmr", "lm1b", "transformer", "transformer", [(2048, 38)], 27_000_000, False,
        0.6),
    *_t("mnist_maxp_cnn", "mnist", "max_pooling_cnn", "max_pool_relu",
        [(256, 40), (2048, 5)], 55_000, True, 0.008),
    *_t("mnist_maxp_cnn", "mnist", "max_pooling_cnn", "max_pool_tanh",
        [(256, 40), (2048, 5)], 55_000, True, 0.01),
    *_t("mnist_simple_cnn", "mnist", "simple_cnn", "simple_cnn", [(256, 50), (2048, 6)],
        55_000, True, 0.008),
    *_t("svhn_noextra_wrn", "svhn_no_extra", "wide_resnet", "wrn", [(256, 67), (1024, 14)],
        65_000, True, 0.03),
    *_t("uniref50_trfmr", "uniref50", "transformer", "transformer", [(128, 22)], 2_816_000,
        False, 0.8),
    *_t("wmt15_de_en_xfmr", "translate_wmt", "xformer_translate", "xformer", [(64, 20)],
        4_500_000, False, 0.35),
)
"""The 24 PD1 tasks (23 evaluated; ImageNet ResNet-50 1024 only in unmatched phase 0)."""

_INTERVAL = 1000  # steps between evaluations
_TRANSFORMER = {"hps.emb_dim": 512, "hps.num_heads": 8, "hps.num_layers": 6,
                "hps.qkv_dim": 512, "hps.mlp_dim": 2048, "hps.max_target_length": 256}
_CNN = {"hps.num_filters": [32, 64], "hps.kernel_paddings": ["SAME", "SAME"],
        "hps.num_dense_units": [256, 256]}
_RESNET = {"hps.num_filters": 16, "hps.blocks_per_group": 4, "hps.widening_factor": 2,
           "hps.conv_kernel_init": "lecun_normal"}


def _space(u: np.ndarray) -> np.ndarray:
    """Unit-cube points onto PD1's four tuned metaparameters: initial value (log 1e-5 … 10),
    power (0.1 … 2), decay factor (0.01 … 0.99), momentum β = 1 − 10**(-3 + 3u)."""
    return np.column_stack([10.0 ** (-5 + 6 * u[:, 0]), 0.1 + 1.9 * u[:, 1],
                            0.01 + 0.98 * u[:, 2], 1 - 10.0 ** (-3 + 3 * u[:, 3])])


def _f32(x: float) -> float:
    return float(np.float32(x))


def _fixed(task: Task) -> dict[str, Any]:
    """The ``hps.*`` columns fixed per task (null where they do not apply)."""
    transformer = task.model in ("transformer", "xformer_translate")
    cnn = task.model in ("max_pooling_cnn", "simple_cnn")
    resnet = task.model in ("wide_resnet", "resnet")
    out: dict[str, Any] = {
        "hps.batch_size": task.batch_size,
        "hps.activation_fn": task.activation,
        "hps.activation_function": "relu",
        "hps.optimizer": "nesterov",
        "hps.model_dtype": "float32",
        "hps.l2_decay_factor": None if transformer else 0.0005,
        "hps.label_smoothing": 0.1 if transformer else None,
        "hps.lr_hparams.schedule": "polynomial",
        "hps.lr_hparams.end_factor": 0.01,
        "hps.rng_seed": -1,
    }
    for group, applies in ((_TRANSFORMER, transformer), (_CNN, cnn), (_RESNET, resnet)):
        for name, value in group.items():
            out.setdefault(name, value if applies else None)
            if applies:
                out[name] = value
    return out


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``hps.a.b`` columns as the nested ``hparams`` object."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        if value is None:
            continue
        parts = name.split(".")[1:]
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def _line(task: Task, x: np.ndarray, rng: np.random.Generator, *, study_dir: str,
          worker: int, omit_absent: bool) -> tuple[dict[str, Any], bool]:
    """One trial's line; also whether it has no evaluation."""
    lr, power, decay, beta = (float(v) for v in x)
    eta_star = 0.5 * (task.batch_size / 256) ** 0.5  # best effective learning rate
    off = math.log10(lr / (1 - beta) / eta_star)
    n = task.evals
    steps = [_INTERVAL * (i + 1) for i in range(n)]
    if task.dataset in ("cifar10", "cifar100"):
        steps[-1] = steps[-2] + _INTERVAL // 10 if n > 1 else steps[-1]  # repeated last epoch
    # uniref50: one pass over the data takes the whole run
    train_size = (steps[-1] * task.batch_size if task.dataset == "uniref50"
                  else task.train_size)
    status = "done"
    stop = n
    if off > 1.2 or rng.random() < 0.03:
        status = "diverged"
        stop = 0 if (off > 2.0 or rng.random() < 0.3) else int(rng.integers(1, max(2, n)))
    # steps to progress: fewer at larger batch sizes, more away from the best learning rate
    tau = 4000 * (1 + 1024 / task.batch_size) / 2 * (1 + 4 * off * off)
    t = np.array(steps[:stop], dtype=float)
    prog = (1 + t / tau) ** -0.8
    noise = rng.normal(0, 0.01, size=stop)
    chance = 0.9
    err = np.clip(task.floor + (chance - task.floor) * prog + noise * prog, 0.0, 1.0)
    ce = -np.log(np.clip(1 - err, 1e-6, 1)) * 2 + 0.05
    extreme = status == "done" and rng.random() < 0.02  # "done" but close to diverging

    def arr(values: np.ndarray, *, scale: float = 1.0) -> list[float | None] | None:
        if stop == 0:
            return None
        return [_f32(v * scale) for v in values]

    line: dict[str, Any] = {
        "dataset": task.dataset, "model": task.model, "status": status,
        "study_group": task.study_group, "study_dir": study_dir,
        "trial_dir": f"{study_dir}/{worker}",
        "model_shape": None if stop == 0 else [[3, 3, 3, 16], [16], [16, 10], [10]],
    }
    line["global_step"] = steps[:stop] if stop else None
    epochs: list[int | None] = [s * task.batch_size // train_size for s in steps[:stop]]
    if task.dataset == "uniref50" and stop and status == "diverged":
        epochs[-1] = None  # e.g. [0, 0, null], or [null]
    line["epoch"] = epochs if stop else None
    line["eval_time"] = arr(rng.uniform(2, 30, size=stop))
    line["learning_rate"] = arr(np.array([lr * (1 - min(1.0, s / (decay * steps[-1])))
                                          ** power * 0.99 + lr * 0.01 for s in steps[:stop]]))
    line["preemption_count"] = [0] * stop if stop else None
    line["steps_per_sec"] = arr(rng.uniform(5, 50, size=stop))
    train_cost = ce * (1e6 if extreme else 0.9)
    line["train_cost"] = arr(train_cost)
    splits = {"train": 0.8, "valid": 1.0, "test": 1.02}
    for split, f in splits.items():
        absent = split == "test" and not task.test
        for metric, array in (("error_rate", np.clip(err * f, 0, 1)), ("ce_loss", ce * f),
                              ("denominator", np.full(stop, 10000.0))):
            name = f"{split}/{metric}"
            if absent:
                if not omit_absent:
                    line[name] = None
                continue
            values_list = arr(array)
            if values_list is not None and name == "train/ce_loss" and rng.random() < 0.05:
                values_list[int(rng.integers(0, stop))] = None  # a null inside an array
            line[name] = values_list
    for m in ("train_cost", "train/error_rate", "train/ce_loss", "valid/error_rate",
              "valid/ce_loss"):
        kept = [v for v in (line.get(m) or []) if v is not None]
        if kept:
            i = (line[m]).index(min(kept))
            line[f"best_{m}"], line[f"best_{m}_index"] = min(kept), i
            line[f"best_{m}_step"] = steps[i]
        else:
            line[f"best_{m}"] = line[f"best_{m}_index"] = line[f"best_{m}_step"] = None
    line["effective_lr"] = lr / (1 - beta)
    hps = _fixed(task)
    hps.update({"hps.lr_hparams.initial_value": lr, "hps.lr_hparams.power": power,
                "hps.lr_hparams.decay_steps_factor": decay, "hps.opt_hparams.momentum": beta})
    if omit_absent:
        hps = {k: v for k, v in hps.items() if v is not None}
    line.update(hps)
    line["hparams"] = _nested(hps)
    return line, stop == 0


def _readme() -> bytes:
    return (b"PD1 (synthetic, generated by curvekit in the published layout)\n\n"
            b"pd1_matched_phase0_results.jsonl\npd1_matched_phase1_results.jsonl\n"
            b"pd1_unmatched_phase0_results.jsonl\npd1_unmatched_phase1_results.jsonl\n")


def _member(tar: tarfile.TarFile, name: str, data: bytes | None) -> None:
    info = tarfile.TarInfo(name)
    info.mtime = _MTIME
    info.uname = info.gname = "pd1"
    if data is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
    else:
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))


def _file_lines(file: str, tasks: Sequence[Task], *, points: int, phase0: int,
                unmatched: int, seed: int, counts: dict[str, int]) -> Iterator[bytes]:
    matched, phase = "unmatched" not in file, int(file.split("phase")[1][0])
    halton = _space(qmc.Halton(d=4, scramble=False).random(points + 1)[1:])
    for k, task in enumerate(tasks):
        if (matched and not task.matched) or (not task.matched and phase == 1):
            continue
        rng = np.random.default_rng([seed, k, 2 * (not matched) + phase])
        if matched:
            # phase 0: the first points of the grid (not all tasks equally many); phase 1
            # runs the whole grid again, the phase-0 points included
            n = max(1, phase0 - k % 3) if phase == 0 else points
            xs = halton[:n]
        else:
            n = max(1, unmatched // (4 if phase == 0 else 1))
            xs = _space(qmc.Halton(d=4, scramble=True, seed=rng).random(n))
        study_dir = (f"/pd1/{'matched' if matched else 'unmatched'}_phase{phase}/"
                     f"{task.short}_{task.variant}_{task.batch_size}")
        for i, x in enumerate(xs):
            line, empty = _line(task, x, rng, study_dir=study_dir, worker=i + 1,
                                omit_absent=i % 2 == 1)
            if matched and empty:
                counts["matched_without_evaluations"] += 1
            counts[f"{'matched' if matched else 'unmatched'}_phase{phase}_lines"] += 1
            yield structured.dumps(line).encode() + b"\n"


def generate_pd1(
    path: str | os.PathLike[str],
    *,
    points: int = 16,
    phase0_points: int | None = None,
    unmatched_points: int | None = None,
    evals_scale: float = 1.0,
    order: Literal["published", "shuffled"] = "published",
    seed: int = 0,
) -> Pd1Manifest:
    """Write a synthetic PD1 archive at ``path`` and return its manifest.

    ``points`` is the Halton grid of the matched phase-1 file (400 in PD1:
    :func:`pd1_full_scale_kwargs` gives a PD1-sized file); matched phase 0 runs the grid's
    first ``phase0_points`` (default a quarter; minus 0–2 per task, so tasks differ), the
    unmatched files ``unmatched_points`` new points per task (default ``points``; phase 0 a
    quarter). ``evals_scale`` scales each task's evaluations (uniref50 keeps 22).
    ``order="shuffled"`` writes the members in another order. Same arguments, same bytes.

    >>> import tempfile, pathlib, tarfile
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "pd1.tar.gz"
    >>> m = generate_pd1(out, points=4)
    >>> sorted(n for n in tarfile.open(out).getnames() if n.endswith(".gz"))[0]
    'pd1/pd1_matched_phase0_results.jsonl.gz'
    """
    if points < 1 or evals_scale <= 0:
        raise ArchiveError(f"need points >= 1 and evals_scale > 0; got {points}, {evals_scale}")
    phase0 = phase0_points if phase0_points is not None else max(2, points // 4 + 1)
    unmatched = unmatched_points if unmatched_points is not None else points
    tasks = tuple(Task(t.short, t.dataset, t.model, t.variant, t.batch_size,
                       t.evals if t.dataset == "uniref50"
                       else max(3, round(t.evals * evals_scale)), t.train_size, t.test,
                       t.floor, t.matched) for t in TASKS)
    counts = dict.fromkeys(("matched_phase0_lines", "matched_phase1_lines",
                            "unmatched_phase0_lines", "unmatched_phase1_lines",
                            "matched_without_evaluations"), 0)
    members: list[tuple[str, bytes | None]] = [(ROOT, None), (f"{ROOT}/README.txt", _readme()),
                                               (f"{ROOT}/LICENSE", b"CC-BY 4.0\n")]
    for task in tasks:
        config = {"dataset": task.dataset, "model": task.model,
                  "hparam_overrides": _nested(_fixed(task))}
        members.append((f"{ROOT}/{task.short}_{task.variant}_{task.batch_size}.json",
                        structured.dumps(config, indent=1).encode()))
    for file in DATA_FILES:
        lines = b"".join(_file_lines(file, tasks, points=points, phase0=phase0,
                                    unmatched=unmatched, seed=seed, counts=counts))
        members.append((f"{ROOT}/{file}", gzip.compress(lines, compresslevel=6, mtime=0)))
    if order == "shuffled":
        rng = np.random.default_rng(seed)
        members = [members[i] for i in rng.permutation(len(members))]
    target = Path(path)
    with output_stream(target, "the generated PD1 archive") as out, \
            gzip.GzipFile(filename="", fileobj=out, mode="wb", mtime=0,
                          compresslevel=6) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, content in members:
            _member(tar, name, content)
    md5, sha = file_hashes(target)
    size = target.stat().st_size
    real = load_pd1_manifest()
    data = real.to_dict()
    data["archive"] = {**data["archive"], "url": target.resolve().as_uri(),
                       "file_name": target.name, "md5": md5,
                       "md5_source": "computed by the generator",
                       "sha256": sha, "approx_size_bytes": size}
    data["counts"] = counts
    data["counts_source"] = "the generator's own counts"
    data["title"] = "PD1 look-alike written by curvekit's generator"
    data["dataset"] = SYNTHETIC
    return Pd1Manifest.from_dict(data)


def pd1_full_scale_kwargs() -> dict[str, Any]:
    """Arguments of :func:`generate_pd1` for a PD1-sized file: 400 matched points per task
    (9,200 matched phase-1 lines), 98–100 phase-0 points (2,276 lines), 1,200 unmatched
    points per task in phase 1 and 300 in phase 0 (46,276 lines in all).

    >>> pd1_full_scale_kwargs()["points"]
    400
    """
    return {"points": FULL_POINTS, "phase0_points": 100, "unmatched_points": 1200}
