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
* **Gradient noise scale** (opt-in, ``noise_micro_batches`` = m ≥ 2): at every evaluation
  a batch of the trial's batch size is drawn from its own random stream (so training is
  untouched), cut into m micro-batches of ``batch_size // m`` examples, and the squared
  norms of the micro-batch gradients (small batch) and of their mean (big batch) give
  McCandlish et al.'s unbiased estimates (:mod:`curvekit.noise`), recorded as
  ``train/gradient_norm_squared`` (``|G|²``), ``train/gradient_noise_trace`` (``tr(Σ)``)
  and their ratio ``train/gradient_noise_scale`` (``B_simple``, noisy on its own: average
  the two parts over many evaluations before dividing). The loss is the training loss at
  the evaluated weights; batch-norm statistics are those of each micro-batch, and the
  running statistics are restored afterwards.
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
from curvekit.noise import noise_scale_parts
from curvekit.runner.plan import TrialResult, TrialSpec
from curvekit.runner.protocols import split_optimizer
from curvekit.runner.workloads import Splits, build_model, load_dataset, use_ghost_batch_norm

__all__ = ["NOISE_METRICS", "evaluate", "gradient_noise", "learning_rate_at", "resolve_device",
           "run_trial"]

_CACHE: dict[tuple[str, str | None, str, str], Splits] = {}
_EVAL_CHUNK = 8192
NOISE_METRICS = ("train/gradient_norm_squared", "train/gradient_noise_trace",
                 "train/gradient_noise_scale")
"""The columns a trial with ``noise_micro_batches`` records: ``|G|²``, ``tr(Σ)``, B_simple."""


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
    # Inputs take torch's default dtype (float32 unless changed), the models' dtype: a
    # float64 default trains in float64, which the batched trainer's tests compare in.
    dtype = torch.get_default_dtype()
    key = (spec.dataset, spec.data_dir, device, str(dtype))
    if key not in _CACHE:
        _CACHE.clear()
        data = load_dataset(spec.dataset, spec.data_dir).to(torch.device(device))
        _CACHE[key] = Splits(data.name, {k: (x.to(dtype) if x.is_floating_point() else x, y)
                                         for k, (x, y) in data.splits.items()},
                             data.num_classes)
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


def gradient_noise(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
                   micro_batches: int, label_smoothing: float = 0.0) -> dict[str, float]:
    """``|G|²``, ``tr(Σ)`` and B_simple from one batch cut into ``micro_batches`` pieces.

    The small batch is one micro-batch of ``len(y) // micro_batches`` examples (its squared
    gradient norm averaged over the micro-batches), the big batch all of them. The model's
    weights, gradients and buffers (batch-norm running statistics) are left as they were.
    """
    small = len(y) // micro_batches
    if micro_batches < 2 or small < 1:
        raise RunError(f"the noise scale needs at least 2 micro-batches of 1 example, got "
                       f"{micro_batches} micro-batches of a batch of {len(y)}; use "
                       "2 ≤ micro-batches ≤ the smallest batch size")
    params = [p for p in model.parameters() if p.requires_grad]
    buffers = [b.clone() for b in model.buffers()]
    total: torch.Tensor | None = None
    small_sq = 0.0
    for i in range(micro_batches):
        chunk = slice(i * small, (i + 1) * small)
        loss = F.cross_entropy(model(x[chunk]), y[chunk], label_smoothing=label_smoothing)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        flat = torch.cat([g.reshape(-1) if g is not None else torch.zeros_like(p).reshape(-1)
                          for g, p in zip(grads, params, strict=True)]).detach()
        small_sq += float(flat.double().square().sum())
        total = flat.double() if total is None else total + flat.double()
    with torch.no_grad():
        for buffer, saved in zip(model.buffers(), buffers, strict=True):
            buffer.copy_(saved)
    assert total is not None
    big_sq = float((total / micro_batches).square().sum())
    norm_sq, trace = noise_scale_parts(small_sq / micro_batches, big_sq, small,
                                       small * micro_batches)
    ratio = trace / norm_sq if math.isfinite(norm_sq) and norm_sq != 0 else math.nan
    return dict(zip(NOISE_METRICS, (norm_sq, trace, ratio), strict=True))


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
        # Its own stream, so that measuring the noise scale changes nothing in training.
        noise_generator = torch.Generator().manual_seed(spec.seed + 1)

        def record(step: int) -> bool:
            metrics = evaluate(model, data)
            if spec.noise_micro_batches:
                sample = torch.randperm(n_train, generator=noise_generator)[:spec.batch_size]
                sample = sample.to(device)
                metrics.update(gradient_noise(model, x_train[sample], y_train[sample],
                                              spec.noise_micro_batches, smoothing))
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
