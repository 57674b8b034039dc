"""Synthetic archives in the exact layout of the batch_science release, for tests and benchmarks.

The real archive is 802 MB and offline machines cannot download it, so tests and benchmarks read
archives written by this module: a ``.tar.bz2`` holding, under ``batch_science/``, one
``<base_dir>/<model>/<optimizer>/<batch_size>/study.json`` per study and one
``<trial_id>/{metadata.json,measurements.csv}`` pair per trial, plus directory members.

The curves look like training: each metric moves from its initial value towards a floor
along a power law, faster the closer a trial's effective learning rate ``lr / (1 - momentum)``
is to the optimum ``eta*(B) = eta_max * B / (B + B_crit)``, so the best trial reaches the
workload's goal after ``S(B) = S_min * (1 + B_crit / B)`` steps. The trials with the largest
effective learning rates are the INFEASIBLE (diverged) ones.

With ``quirks=True`` the archive has every trait "What a reader must not assume" lists:
unsorted members; base_dirs of depth 1 and 2 (if the selection has both); column sets and
orders that differ by model (``step`` last for ``lstm``); ``nan``, ``inf`` and ``-inf``;
header-only ``measurements.csv``; irregular steps; COMPLETE trials running past
``train_steps``; unknown JSON fields; a study with ``train_steps`` 0 (a time budget); a
``scale`` of ``""``; trial ids with gaps; files without a final newline. Quirks a small
selection could miss are pinned to designated studies and trials.

Numbers (``float_style``): by default (``"mixed"``) ``val/`` and ``test/`` floats are
float32 values written as Python float reprs (``2.3025851249694824``) and ``train/`` floats,
logged by the training job, use the shortest float32 digits (``2.3025851``); ``"repr"``
writes every float the long way (about 1.35 GB at full scale instead of 1.2), ``"short"``
the short way (about 0.95 GB). Classification errors are ``repr(k / N_eval)`` (``0.0124``).

Examples
--------
>>> import tempfile, pathlib
>>> m = tiny_archive(pathlib.Path(tempfile.mkdtemp()) / "tiny.tar.bz2")
>>> m.dataset, m.totals["workloads"], m.measurements > 0
('batch_science_synthetic', 4, True)
"""

from __future__ import annotations

import bz2
import copy
import hashlib
import io
import math
import os
import tarfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from curvekit import structured
from curvekit._processes import fork_pool
from curvekit.errors import ArchiveError, ManifestError
from curvekit.outputs import output_stream, write_file
from curvekit.progress import Progress
from curvekit.records import STATUSES
from curvekit.release.manifest import Manifest, StudyCounts, load_manifest

__all__ = ["full_scale_kwargs", "generate_archive", "tiny_archive", "write_manifest"]

_ROOT = "batch_science"
_MTIME = 1_541_030_400  # 2018-11-01: before the paper's release, same for every member
_ALPHA = 0.8  # power-law exponent of the progress curve p(t) = (1 + t / tau) ** -alpha
_ROWS_COMPLETE = 515  # rows of a COMPLETE trial at evals_scale=1: ~67M rows at full scale
_STEP_MULTS = np.array([1.0] * 17 + [1.5, 2, 0.5])  # eval intervals, in base intervals
_ETA_MAX = {"img": 4.0, "lm": 1.0, "ap": 4.0}  # plateau of the optimal effective LR
_EXTRA_STUDY = {"search_algorithm": "quasi_random", "tuner_version": 3}
_EXTRA_META = {"worker": "tpu-v2-17", "wall_clock_hours": 3.25}
_Ref = tuple[int, int, int]  # a member: (kind, dir index or study index, trial index)
_Chunk = tuple[bytes, int, int]  # (one bzip2 stream, raw tar bytes, CSV rows)
_KIND_DIR, _KIND_STUDY, _KIND_META, _KIND_CSV = range(4)

