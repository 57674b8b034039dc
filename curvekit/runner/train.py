"""One trial: train a model for a fixed step budget with the paper's schedule.

The protocol of Shallue et al. (2019), section 3:

* **Steps, not epochs.** The trial takes exactly ``steps`` optimizer steps of
  ``batch_size`` examples drawn without replacement from a fresh shuffle of the training
  set each epoch (a batch never straddles two epochs; the remainder of an epoch is skipped).
* **Schedule.** The learning rate decays linearly from ``learning_rate`` to
  ``end_learning_rate_factor × learning_rate`` over ``learning_rate_decay_steps`` steps,
  then stays constant (no decay when those parameters are absent). A scaling protocol
  (:mod:`curvekit.runner.protocols`) puts a warmup first: over ``warmup_steps`` steps the
  rate ramps linearly from ``warmup_start_learning_rate`` to ``learning_rate``, and the
  decay starts after it.
* **Ghost batch norm.** With ``ghost_batch_size`` the model's batch-norm layers normalize
  each chunk of that many examples on its own
  (:func:`curvekit.runner.workloads.use_ghost_batch_norm`).
* **Optimizers.** ``sgd``; ``momentum`` (heavy ball, v ← γ·v + g, θ ← θ − η·v, as
  TensorFlow's MomentumOptimizer, so the effective learning rate is η / (1 − γ); the
  current η multiplies the whole velocity, so a changing rate needs no momentum correction);
  ``nesterov_momentum``; and ``adam``.
* **Evaluation** every ``eval_every`` steps, at step 0 and at the last step, on every split
  of the data set: ``<split>/classification_error`` and ``<split>/cross_entropy_error``
  (split ``train``, ``val``, ``test``), named as in the release.
* **Divergence.** A non-finite training loss stops the trial, which is INFEASIBLE; a final
  evaluation row at that step is kept (with NaN or inf, like the release's diverged trials).
  Otherwise the trial is COMPLETE.

Each trial seeds torch from its spec, so the same spec gives the same curve on the same
machine and torch build (bit for bit on CPU with a fixed thread count).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.nn.functional as F

from curvekit.errors import RunError
from curvekit.runner.plan import TrialResult, TrialSpec
from curvekit.runner.protocols import split_optimizer
from curvekit.runner.workloads import Splits, build_model, load_dataset, use_ghost_batch_norm

__all__ = ["evaluate", "learning_rate_at", "resolve_device", "run_trial"]

_CACHE: dict[tuple[str, str | None, str], Splits] = {}
_EVAL_CHUNK = 8192


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when a GPU is visible, else ``cpu``; other names are checked."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RunError(f"--device {device}: torch sees no CUDA GPU here; use --device cpu "
                       "or auto")
    try:
        torch.device(device)
    except RuntimeError as exc:
        raise RunError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N") from exc
    return device


def _data(spec: TrialSpec, device: str) -> Splits:
    # A worker process runs many trials of one sweep: load (and move) the data once.
    key = (spec.dataset, spec.data_dir, device)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = load_dataset(spec.dataset, spec.data_dir).to(torch.device(device))
    return _CACHE[key]


def learning_rate_at(step: int, parameters: dict[str, Any]) -> float:
    """The learning rate of the update taken at ``step`` (0-based).

    >>> p = {"learning_rate": 1.0, "end_learning_rate_factor": 0.1,
    ...      "learning_rate_decay_steps": 100}
    >>> [round(learning_rate_at(step, p), 6) for step in (0, 50, 100, 500)]
    [1.0, 0.55, 0.1, 0.1]
    >>> warm = {**p, "warmup_steps": 10, "warmup_start_learning_rate": 0.5}
    >>> [round(learning_rate_at(step, warm), 6) for step in (0, 5, 10, 60, 110)]
    [0.5, 0.75, 1.0, 0.55, 0.1]
    """
    lr = float(parameters["learning_rate"])
    warmup = int(parameters.get("warmup_steps", 0))
    if step < warmup:
        start = float(parameters.get("warmup_start_learning_rate", lr))
        return start + (lr - start) * step / warmup
    step -= max(warmup, 0)
    factor = float(parameters.get("end_learning_rate_factor", 1.0))
    decay = int(parameters.get("learning_rate_decay_steps", 0))
    if decay <= 0:
        return lr
    return lr * (1.0 - (1.0 - factor) * min(step, decay) / decay)


def _optimizer(spec: TrialSpec, params: Any) -> torch.optim.Optimizer:
    p = spec.parameters
    lr = float(p["learning_rate"])
    decay = float(p.get("weight_decay", 0.0))
    optimizer = split_optimizer(spec.optimizer)[0]
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(float(p.get("beta1", 0.9)),
                                                      float(p.get("beta2", 0.999))),
                                eps=float(p.get("epsilon", 1e-8)), weight_decay=decay)
    momentum = float(p.get("momentum", 0.0)) if optimizer != "sgd" else 0.0
    return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=decay,
                           nesterov=optimizer == "nesterov_momentum")


@torch.no_grad()
def evaluate(model: torch.nn.Module, data: Splits) -> dict[str, float]:
    """Classification error and mean cross-entropy on every split."""
    model.eval()
    out: dict[str, float] = {}
    for split, (x, y) in data.splits.items():
        errors, loss, finite = 0.0, 0.0, True
        for start in range(0, len(y), _EVAL_CHUNK):
            logits = model(x[start:start + _EVAL_CHUNK])
            target = y[start:start + _EVAL_CHUNK]
            loss += float(F.cross_entropy(logits, target, reduction="sum"))
            finite = finite and bool(torch.isfinite(logits).all())
            errors += float((logits.argmax(dim=1) != target).sum())
        # Non-finite logits have no meaningful arg-max: such a row must never reach a goal.
        out[f"{split}/classification_error"] = errors / len(y) if finite else math.nan
        out[f"{split}/cross_entropy_error"] = loss / len(y)
    model.train()
    return out


def run_trial(spec: TrialSpec) -> TrialResult:
    """Train one trial and return its status and evaluation rows."""
    start = time.perf_counter()
    device = resolve_device(spec.device)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(max(1, spec.threads))
    try:
        data = _data(spec, device)
        n_train = data.n_train
        if spec.batch_size > n_train:
            raise RunError(f"batch size {spec.batch_size} is larger than the {n_train} "
                           f"training examples of {spec.dataset}")
        generator = torch.Generator().manual_seed(spec.seed)
        torch.manual_seed(spec.seed)
        model = build_model(spec.model, data.input_shape, data.num_classes).to(device)
        ghost = spec.parameters.get("ghost_batch_size")
        if ghost is not None:
            use_ghost_batch_norm(model, int(ghost))
        optimizer = _optimizer(spec, model.parameters())
        smoothing = float(spec.parameters.get("label_smoothing", 0.0))
        x_train, y_train = data.splits["train"]
        full_batch = spec.batch_size == n_train
        rows: dict[str, list[float]] = {"step": []}

        def record(step: int) -> bool:
            metrics = evaluate(model, data)
            rows["step"].append(step)
            for name, value in metrics.items():
                rows.setdefault(name, []).append(value)
            return math.isfinite(metrics["train/cross_entropy_error"])

        status, step = "COMPLETE", 0
        order, position = torch.randperm(n_train, generator=generator).to(device), 0
        if not record(0):
            status = "INFEASIBLE"
        while status == "COMPLETE" and step < spec.steps:
            lr = learning_rate_at(step, spec.parameters)
            for group in optimizer.param_groups:
                group["lr"] = lr
            if full_batch:
                xb, yb = x_train, y_train
            else:
                if position + spec.batch_size > n_train:
                    order = torch.randperm(n_train, generator=generator).to(device)
                    position = 0
                index = order[position:position + spec.batch_size]
                position += spec.batch_size
                xb, yb = x_train[index], y_train[index]
            loss = F.cross_entropy(model(xb), yb, label_smoothing=smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            step += 1
            if not math.isfinite(loss.item()):
                # The loss of the batch before this update was already non-finite.
                record(step)
                status = "INFEASIBLE"
            elif (step % spec.eval_every == 0 or step == spec.steps) and not record(step):
                status = "INFEASIBLE"
        return TrialResult(spec, status, step, rows, time.perf_counter() - start, device,
                           torch.__version__)
    finally:
        torch.set_num_threads(previous_threads)