# workload: (goal, floor, s_min, b_crit). The goal is the workload's Figure 23 goal on its
# goal metric (val cls, val ce or val AP) and the floor that metric's asymptote for the best
# trial, which reaches the goal after S(B) = s_min * (1 + b_crit / B) steps.
_CURVES: dict[str, tuple[float, float, float, float]] = {
    "cifar_10/resnet_8/nesterov_momentum": (0.3, 0.2, 360, 1024),
    "cifar_10/resnet_8/sgd": (0.3, 0.205, 700, 512),
    "common_crawl/transformer_base/nesterov_momentum": (3.9, 3.6, 6000, 8192),
    "fashion_mnist/simple_cnn_base/nesterov_momentum": (0.1, 0.075, 80, 2048),
    "imagenet/resnet_50/nesterov_momentum": (0.25, 0.225, 1500, 65536),
    "imagenet/vgg_11/nesterov_momentum": (0.35, 0.31, 2500, 16384),
    "imagenet_subsets/imagenet_half_classes/resnet_50/nesterov_momentum": (0.3, 0.24, 1200, 32768),
    "imagenet_subsets/imagenet_half_images/resnet_50/nesterov_momentum": (0.3, 0.27, 1200, 16384),
    "lm1b/lstm/nesterov_momentum": (3.9, 3.72, 20000, 1024),
    "lm1b/transformer_base/nesterov_momentum": (3.9, 3.62, 5000, 4096),
    "lm1b/transformer_narrow_and_shallow/nesterov_momentum": (4.2, 4.02, 4000, 2048),
    "lm1b/transformer_shallow/momentum": (3.9, 3.74, 6000, 4096),
    "lm1b/transformer_shallow/nesterov_momentum": (4.2, 3.74, 5000, 4096),
    "lm1b/transformer_shallow/sgd": (3.9, 3.75, 9000, 1024),
    "lm1b/transformer_wide/nesterov_momentum": (4.2, 3.55, 4000, 8192),
    "mnist/fc_1024/sgd": (0.03, 0.018, 150, 1024),
    "mnist/fc_1024_1024/sgd": (0.03, 0.017, 150, 1024),
    "mnist/fc_1024_1024_1024/sgd": (0.03, 0.016, 150, 1024),
    "mnist/fc_128_128_128/sgd": (0.03, 0.022, 200, 1024),
    "mnist/fc_2048_2048_2048/sgd": (0.03, 0.016, 150, 1024),
    "mnist/fc_256_256_256/sgd": (0.03, 0.02, 180, 1024),
    "mnist/fc_512_512_512/sgd": (0.03, 0.019, 160, 1024),
    "mnist/fc_64_64_64/sgd": (0.03, 0.026, 250, 1024),
    "mnist/simple_cnn_base/momentum": (0.01, 0.0065, 60, 2048),
    "mnist/simple_cnn_base/nesterov_momentum": (0.01, 0.006, 50, 2048),
    "mnist/simple_cnn_base/sgd": (0.01, 0.0065, 120, 1024),
    "mnist/simple_cnn_narrow/sgd": (0.01, 0.0075, 140, 1024),
    "mnist/simple_cnn_wide/sgd": (0.01, 0.006, 110, 1024),
    "mnist_subsets/mnist_13750/simple_cnn_base/nesterov_momentum": (0.02, 0.012, 50, 1024),
    "mnist_subsets/mnist_27500/simple_cnn_base/nesterov_momentum": (0.02, 0.009, 50, 1536),
    "mnist_subsets/mnist_55000/simple_cnn_base/nesterov_momentum": (0.02, 0.007, 50, 2048),
    "mnist_subsets/mnist_6875/simple_cnn_base/nesterov_momentum": (0.02, 0.015, 50, 512),
    "open_images_v4/resnet_50/nesterov_momentum": (0.31, 0.345, 2000, 16384),
    "solution_quality/fashion_mnist/simple_cnn_base/nesterov_momentum": (0.1, 0.072, 80, 2048),
    "solution_quality/mnist/simple_cnn_base/nesterov_momentum": (0.01, 0.0055, 50, 2048),
}


@dataclass(frozen=True)
class _Metric:
    """How one ``split/metric`` column evolves: from ``init`` towards ``floor``."""

    init: float
    floor: float
    sd: float  # evaluation noise: relative, or in binomial units when n_eval > 0
    n_eval: int  # > 0: a classification error, written as k / n_eval
    overfit: bool  # validation cross entropy creeps up late in training


@dataclass(slots=True)
class _Trial:
    trial_id: int
    status: str
    params: dict[str, float | int]
    seed: int
    end: int  # the last step taken (metadata "steps")
    slow: float  # multiplies the study's tau: about 1 at the optimal learning rate
    phi: float  # how far the trial's floors move towards the goal, in units of study.gap
    diverge: float = math.inf  # the fraction of its rows after which the trial diverged
    style: int = 0  # divergence: 0 nan, 1 inf then nan, 2 -inf/inf/nan (3+ rows)
    header_only: bool = False
    no_newline: bool = False
    extra_meta: bool = False


@dataclass(slots=True)
class _Study:
    workload: str
    model: str
    optimizer: str
    batch_size: int
    dataset: str
    train_steps: int
    interval: int  # base evaluation interval
    tau: float  # time constant of the optimal trial's progress curve
    gap: float  # |goal - floor| / floor of the goal metric: the scale of floor penalties
    columns: tuple[str, ...]
    metrics: dict[str, _Metric]
    configs: dict[str, dict[str, Any]]
    trials: list[_Trial]
    internal_base: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return f"{_ROOT}/{self.workload}/{self.batch_size}"

    def counts(self) -> dict[str, int]:
        return {s: sum(t.status == s for t in self.trials) for s in STATUSES}


@dataclass
class _Plan:
    studies: list[_Study]
    float_style: str
    dirs: list[str] = field(default_factory=list)


_PLAN: _Plan | None = None  # the plan a worker process renders members from (see _init)


# ---------------------------------------------------------------------------- the plan
def _family(workload: str) -> str:
    top = workload.split("/")[0]
    return "lm" if top in ("lm1b", "common_crawl") else "ap" if top == "open_images_v4" else "img"


def _columns(workload: str, quirks: bool, odd: bool = False) -> tuple[str, ...]:
    """Column layout of a workload's measurements.csv (``odd``: the most unusual one)."""
    fam, model = _family(workload), workload.split("/")[-2]
    kinds = ["cross_entropy_error"] + ["classification_error"] * (fam == "img")
    cols = [f"{s}/{k}" for s in ("train", "val") for k in kinds]
    cols += ["val/average_precision"] * (fam == "ap")
    if model in ("vgg_11", "simple_cnn_wide") or odd:
        cols += [f"test/{k}" for k in kinds]
    if odd:
        return (*reversed(cols), "step")
    if quirks and model == "lstm":
        return (*cols, "step")
    if quirks and model in ("resnet_8", "transformer_wide"):
        return ("step", *reversed(cols))
    return ("step", *cols)


def _metric(name: str, workload: str, floor: float) -> _Metric:
    """Initial value, floor and noise of one column, given the goal metric's floor."""
    fam, (split, kind) = _family(workload), name.split("/")
    imagenet = workload.startswith("imagenet")
    classes = 500 if "half_classes" in workload else 1000 if imagenet else 10
    # ImageNet's validation set; MNIST and Fashion MNIST hold out 5,000 of 60,000 images
    n_eval = 50 * classes if imagenet else 10000 if "cifar" in workload else 5000
    train = split == "train"  # training metrics are noisier: a few batches, not a data set
    if kind == "average_precision":
        return _Metric(0.005, floor, 0.01, 0, False)
    if kind == "classification_error":
        cls_floor = floor * {"train": 0.35, "val": 1.0, "test": 1.04}[split]
        return _Metric(1 - 1 / classes, cls_floor, 2.0 if train else 1.0, n_eval, False)
    ce_floor = {"lm": floor * {"train": 0.995, "val": 1.0, "test": 1.005}[split],
                "ap": {"train": 0.025, "val": 0.03, "test": 0.031}[split],
                "img": 4 * floor * {"train": 0.3, "val": 1.0, "test": 1.04}[split]}[fam]
    init = {"lm": math.log(32000), "ap": math.log(2), "img": math.log(classes)}[fam]
    sd = (0.01 if train else 0.002) if fam == "lm" else (0.03 if train else 0.005)
    return _Metric(init, ce_floor, sd, 0, fam == "img" and not train)


def _nice(x: float) -> int:
    """The nearest of 1, 2, 2.5, 5 times a power of ten (an interval a person would pick)."""
    if x <= 1:
        return 1
    k = math.floor(math.log10(x))
    best = min((1, 2, 2.5, 5, 10), key=lambda m: abs(math.log(x / (m * 10**k))))
    return max(1, round(best * 10.0**k))


def _configs(workload: str, optimizer: str, eta_star: float, steps: int) -> dict[str, Any]:
    """The search space of a study, in decades around its optimal effective learning rate."""
    lo, hi = (-3.0, 0.5) if optimizer != "sgd" else (-2.0, 1.0)
    log_eta, model = math.log10(eta_star), workload.split("/")[-2]

    def double(lo: float, hi: float, scale: str) -> dict[str, Any]:
        return {"type": "DOUBLE", "min_value": lo, "max_value": hi, "scale": scale}

    cfg = {"learning_rate": double(10.0 ** math.floor(log_eta + lo),
                                   10.0 ** math.ceil(log_eta + hi), "LOG_SCALE")}
    if optimizer != "sgd":
        cfg["momentum"] = double(0.0, 0.999, "REVERSE_LOG_SCALE")
    if _family(workload) != "lm" and not model.startswith("fc_"):
        cfg["end_learning_rate_factor"] = double(0.001, 0.5, "LOG_SCALE")
        cfg["learning_rate_decay_steps"] = {"type": "INTEGER", "min_value": steps // 2,
                                            "max_value": steps, "scale": "LINEAR_SCALE"}
    if model == "resnet_50":
        cfg["label_smoothing"] = {"type": "DISCRETE", "feasible_points": [0.0, 0.01, 0.1],
                                  "scale": ""}
    return cfg


def _sample(configs: dict[str, Any], n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Draw ``n`` points of a search space (uniform in each parameter's scale)."""
    out: dict[str, np.ndarray] = {}
    for name, c in configs.items():
        if c["type"] == "DISCRETE":
            out[name] = rng.choice(np.array(c["feasible_points"]), n)
        elif c["type"] == "INTEGER":
            out[name] = rng.integers(c["min_value"], c["max_value"] + 1, n)
        elif c["scale"] == "REVERSE_LOG_SCALE":  # 1 - value is log-uniform
            lo, hi = math.log(1 - c["max_value"]), math.log(1 - c["min_value"])
            out[name] = 1 - np.exp(rng.uniform(lo, hi, n))
        else:
            out[name] = np.exp(rng.uniform(math.log(c["min_value"]), math.log(c["max_value"]), n))
    return out


def _statuses(x: np.ndarray, counts: dict[str, int], rng: np.random.Generator) -> np.ndarray:
    """The largest effective learning rates diverge; INCOMPLETE trials are picked at random."""
    status = np.full(len(x), "COMPLETE", dtype=object)
    by_lr = np.argsort(-x)
    status[by_lr[: counts["INFEASIBLE"]]] = "INFEASIBLE"
    status[rng.choice(by_lr[counts["INFEASIBLE"]:], counts["INCOMPLETE"], replace=False)] = (
        "INCOMPLETE")
    return status


def _build_study(wl: dict[str, Any], bs: int, counts: dict[str, int], *, seed: int,
                 quirks: bool, evals_scale: float, time_budget: bool, first: bool) -> _Study:
    """Sample a study's trials: parameters, statuses, lengths, speeds and quirks."""
    name, fam = wl["name"], _family(wl["name"])
    rng = np.random.default_rng([seed, zlib.crc32(name.encode()), bs])
    goal, floor, s_min, b_crit = _CURVES[name]
    s_best = s_min * (1 + b_crit / bs)
    steps = int(float(f"{max(3 * s_best, 200):.2g}"))  # a round budget, ~3x the best trial's
    eta_star = _ETA_MAX[fam] * bs / (bs + b_crit)
    configs = _configs(name, wl["optimizer"], eta_star, steps)
    columns = _columns(name, quirks)
    metrics = {c: _metric(c, name, floor) for c in columns if c != "step"}
    goal_col = {"ap": "val/average_precision", "lm": "val/cross_entropy_error"}.get(
        fam, "val/classification_error")
    q = (goal - floor) / (metrics[goal_col].init - floor)  # p(t) at the goal
    n = sum(counts.values())
    params = _sample(configs, n, rng)
    x = np.log(params["learning_rate"] / (1 - params.get("momentum", 0.0)) / eta_star)
    status = _statuses(x, counts, rng)
    if counts["INFEASIBLE"]:  # the best trials must still train: keep the optimum below them
        x -= min(0.0, float(np.sort(x)[-counts["INFEASIBLE"]]) - math.log(1.5))
    # too small a learning rate slows training proportionally, too large one sharply
    slow = np.where(x < 0, np.exp(-x), np.exp(1.5 * np.minimum(x, 3) ** 2))
    slow *= np.exp(rng.normal(0, 0.15, n))
    phi = 0.3 * np.abs(x) + 0.2 * np.abs(rng.normal(0, 1, n))
    gaps = 1 + (rng.random(n) < (0.03 if quirks else 0)) * rng.integers(1, 20, n)
    gaps[-1] += 2 if quirks and first and n >= 2 else 0
    ids, seeds, u = np.cumsum(gaps), rng.integers(0, 2**63 - 1, n), rng.random((6, n))
    ends = {"COMPLETE": steps * (0.5 + u[0]) if time_budget else np.where(
                quirks & (u[1] < 0.1), steps * (1.02 + 0.28 * u[0]), steps),
            "INCOMPLETE": steps * (0.02 + 0.96 * u[0]),
            "INFEASIBLE": np.maximum(1, steps * 10 ** (-1.8 + 1.4 * u[0]))}
    trials = []
    for i in range(n):
        st = str(status[i])
        trial = _Trial(int(ids[i]), st, {k: v[i].item() for k, v in params.items()},
                       int(seeds[i]), int(ends[st][i]), float(slow[i]), float(phi[i]))
        if st == "INFEASIBLE" and quirks:
            trial.diverge = float(0.6 + 0.4 * u[2, i])
            trial.style = int(np.searchsorted((0.6, 0.9), u[3, i]))  # nan, inf, mixed
            trial.header_only = bool(u[1, i] < 0.03)
        elif st == "INFEASIBLE":  # a clean archive stops logging when the loss blows up
            trial.end = max(1, int(trial.end * (0.6 + 0.4 * u[2, i])))
        trial.no_newline = bool(quirks and u[4, i] < 0.01 and st != "INFEASIBLE")
        trial.extra_meta = bool(quirks and u[5, i] < 0.03)
        trials.append(trial)
    group, _, child = wl["base_dir"].partition("/")  # "dataset" need not equal base_dir
    dataset = group if not child else child if group == "solution_quality" else group.split("_")[0]
    return _Study(
        name, wl["model"], wl["optimizer"], bs, dataset, 0 if time_budget else steps,
        interval=_nice(steps / (_ROWS_COMPLETE * evals_scale * _STEP_MULTS.mean())),
        tau=s_best / (q ** (-1 / _ALPHA) - 1), gap=abs(goal - floor) / floor, columns=columns,
        metrics=metrics, configs=configs, trials=sorted(trials, key=lambda t: t.trial_id),
        internal_base=int(rng.integers(10**6, 10**7)),
        extra=dict(_EXTRA_STUDY) if quirks and (first or rng.random() < 0.25) else {})


def _scaled_counts(pub: StudyCounts, fraction: float, cap: int | None) -> dict[str, int]:
    """Published counts times ``fraction`` (>= 1 COMPLETE), then capped proportionally."""
    counts = {k: math.floor(getattr(pub, k) * fraction + 0.5) for k in STATUSES}
    counts["COMPLETE"] = max(min(1, pub.COMPLETE), counts["COMPLETE"])
    total = sum(counts.values())
    if cap is None or total <= cap:
        return counts
    exact = {k: counts[k] * cap / total for k in STATUSES}
    out = {k: max(int(exact[k]), 1 if counts[k] else 0) for k in STATUSES}
    while sum(out.values()) < cap:
        k = max(STATUSES, key=lambda k: exact[k] - out[k])
        out[k] += 1
    while sum(out.values()) > cap:  # take from statuses above 1 first: each keeps a trial
        above = [k for k in STATUSES if out[k] > 1] or [k for k in STATUSES[1:] if out[k]]
        k = max(above, key=lambda k: out[k] - exact[k])
        out[k] -= 1
    return out


_Selected = list[tuple[dict[str, Any], StudyCounts]]  # (manifest workload entry, study)


def _select(manifest: Manifest, workloads: Sequence[str] | None,
            batch_sizes: Mapping[str, Sequence[int]] | None) -> _Selected:
    """The published studies to generate, in manifest order; unknown names are errors."""
    known = {w["name"]: w for w in manifest.workloads}
    wanted = list(known) if workloads is None else list(workloads)
    for name in [*wanted, *(batch_sizes or {})]:
        if name not in known or name not in wanted:
            raise ManifestError(f"unknown or unselected workload {name!r}; expected one of "
                                f"the manifest's workloads, e.g. {next(iter(known))!r}")
    for name, sizes in (batch_sizes or {}).items():
        if bad := sorted(set(sizes) - set(known[name]["batch_sizes"])):
            raise ManifestError(f"workload {name!r} has no batch sizes {bad}; "
                                f"published: {known[name]['batch_sizes']}")
    keep = {n: set((batch_sizes or {}).get(n, known[n]["batch_sizes"])) for n in wanted}
    return [(known[s.workload], s) for s in manifest.studies
            if s.workload in keep and s.batch_size in keep[s.workload]]


def _plan(selected: _Selected, *, fraction: float, cap: int | None, evals_scale: float,
          quirks: bool, seed: int, float_style: str) -> _Plan:
    """All studies and trials to write, with the quirks pinned to designated members."""
    counts = [_scaled_counts(pub, fraction, cap) for _, pub in selected]
    budget = -1
    while quirks and sum(c["INFEASIBLE"] for c in counts) < 2:  # nan/inf need diverged trials
        counts[next((i for i, c in enumerate(counts) if not c["INFEASIBLE"]), 0)][
            "INFEASIBLE"] += 1
    if quirks and len(selected) > 1:  # a time budget: prefer a long-budget, all-finished study
        budget = max(range(len(selected)), key=lambda i: (
            counts[i]["INCOMPLETE"] == 0, selected[i][0]["base_dir"].startswith("solution"),
            selected[i][1].batch_size))
        counts[budget]["COMPLETE"] += counts[budget]["INCOMPLETE"]
        counts[budget]["INCOMPLETE"] = 0
    studies = [_build_study(wl, pub.batch_size, counts[i], seed=seed, quirks=quirks,
                            evals_scale=evals_scale, time_budget=i == budget, first=i == 0)
               for i, (wl, pub) in enumerate(selected)]
    if quirks:
        _pin_quirks(studies)
    return _Plan(studies, float_style)


def _pin_quirks(studies: list[_Study]) -> None:
    """Make sure each quirk occurs at least once, whatever the selection and scale."""
    trials = [(s, t) for s in studies for t in s.trials]
    diverged = [(s, t) for s, t in trials if t.status == "INFEASIBLE"]
    diverged[0][1].header_only = True
    s, t = diverged[1]  # nan, inf and -inf all in one trial: 3+ diverged rows
    t.header_only, t.style, t.end = False, 2, max(t.end, 6 * s.interval)
    complete = [(s, t) for s, t in trials if t.status == "COMPLETE"]
    s, t = next((s, t) for s, t in complete if s.train_steps > 0)
    t.end = max(t.end, s.train_steps + max(1, s.train_steps // 10))
    complete[-1][1].no_newline = True
    trials[0][1].extra_meta = True
    if not any(c["type"] == "DISCRETE" for s in studies for c in s.configs.values()):
        studies[0].configs["label_smoothing"] = {"type": "DISCRETE", "feasible_points": [0.0],
                                                 "scale": ""}
        for t in studies[0].trials:
            t.params["label_smoothing"] = 0.0
    if len({s.columns for s in studies}) == 1 and len({s.workload for s in studies}) > 1:
        last = studies[-1].workload
        for s in (s for s in studies if s.workload == last):
            s.columns = _columns(last, True, odd=True)
            s.metrics = {c: _metric(c, last, _CURVES[last][1]) for c in s.columns[:-1]}


# ------------------------------------------------------------------------ the members
def _schedule(rng: np.random.Generator, interval: int, end: int, complete: bool) -> np.ndarray:
    """Irregular, strictly increasing evaluation steps from 0 to ``end``."""
    n = int(2.5 * end / interval) + 2  # enough even if every increment is the shortest
    inc = np.maximum(1, np.rint(rng.choice(_STEP_MULTS, n) * interval)).astype(np.int64)
    steps = np.concatenate(([0], np.cumsum(inc)))
    steps = steps[steps <= end]
    return np.append(steps, end) if complete and steps[-1] != end else steps


@cache
def _lookup(n_eval: int) -> pa.Array:
    """``repr(k / n_eval)`` for every k: classification errors as a TF pipeline wrote them."""
    return pa.array([repr(k / n_eval) for k in range(n_eval + 1)])


def _floats(v: np.ndarray, short: bool) -> pa.Array:
    """float32 values for the CSV writer, never integral, for which Arrow omits Python's .0."""
    v32 = v.astype(np.float32)
    whole = np.isfinite(v32) & (v32 == np.trunc(v32))
    v32 = np.where(whole, np.nextafter(v32, np.float32(np.inf)), v32)
    return pa.array(v32 if short else v32.astype(np.float64))


def _column(m: _Metric, v: np.ndarray, bad: np.ndarray, style: int, short: bool,
            j: int) -> pa.Array:
    """The ``j``-th metric column: finite values, then nan/inf once the trial diverged."""
    if m.n_eval:  # a diverged model guesses: chance error
        k = np.clip(np.rint(np.where(bad, m.init, v) * m.n_eval), 0, m.n_eval)
        return pc.take(_lookup(m.n_eval), pa.array(k.astype(np.int64)))
    v = np.clip(v, 2e-4, 1e6)  # where Arrow's shortest digits read like Python's repr
    idx = np.flatnonzero(bad)
    if len(idx):
        if m.init < m.floor or style == 0:  # average precision of a broken model is nan
            v[idx] = np.nan
        elif style == 1:
            v[idx], v[idx[0]] = np.nan, np.inf
        else:
            v[idx] = np.array([-np.inf, np.inf, np.nan])[(np.arange(len(idx)) + j) % 3]
    return _floats(v, short)


def _render_csv(st: _Study, tr: _Trial, float_style: str) -> tuple[bytes, int]:
    """``measurements.csv`` of a trial, and its number of data rows."""
    header = ",".join(st.columns).encode() + b"\n"
    if tr.header_only:
        return header, 0
    rng = np.random.default_rng(tr.seed)
    steps = _schedule(rng, st.interval, tr.end, tr.status == "COMPLETE")
    t = steps.astype(np.float64)
    tau = st.tau * tr.slow
    p = (1.0 + t / tau) ** -_ALPHA
    n = len(steps)
    first_bad = n  # the first diverged row: at least one, three for the mixed style
    if math.isfinite(tr.diverge):
        first_bad = max(0, min(int(n * tr.diverge), n - (3 if tr.style == 2 else 1)))
    bad = np.arange(n) >= first_bad
    cols: dict[str, pa.Array] = {"step": pa.array(steps)}
    for j, name in enumerate(c for c in st.columns if c != "step"):
        m = st.metrics[name]
        shift = 1 + st.gap * tr.phi
        floor = m.floor * shift if m.init > m.floor else m.floor / shift
        v = floor + (m.init - floor) * p
        if m.overfit:
            v += 0.15 * floor * np.log1p(t / (100 * tau))
        noise = rng.standard_normal(n)
        if m.n_eval:  # binomial: an error rate measured on n_eval examples
            v = v + m.sd * np.sqrt(np.clip(v * (1 - v), 0, None) / m.n_eval) * noise
        else:
            v = v * np.exp(m.sd * noise)
        short = float_style == "short" or (float_style == "mixed" and name.startswith("train/"))
        cols[name] = _column(m, v, bad, tr.style, short, j)
    out = io.BytesIO()
    out.write(header)
    table = pa.table({c: cols[c] for c in st.columns})
    pacsv.write_csv(table, out, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    data = out.getvalue()
    return (data[:-1] if tr.no_newline else data), n


def _render_json(st: _Study, tr: _Trial | None) -> bytes:
    """``study.json`` (``tr`` None) or a trial's ``metadata.json``."""
    if tr is None:
        doc: dict[str, Any] = {
            "batch_size": st.batch_size, "dataset": st.dataset,
            "early_stopping": _family(st.workload) == "lm", "model": st.model,
            "optimizer": st.optimizer, "parameter_configs": st.configs,
            "train_steps": st.train_steps, **st.extra}
        return structured.dumps(doc, indent=2).encode() + b"\n"
    doc = {"_internal_study_name": f"bs-{zlib.crc32(st.workload.encode()):08x}-{st.batch_size}",
           "_internal_trial_id": st.internal_base + tr.trial_id, "parameters": tr.params,
           "status": tr.status, "steps": tr.end, "trial_id": tr.trial_id}
    return structured.dumps({**doc, **(_EXTRA_META if tr.extra_meta else {})}).encode()


def _render(plan: _Plan, ref: _Ref) -> tuple[str, bytes | None, int]:
    """A member's name, its data (None for a directory) and its number of CSV rows."""
    kind, a, b = ref
    if kind == _KIND_DIR:
        return plan.dirs[a], None, 0
    st = plan.studies[a]
    if kind == _KIND_STUDY:
        return f"{st.path}/study.json", _render_json(st, None), 0
    tr = st.trials[b]
    if kind == _KIND_META:
        return f"{st.path}/{tr.trial_id}/metadata.json", _render_json(st, tr), 0
    data, rows = _render_csv(st, tr, plan.float_style)
    return f"{st.path}/{tr.trial_id}/measurements.csv", data, rows


def _tar_member(name: str, data: bytes | None) -> bytes:
    """A GNU tar header (long names included) and the padded data, as ``tar cjf`` writes."""
    info = tarfile.TarInfo(name)
    info.mtime, info.uid, info.gid, info.uname, info.gname = _MTIME, 1000, 1000, "bs", "bs"
    if data is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    info.size, info.mode = len(data), 0o644
    pad = b"\0" * (-len(data) % tarfile.BLOCKSIZE)
    return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape") + data + pad


def _init(plan: _Plan) -> None:
    global _PLAN
    _PLAN = plan


def _work(refs: list[_Ref]) -> _Chunk:
    """Render one chunk of members and compress it into one bzip2 stream."""
    assert _PLAN is not None, "_init must run first"
    raw, rows = bytearray(), 0
    for ref in refs:
        name, data, n = _render(_PLAN, ref)
        raw += _tar_member(name, data)
        rows += n
    return bz2.compress(bytes(raw), 9), len(raw), rows


# ------------------------------------------------------------------ order and chunks
def _order(plan: _Plan, order: str, seed: int) -> list[_Ref]:
    """Members in a real tar's walk order (siblings in hash order), or files shuffled."""

    def key(path: str) -> int:
        return zlib.crc32(f"{seed}:{path}".encode())

    def prefixes(path: str) -> list[str]:
        parts = path.split("/")
        return ["/".join(parts[: i + 1]) for i in range(len(parts))]

    def enter(path: str) -> None:
        refs.append((_KIND_DIR, len(plan.dirs), 0))
        plan.dirs.append(path)

    refs: list[_Ref] = []
    seen: set[str] = set()
    for si in sorted(range(len(plan.studies)),
                     key=lambda i: [key(p) for p in prefixes(plan.studies[i].path)]):
        st = plan.studies[si]
        for p in prefixes(st.path):
            if p not in seen:
                seen.add(p)
                enter(p)
        entries = [(key(f"{st.path}/study.json"), -1)]
        entries += [(key(f"{st.path}/{t.trial_id}"), ti) for ti, t in enumerate(st.trials)]
        for _, ti in sorted(entries):
            if ti < 0:
                refs.append((_KIND_STUDY, si, 0))
                continue
            base = f"{st.path}/{st.trials[ti].trial_id}"
            enter(base)
            pair = sorted([(key(base + "/m"), _KIND_META), (key(base + "/c"), _KIND_CSV)])
            refs += [(kind, si, ti) for _, kind in pair]
    if order == "walk":
        return refs
    folders = [r for r in refs if r[0] == _KIND_DIR]
    files = [r for r in refs if r[0] != _KIND_DIR]
    perm = np.random.default_rng([seed, 1]).permutation(len(files))
    return folders + [files[i] for i in perm]


def _chunks(plan: _Plan, refs: list[_Ref], chunk_bytes: int) -> list[list[_Ref]]:
    """Consecutive runs of members of about ``chunk_bytes`` raw bytes (estimated)."""
    chunks: list[list[_Ref]] = [[]]
    size = 0
    for ref in refs:
        if ref[0] == _KIND_CSV:
            st = plan.studies[ref[1]]
            size += 12 * len(st.columns) * (st.trials[ref[2]].end // st.interval + 1)
        else:
            size += 1024
        chunks[-1].append(ref)
        if size >= chunk_bytes:
            chunks.append([])
            size = 0
    return [c for c in chunks if c]


def _compressed(tasks: list[list[_Ref]], plan: _Plan, jobs: int) -> Iterator[_Chunk]:
    """Compressed chunks in order, rendered in ``jobs`` worker processes when worthwhile."""
    # Forked copies of this process (no need to pickle the plan, nothing imported anew);
    # where fork does not exist, this process renders every chunk (curvekit._processes).
    pool = fork_pool(jobs, _init, (plan,)) if jobs > 1 and len(tasks) > 1 else None
    if pool is None:
        _init(plan)
        yield from map(_work, tasks)
        return
    with pool:
        yield from pool.imap(_work, tasks)


# ----------------------------------------------------------------------- public API
def generate_archive(
    path: str | os.PathLike[str],
    *,
    workloads: Sequence[str] | None = None,
    batch_sizes: Mapping[str, Sequence[int]] | None = None,
    trial_fraction: float = 1.0,
    max_trials_per_study: int | None = None,
    evals_scale: float = 1.0,
    order: Literal["shuffled", "walk"] = "shuffled",
    quirks: bool = True,
    seed: int = 0,
    jobs: int | None = None,
    float_style: Literal["mixed", "repr", "short"] = "mixed",
    chunk_bytes: int = 16 << 20,
    progress: Progress | None = None,
) -> Manifest:
    """Write a synthetic archive in the release's layout and return its manifest.

    The defaults generate the full release: all 454 studies with their published trial
    counts (194,399 trials), 66 million evaluation rows, 1.2 GB, about 7 minutes on two
    otherwise idle cores (:func:`full_scale_kwargs`).
    ``workloads`` (manifest names ``base_dir/model/optimizer``) and ``batch_sizes`` (per
    workload) select studies; ``trial_fraction`` scales the published counts per status
    (rounded, keeping one COMPLETE trial), then ``max_trials_per_study`` caps each study
    proportionally (each status present keeps a trial); ``evals_scale`` scales the rows per
    trial. ``order="walk"`` lays members out like ``tar cjf`` (each study together, siblings
    in hash order); ``"shuffled"`` puts directories first, then all files in random order.
    ``float_style`` picks the number format (see the module docstring). The bzip2 output
    is one stream per ``chunk_bytes`` of tar data, compressed at level 9 in ``jobs``
    processes (default: every CPU); the bytes depend on the arguments, not on ``jobs``.
    The file is written to a work file beside it and renamed when complete. ``progress`` (a
    :class:`curvekit.progress.Progress`) hears ``("generate", done, total)``: archive
    members written, after each compressed chunk.

    Examples
    --------
    >>> import tempfile, pathlib, tarfile
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "two.tar.bz2"
    >>> pair = ["cifar_10/resnet_8/sgd", "lm1b/lstm/nesterov_momentum"]
    >>> m = generate_archive(out, workloads=pair, max_trials_per_study=3, evals_scale=0.05)
    >>> m.totals["studies"], m.totals["trials"]
    (20, 60)
    >>> len(tarfile.open(out, "r:bz2").getnames()) > 3 * m.totals["trials"]
    True
    """
    if not (0 < trial_fraction <= 1 and evals_scale > 0 and (max_trials_per_study or 1) >= 1):
        raise ArchiveError(
            f"need 0 < trial_fraction <= 1, evals_scale > 0 and max_trials_per_study >= 1; got "
            f"{trial_fraction}, {evals_scale}, {max_trials_per_study}")
    if order not in ("shuffled", "walk") or float_style not in ("mixed", "repr", "short"):
        raise ArchiveError(f"order must be 'shuffled' or 'walk' (got {order!r}) and float_style "
                           f"'mixed', 'repr' or 'short' (got {float_style!r})")
    real = load_manifest("batch_science")
    plan = _plan(_select(real, workloads, batch_sizes), fraction=trial_fraction,
                 cap=max_trials_per_study, evals_scale=evals_scale, quirks=quirks, seed=seed,
                 float_style=float_style)
    tasks = _chunks(plan, _order(plan, order, seed), chunk_bytes)
    target = Path(path)
    digest, raw_size, rows = hashlib.sha256(), 0, 0
    total, done = sum(map(len, tasks)), 0
    if progress is not None:
        progress("generate", 0, total)
    with output_stream(target, "the generated archive") as f:
        chunks = _compressed(tasks, plan, jobs or os.cpu_count() or 1)
        for task, (blob, raw, n) in zip(tasks, chunks, strict=True):
            f.write(blob)
            digest.update(blob)
            raw_size, rows = raw_size + raw, rows + n
            done += len(task)
            if progress is not None:
                progress("generate", done, total)
        # end of archive: two zero blocks, padded to a whole record like tar(1)
        end = b"\0" * (1024 + (-(raw_size + 1024) % tarfile.RECORDSIZE))
        f.write(blob := bz2.compress(end, 9))
        digest.update(blob)
    options = {"seed": seed, "trial_fraction": trial_fraction, "order": order,
               "max_trials_per_study": max_trials_per_study, "evals_scale": evals_scale,
               "quirks": quirks, "float_style": float_style}
    return _manifest(real, plan, target, digest.hexdigest(), rows, options)


def _manifest(real: Manifest, plan: _Plan, path: Path, sha256: str, rows: int,
              options: dict[str, Any]) -> Manifest:
    """The generated archive's manifest, in the published manifest's JSON shape."""
    data = copy.deepcopy(real.to_dict())
    studies = [{"workload": s.workload, "batch_size": s.batch_size, **s.counts()}
               for s in plan.studies]
    sizes: dict[str, list[int]] = {}
    for s in plan.studies:
        sizes.setdefault(s.workload, []).append(s.batch_size)
    data["dataset"] = "batch_science_synthetic"
    data["title"] = "Synthetic archive in the layout of: " + data["title"]
    data["workloads"] = [{**w, "batch_sizes": sorted(sizes[w["name"]])}
                         for w in data["workloads"] if w["name"] in sizes]
    data["studies"] = studies
    data["totals"] = {"workloads": len(sizes), "studies": len(studies),
                      "trials": sum(len(s.trials) for s in plan.studies),
                      **{k: sum(s[k] for s in studies) for k in STATUSES}}
    data["measurements"] = rows
    data["archive"] = {**data["archive"], "url": path.resolve().as_uri(), "file_name": path.name,
                       "sha256": sha256, "approx_size_bytes": path.stat().st_size}
    data["generator"] = {"module": __name__, **options}
    return Manifest.from_dict(data)


def write_manifest(manifest: Manifest, path: str | os.PathLike[str]) -> Path:
    """Write a manifest's JSON (atomically) and return the path.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> p = write_manifest(tiny_archive(d / "t.tar.bz2"), d / "t.manifest.json")
    >>> Manifest.from_file(p).dataset
    'batch_science_synthetic'
    """
    return write_file(path, structured.dumps(manifest.to_dict(), indent=2) + "\n",
                      "the manifest")


def full_scale_kwargs() -> dict[str, Any]:
    """The :func:`generate_archive` options of the full release (also its defaults).

    >>> full_scale_kwargs()["trial_fraction"]
    1.0
    """
    return {"workloads": None, "batch_sizes": None, "trial_fraction": 1.0,
            "max_trials_per_study": None, "evals_scale": 1.0, "quirks": True}


TINY_STUDIES: dict[str, list[int]] = {  # workload -> batch sizes of tiny_archive
    "cifar_10/resnet_8/sgd": [2, 8192],
    "lm1b/lstm/nesterov_momentum": [16, 1024],
    "mnist_subsets/mnist_6875/simple_cnn_base/nesterov_momentum": [2, 6875],
    "open_images_v4/resnet_50/nesterov_momentum": [128, 4096],
}


def tiny_archive(path: str | os.PathLike[str], seed: int = 0,
                 order: Literal["shuffled", "walk"] = "walk") -> Manifest:
    """A small archive (well under a second) with every quirk, for unit tests.

    Four workloads (ResNet-8 with SGD: no momentum, permuted columns; an LSTM with
    ``step`` last; a two-level base_dir with a full-batch study; Open Images with average
    precision) at two batch sizes each, six trials per study keeping every published
    status, about 30 rows per COMPLETE trial.

    >>> import tempfile, pathlib
    >>> m = tiny_archive(pathlib.Path(tempfile.mkdtemp()) / "tiny.tar.bz2")
    >>> m.totals["studies"], all(m.totals[s] > 0 for s in ("INCOMPLETE", "INFEASIBLE"))
    (8, True)
    """
    return generate_archive(path, workloads=list(TINY_STUDIES), batch_sizes=TINY_STUDIES,
                            max_trials_per_study=6, evals_scale=0.06, order=order, seed=seed,
                            jobs=1)
