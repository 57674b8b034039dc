"""Several trials of one study trained together, as one batched model.

The trials of a study share the data set, model, batch size, step budget and evaluation
points; they differ only in their metaparameters and seed. :func:`train_trials` stacks their
parameters along a leading *trial axis* and takes every trial's step at once, following
:func:`curvekit.runner.train.run_trial` (the one-by-one reference) rule for rule:

* **Initialisation and data order.** Each trial's model is built exactly as one-by-one
  (``torch.manual_seed(seed)``, then :func:`~curvekit.runner.workloads.build_model`) and
  then stacked; each trial shuffles with its own ``torch.Generator().manual_seed(seed)``,
  with the same ``randperm`` calls at the same steps and the same full-batch rule.
* **Schedule and optimizers.** The learning rate of every step comes from
  :func:`~curvekit.runner.train.learning_rate_at`; the updates of ``torch.optim.SGD``
  (weight decay added to the gradient, momentum buffer = first gradient, heavy ball,
  Nesterov ``g + γ·buf``) and ``torch.optim.Adam`` (bias corrections, ``eps`` after the
  square root) are written out on the stacked tensors with per-trial metaparameters,
  label smoothing included.
* **Divergence without a host sync per step.** A trial whose training loss is not finite
  at a step still takes that step (as one-by-one does) and is frozen from then on: its
  parameters, optimizer state and batch-norm statistics are masked out of every later
  update, on the device. Only evaluations read anything back; one finds the frozen trial
  and records its last row at the step after the non-finite loss (frozen weights give the
  same numbers later as then), INFEASIBLE. A non-finite train cross-entropy at an
  evaluation stops a trial there, INFEASIBLE, as one-by-one.
* **Models.** The built-in models (``fc_*``, ``simple_cnn_*``, with or without batch norm
  and ghost batch norm) run as stacked layers: batched matrix products, grouped
  convolutions, and batch norm over (trial, channel) pairs. A user model
  (``module:function``) runs through ``torch.func.vmap`` when it can; when it cannot, or
  with the gradient noise scale (``noise_micro_batches``), the trials run one by one with
  :func:`run_trial`, and a :class:`BatchingFallbackWarning` says so.

What differs from one-by-one is float rounding only (a batched product sums in another
order than a single one): in float64 the curves agree to about 1e-12 relative
(``tests/test_run_batched.py``); in float32 they agree like two machines do.

How many trials fit at once is estimated from the model (parameters, gradients,
optimizer state, activations of a batch and of an evaluation chunk) against the free GPU
memory, or on the CPU against :data:`CPU_BUDGET_BYTES` (a 24 GB machine with room to
spare); :func:`train_trials` splits a larger group.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from curvekit.errors import CurvekitWarning, RunError
from curvekit.runner.names import canonical_model, is_entry_point
from curvekit.runner.plan import TrialResult, TrialSpec
from curvekit.runner.protocols import split_optimizer
from curvekit.runner.train import (
    _EVAL_CHUNK,
    _data,
    learning_rate_at,
    resolve_device,
    run_trial,
)
from curvekit.runner.workloads import GhostBatchNorm, Splits, build_model, use_ghost_batch_norm

__all__ = ["CPU_BUDGET_BYTES", "BatchingFallbackWarning", "trial_bytes", "train_trials",
           "trials_that_fit"]

CPU_BUDGET_BYTES = 12 * 2**30
"""Memory the batched trainer plans to use on a CPU: half of a 24 GB machine, leaving the
rest to the data set, Python and the operating system."""
_GPU_PERCENT = 70  # of the free GPU memory: room for the allocator's fragmentation


class BatchingFallbackWarning(CurvekitWarning):
    """Trials that were asked to train together run one by one (the message says why)."""


def _same_study(specs: Sequence[TrialSpec]) -> None:
    first = specs[0]
    shared = ("base_dir", "model", "optimizer", "batch_size", "dataset", "steps",
              "eval_every", "data_dir", "device", "threads", "noise_micro_batches")
    for spec in specs[1:]:
        differ = [f for f in shared if getattr(spec, f) != getattr(first, f)]
        if differ:
            raise RunError(f"trials trained together must share a study; trial "
                           f"{spec.trial_id} differs from trial {first.trial_id} in "
                           f"{', '.join(differ)}; pass one study's trials at a time")


# ---------------------------------------------------------------------------------------
# Stacked models: forward(x, shared, training) -> logits [T, B, classes]


class _Stacked:
    """Parameters and buffers stacked along the trial axis, and a batched forward."""

    params: list[torch.Tensor]
    buffers: list[torch.Tensor]

    def forward(self, x: torch.Tensor, shared: bool, training: bool) -> torch.Tensor:
        """Logits ``[T, B, classes]``; ``x`` is ``[B, ...]`` for every trial when
        ``shared``, else ``[T, B, ...]``."""
        raise NotImplementedError


_LEAVES = (nn.Flatten, nn.Linear, nn.ReLU, nn.Conv2d, nn.MaxPool2d, nn.BatchNorm1d,
           nn.BatchNorm2d, GhostBatchNorm)


def _leaves(model: nn.Module) -> list[nn.Module] | None:
    """The built-in models' layers in forward order (each is a chain), or None."""
    out: list[nn.Module] = []

    def walk(module: nn.Module) -> bool:
        for child in module.children():
            if isinstance(child, _LEAVES):
                out.append(child)
            elif isinstance(child, nn.Sequential) or type(child).__name__ == "SimpleCNN":
                if not walk(child):
                    return False
            else:
                return False
        return True

    return out if walk(model) else None


def _bn_layer(module: nn.Module) -> nn.modules.batchnorm._BatchNorm:
    layer = module.layer if isinstance(module, GhostBatchNorm) else module
    assert isinstance(layer, nn.modules.batchnorm._BatchNorm)
    return layer


class _Layers(_Stacked):
    """The built-in chains (fc and simple CNN) as stacked layers.

    Activations are ``[T, B, features]`` between dense layers and ``[B, T·C, H, W]``
    between convolutions (the trials' channels side by side, so that a grouped
    convolution, max pooling and batch norm over (trial, channel) pairs are single calls).
    """

    def __init__(self, models: Sequence[nn.Module], layers: Sequence[list[nn.Module]]) -> None:
        self.trials = len(models)
        self.kinds = layers[0]
        self.params, self.buffers = [], []
        self.slots: list[tuple[int, ...]] = []
        for i, layer in enumerate(self.kinds):
            column = [trial[i] for trial in layers]
            if isinstance(layer, nn.Linear | nn.Conv2d):
                self.slots.append((self._param(column, "weight"), self._param(column, "bias")))
            elif isinstance(layer, nn.BatchNorm1d | nn.BatchNorm2d | GhostBatchNorm):
                bns = [_bn_layer(m) for m in column]
                self.slots.append((self._param(bns, "weight"), self._param(bns, "bias"),
                                   self._buffer(bns, "running_mean"),
                                   self._buffer(bns, "running_var")))
            else:
                self.slots.append(())

    def _param(self, modules: Sequence[nn.Module], name: str) -> int:
        stacked = torch.stack([getattr(m, name).detach() for m in modules]).contiguous()
        self.params.append(stacked.requires_grad_(True))
        return len(self.params) - 1

    def _buffer(self, modules: Sequence[nn.Module], name: str) -> int:
        self.buffers.append(torch.stack([getattr(m, name).detach() for m in modules]).clone())
        return len(self.buffers) - 1

    def forward(self, x: torch.Tensor, shared: bool, training: bool) -> torch.Tensor:
        t = self.trials
        layout = "shared" if shared else "trials"
        for layer, slot in zip(self.kinds, self.slots, strict=True):
            if isinstance(layer, nn.Flatten):
                if layout == "channels":
                    x = x.reshape(x.shape[0], t, -1).transpose(0, 1)
                    layout = "trials"
                else:
                    x = x.flatten(1 if layout == "shared" else 2)
            elif isinstance(layer, nn.Linear):
                weight, bias = self.params[slot[0]], self.params[slot[1]]
                if layout == "shared":  # one product with every trial's weights side by side
                    out = torch.addmm(bias.reshape(-1), x, weight.reshape(-1, x.shape[1]).t())
                    x = out.view(x.shape[0], t, -1).transpose(0, 1)
                    layout = "trials"
                else:
                    x = torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
            elif isinstance(layer, nn.Conv2d):
                weight, bias = self.params[slot[0]], self.params[slot[1]]
                groups = 1
                if layout == "trials":
                    x = x.transpose(0, 1).reshape(x.shape[1], -1, *x.shape[3:])
                    groups = t
                elif layout == "channels":
                    groups = t
                x = F.conv2d(x, weight.reshape(-1, *weight.shape[2:]), bias.reshape(-1),
                             layer.stride, layer.padding, layer.dilation, groups)
                layout = "channels"
            elif isinstance(layer, nn.ReLU):
                x = F.relu(x)
            elif isinstance(layer, nn.MaxPool2d):
                if layout == "trials":
                    shape = x.shape
                    x = F.max_pool2d(x.reshape(-1, *shape[2:]), layer.kernel_size, layer.stride,
                                     layer.padding, layer.dilation, layer.ceil_mode)
                    x = x.view(*shape[:2], *x.shape[1:])
                else:
                    x = F.max_pool2d(x, layer.kernel_size, layer.stride, layer.padding,
                                     layer.dilation, layer.ceil_mode)
            else:
                dense = layout == "trials"
                if dense:  # [T, B, C] -> [B, T·C]: batch norm per (trial, feature)
                    b = x.shape[1]
                    x = x.transpose(0, 1).reshape(b, -1)
                x = self._batch_norm(layer, slot, x, training)
                if dense:
                    x = x.view(x.shape[0], t, -1).transpose(0, 1)
        return x

    def _batch_norm(self, layer: nn.Module, slot: tuple[int, ...], x: torch.Tensor,
                    training: bool) -> torch.Tensor:
        bn = _bn_layer(layer)
        weight, bias = self.params[slot[0]].reshape(-1), self.params[slot[1]].reshape(-1)
        mean, var = self.buffers[slot[2]].view(-1), self.buffers[slot[3]].view(-1)
        momentum = float(bn.momentum) if bn.momentum is not None else 0.0
        ghost = layer.ghost_batch_size if isinstance(layer, GhostBatchNorm) else None
        if not training or ghost is None or x.shape[0] <= ghost:
            # Updates the running statistics in place, through the views of the stacks.
            return F.batch_norm(x, mean, var, weight, bias, training, momentum, bn.eps)
        # GhostBatchNorm.forward, with (trial, channel) pairs as the channels.
        chunks = torch.split(x, ghost)
        dims = [0, *range(2, x.dim())]
        outputs = [F.batch_norm(c, None, None, weight, bias, True, 0.0, bn.eps) for c in chunks]
        with torch.no_grad():
            mean.lerp_(torch.stack([c.mean(dim=dims) for c in chunks]).mean(dim=0), momentum)
            var.lerp_(torch.stack([c.var(dim=dims, unbiased=True) for c in chunks]).mean(dim=0),
                      momentum)
        return torch.cat(outputs)


class _Vmapped(_Stacked):
    """Any module, through ``torch.func.vmap`` over ``functional_call``."""

    def __init__(self, models: Sequence[nn.Module]) -> None:
        from torch.func import stack_module_state

        params, buffers = stack_module_state(list(models))  # type: ignore[arg-type]
        self.names = list(params)
        self.buffer_names = list(buffers)
        self.params = [params[n].detach().clone().requires_grad_(True) for n in self.names]
        self.buffers = [buffers[n].clone() for n in self.buffer_names]
        self.module = models[0]

    def forward(self, x: torch.Tensor, shared: bool, training: bool) -> torch.Tensor:
        from torch.func import functional_call, vmap

        self.module.train(training)

        def one(params: list[torch.Tensor], buffers: list[torch.Tensor],
                inputs: torch.Tensor) -> torch.Tensor:
            state = {**dict(zip(self.names, params, strict=True)),
                     **dict(zip(self.buffer_names, buffers, strict=True))}
            out: torch.Tensor = functional_call(self.module, state, (inputs,))
            return out

        mapped: Callable[..., torch.Tensor] = vmap(one, in_dims=(0, 0, None if shared else 0))
        return mapped(self.params, self.buffers, x)


# ---------------------------------------------------------------------------------------
# Building a study's stacked model, and the memory estimate


def _build(spec: TrialSpec, data: Splits, device: str) -> nn.Module:
    # Exactly run_trial's initialisation: the global seed, then the model, then ghost norm.
    torch.manual_seed(spec.seed)
    model = build_model(spec.model, data.input_shape, data.num_classes).to(device)
    ghost = spec.parameters.get("ghost_batch_size")
    if ghost is not None:
        use_ghost_batch_norm(model, int(ghost))
    return model


def _stack(specs: Sequence[TrialSpec], data: Splits, device: str) -> _Stacked | str:
    """The stacked model, or why these trials cannot train together."""
    first = specs[0]
    if first.noise_micro_batches:
        return "the gradient noise scale (noise_micro_batches) is measured one trial at a time"
    models = [_build(spec, data, device) for spec in specs]
    builtin = not is_entry_point(canonical_model(first.model))
    layers = [_leaves(m) for m in models] if builtin else []
    momentum_ok = all(_bn_layer(m).momentum is not None for ms in layers if ms is not None
                      for m in ms if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d
                                                | GhostBatchNorm))
    if builtin and all(ls is not None for ls in layers) and momentum_ok:
        return _Layers(models, [ls for ls in layers if ls is not None])
    if any(isinstance(m, GhostBatchNorm) for model in models for m in model.modules()):
        return "ghost batch norm in a model other than the built-in ones is not batched"
    try:
        stacked = _Vmapped(models)
        # Both ways it will be called: training (per-trial batches unless full batch)
        # and evaluation (one input for all), on two examples, state restored after.
        probe = data.splits["train"][0][:2]
        shared = first.batch_size == data.n_train
        saved = [b.clone() for b in stacked.buffers]
        train = probe if shared else probe.expand(len(specs), *probe.shape)
        logits = stacked.forward(train, shared, True)
        torch.autograd.grad(logits.sum(), stacked.params, allow_unused=True)
        with torch.no_grad():
            evaluated = stacked.forward(probe, True, False)
        for buffer, value in zip(stacked.buffers, saved, strict=True):
            buffer.copy_(value)
        for out in (logits, evaluated):
            if tuple(out.shape[:2]) != (len(specs), 2):
                return f"its batched output has shape {tuple(out.shape)}"
    except Exception as exc:  # noqa: BLE001 - any failure means: train one by one
        return f"torch.func.vmap cannot batch it ({type(exc).__name__}: {exc})".splitlines()[0]
    return stacked


def trial_bytes(spec: TrialSpec, data: Splits, *, eval_chunk: int = _EVAL_CHUNK) -> int:
    """Estimated memory (bytes) one trial of ``spec``'s study adds to a batched group.

    Parameters count four times (weights, gradients, the masked update's copy and the
    optimizer state, twice for Adam), activations three times per training example (the
    forward pass kept for backward, its gradients and a temporary) plus once per example
    of an evaluation chunk, and the trial's own batch of inputs.
    """
    torch.manual_seed(0)
    model = build_model(spec.model, data.input_shape, data.num_classes)
    sizes: list[int] = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: sizes.append(out.numel()))
             for m in model.modules() if not list(m.children())]
    model.eval()
    with torch.no_grad():
        model(data.splits["train"][0][:1].to(torch.get_default_dtype()))
    for hook in hooks:
        hook.remove()
    element = torch.empty((), dtype=torch.get_default_dtype()).element_size()
    params = sum(p.numel() for p in model.parameters())
    state = 2 if split_optimizer(spec.optimizer)[0] == "adam" else 1
    activations = sum(sizes)
    example = math.prod(data.input_shape)
    chunk = min(eval_chunk, max(len(y) for _, y in data.splits.values()))
    return element * (params * (3 + state) + activations * (3 * spec.batch_size + chunk)
                      + example * spec.batch_size)


def trials_that_fit(spec: TrialSpec, data: Splits, device: str) -> int:
    """How many trials of ``spec``'s study fit together on ``device`` (at least 1)."""
    if device.startswith("cuda"):
        free, _total = torch.cuda.mem_get_info(torch.device(device))
        budget = free * _GPU_PERCENT // 100
    else:
        budget = CPU_BUDGET_BYTES
    return max(1, budget // max(1, trial_bytes(spec, data)))


# ---------------------------------------------------------------------------------------
# The optimizer updates, on stacked tensors


@dataclass
class _Hyper:
    """Per-trial metaparameters as float64 ``[T]`` tensors: torch.optim takes them as
    Python floats, and its kernels round them (or what is computed from them) to the
    parameters' dtype where they meet the parameters; the updates below do the same."""

    kind: str
    schedule: torch.Tensor  # [steps, T] float64: learning_rate_at of every step and trial
    momentum: torch.Tensor
    weight_decay: torch.Tensor
    beta1: torch.Tensor
    beta2: torch.Tensor
    epsilon: torch.Tensor
    smoothing: torch.Tensor
    decay_any: bool
    smoothing_any: bool


def _hyper(specs: Sequence[TrialSpec], device: str, dtype: torch.dtype) -> _Hyper:
    kind = split_optimizer(specs[0].optimizer)[0]
    steps = specs[0].steps

    def column(name: str, default: float) -> torch.Tensor:
        return torch.tensor([float(s.parameters.get(name, default)) for s in specs],
                            dtype=torch.float64, device=device)

    # One-by-one gives torch the rate as a Python float (a double): so does the table,
    # rounded to the parameters' dtype where the update uses it, as torch's kernels do.
    table = torch.tensor([[learning_rate_at(step, s.parameters) for s in specs]
                          for step in range(steps)], dtype=torch.float64)
    momentum = column("momentum", 0.0) if kind != "sgd" else column("_", 0.0)
    decay = column("weight_decay", 0.0)
    smoothing = column("label_smoothing", 0.0)
    return _Hyper(kind, table.to(device), momentum, decay,
                  column("beta1", 0.9), column("beta2", 0.999), column("epsilon", 1e-8),
                  smoothing, bool((decay != 0).any()), bool((smoothing != 0).any()))


def _per_trial(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return values.view(-1, *([1] * (like.dim() - 1)))


class _Optimizer:
    """torch.optim.SGD / Adam updates on stacked parameters, masked per trial."""

    def __init__(self, hyper: _Hyper, params: Sequence[torch.Tensor]) -> None:
        self.hyper = hyper
        self.params = list(params)
        self.state: list[list[torch.Tensor]] = []
        self.steps = 0

    @torch.no_grad()
    def step(self, grads: Sequence[torch.Tensor | None], lr: torch.Tensor,
             live: torch.Tensor) -> None:
        h = self.hyper
        first = self.steps == 0
        self.steps += 1
        for i, (param, grad) in enumerate(zip(self.params, grads, strict=True)):
            if grad is None:  # torch.optim skips a parameter without a gradient
                if first:
                    self.state.append([])
                continue
            keep = _per_trial(live, param)

            def cast(value: torch.Tensor, like: torch.Tensor = param) -> torch.Tensor:
                return _per_trial(value, like).to(like.dtype)

            d = grad
            if h.decay_any:
                d = torch.where(cast(h.weight_decay) != 0,
                                grad + cast(h.weight_decay) * param, grad)
            rate = cast(lr)
            if h.kind == "adam":
                if first:
                    self.state.append([torch.zeros_like(param), torch.zeros_like(param)])
                avg, avg_sq = self.state[i]
                new_avg = torch.lerp(avg, d, cast(1 - h.beta1))
                new_sq = avg_sq * cast(h.beta2) + cast(1 - h.beta2) * d * d
                # The bias corrections in double precision, as Python floats are.
                correction1 = 1 - h.beta1 ** self.steps
                correction2 = (1 - h.beta2 ** self.steps).sqrt()
                step_size = cast(lr / correction1)
                denom = new_sq.sqrt() / cast(correction2) + cast(h.epsilon)
                new = param - step_size * (new_avg / denom)
                avg.copy_(torch.where(keep, new_avg, avg))
                avg_sq.copy_(torch.where(keep, new_sq, avg_sq))
            elif h.kind == "sgd":
                if first:
                    self.state.append([])
                new = param - rate * d
            else:
                momentum = cast(h.momentum)
                if first:
                    buffer = d.clone()
                    self.state.append([buffer])
                    new_buffer = buffer
                else:
                    buffer = self.state[i][0]
                    new_buffer = buffer * momentum + d
                    buffer.copy_(torch.where(keep, new_buffer, buffer))
                step = d + momentum * new_buffer if h.kind == "nesterov_momentum" else new_buffer
                new = param - rate * step
            param.copy_(torch.where(keep, new, param))


def _losses(logits: torch.Tensor, target: torch.Tensor, hyper: _Hyper) -> torch.Tensor:
    """Per-trial mean cross-entropy ``[T]`` with per-trial label smoothing, as
    ``F.cross_entropy(..., label_smoothing=ε)``."""
    log_p = F.log_softmax(logits, dim=-1)
    if target.dim() == 1:
        target = target.expand(logits.shape[0], -1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1).mean(dim=-1)
    if not hyper.smoothing_any:
        return nll
    eps = hyper.smoothing.to(logits.dtype)
    smooth = (-log_p.sum(dim=-1) / logits.shape[-1]).mean(dim=-1)
    # Only where ε > 0, so that ε = 0 is exactly the plain loss (0·inf would be NaN).
    return torch.where(eps != 0, (1 - eps) * nll + eps * smooth, nll)


@torch.no_grad()
def _evaluate(model: _Stacked, data: Splits, trials: int) -> list[dict[str, float]]:
    """:func:`curvekit.runner.train.evaluate` for every trial, with one read-back."""
    chunk = max(1, _EVAL_CHUNK // trials)
    names, values = [], []
    for split, (x, y) in data.splits.items():
        errors = torch.zeros(trials, device=y.device, dtype=torch.float64)
        loss = torch.zeros(trials, device=y.device, dtype=torch.float64)
        finite = torch.ones(trials, device=y.device, dtype=torch.bool)
        for start in range(0, len(y), chunk):
            logits = model.forward(x[start:start + chunk], True, False)
            target = y[start:start + chunk]
            per = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                  target.repeat(trials), reduction="none")
            loss += per.view(trials, -1).sum(dim=1).double()
            finite &= torch.isfinite(logits).flatten(1).all(dim=1)
            errors += (logits.argmax(dim=-1) != target).sum(dim=1).double()
        names += [f"{split}/classification_error", f"{split}/cross_entropy_error"]
        values += [torch.where(finite, errors / len(y), math.nan), loss / len(y)]
    table = torch.stack(values, dim=1).cpu().tolist()
    return [dict(zip(names, row, strict=True)) for row in table]


# ---------------------------------------------------------------------------------------
# Training


def _one_by_one(specs: Sequence[TrialSpec], reason: str) -> list[TrialResult]:
    warnings.warn(f"{len(specs)} trials of {specs[0].base_dir}/{specs[0].model}/"
                  f"{specs[0].optimizer} at batch size {specs[0].batch_size} run one by one: "
                  f"{reason}", BatchingFallbackWarning, stacklevel=3)
    return [run_trial(spec) for spec in specs]


def _train_group(specs: Sequence[TrialSpec], data: Splits, device: str) -> list[TrialResult]:
    start = time.perf_counter()
    first = specs[0]
    trials, steps = len(specs), first.steps
    model = _stack(specs, data, device)
    if isinstance(model, str):
        return _one_by_one(specs, model)
    dtype = model.params[0].dtype
    hyper = _hyper(specs, device, dtype)
    optimizer = _Optimizer(hyper, model.params)
    x_train, y_train = data.splits["train"]
    n_train, batch = data.n_train, first.batch_size
    full_batch = batch == n_train
    generators = [torch.Generator().manual_seed(spec.seed) for spec in specs]

    def shuffle() -> torch.Tensor:
        return torch.stack([torch.randperm(n_train, generator=g) for g in generators]
                           ).to(device)

    rows: list[dict[str, list[float]]] = [{"step": []} for _ in specs]
    status: list[str | None] = [None] * trials  # None while the trial trains
    last = [0] * trials

    def record(index: int, step: int, metrics: dict[str, float]) -> None:
        rows[index]["step"].append(step)
        for name, value in metrics.items():
            rows[index].setdefault(name, []).append(value)
        last[index] = step

    # live: takes the next update; stop_at: the step of a diverged trial's last row.
    live = torch.ones(trials, dtype=torch.bool, device=device)
    stop_at = torch.full((trials,), -1, dtype=torch.int64, device=device)
    for i, metrics in enumerate(_evaluate(model, data, trials)):
        record(i, 0, metrics)
        if not math.isfinite(metrics["train/cross_entropy_error"]):
            status[i] = "INFEASIBLE"
            live[i] = False
    order, position = shuffle(), 0
    step = 0
    while step < steps and any(s is None for s in status):
        if full_batch:
            xb, yb = x_train, y_train
        else:
            if position + batch > n_train:
                order, position = shuffle(), 0
            index = order[:, position:position + batch]
            position += batch
            xb, yb = x_train[index], y_train[index]
        loss = _losses(model.forward(xb, full_batch, True), yb, hyper)
        grads = torch.autograd.grad(loss.sum(), model.params, allow_unused=True)
        saved = [b.clone() for b in model.buffers]
        optimizer.step(grads, hyper.schedule[step], live)
        with torch.no_grad():
            for buffer, before in zip(model.buffers, saved, strict=True):
                buffer.copy_(torch.where(_per_trial(live, buffer), buffer, before))
            diverged = live & ~torch.isfinite(loss.detach())
            stop_at = torch.where(diverged, step + 1, stop_at)
            live = live & ~diverged
        step += 1
        if step % first.eval_every == 0 or step == steps:
            evaluated = _evaluate(model, data, trials)
            stops = stop_at.tolist()
            for i, metrics in enumerate(evaluated):
                if status[i] is not None:
                    continue
                if stops[i] >= 0:  # frozen since then: these are its numbers at that step
                    record(i, stops[i], metrics)
                    status[i] = "INFEASIBLE"
                    continue
                record(i, step, metrics)
                if not math.isfinite(metrics["train/cross_entropy_error"]):
                    status[i] = "INFEASIBLE"
                    live[i] = False
    seconds = (time.perf_counter() - start) / trials
    return [TrialResult(spec, status[i] or "COMPLETE", last[i], rows[i], seconds, device,
                        torch.__version__) for i, spec in enumerate(specs)]


def _groups(specs: Sequence[TrialSpec], size: int) -> Iterator[Sequence[TrialSpec]]:
    for begin in range(0, len(specs), size):
        yield specs[begin:begin + size]


def train_trials(specs: Sequence[TrialSpec]) -> list[TrialResult]:
    """Train trials of one study together; one :class:`TrialResult` per spec, in order.

    The trials must share everything but their metaparameters, seed and trial id
    (:class:`RunError` otherwise). Groups larger than :func:`trials_that_fit` are split.
    Each result's ``seconds`` is its share of its group's time.

    Examples
    --------
    >>> from curvekit.runner.plan import Sweep
    >>> sweep = Sweep.create("doc", dataset="digits", model="fc_16", optimizers=["sgd"],
    ...                      batch_sizes=[32], trials=3, steps=20, eval_every=10)
    >>> [(r.spec.trial_id, r.status, r.columns["step"]) for r in
    ...  train_trials(sweep.trial_specs())]  # doctest: +NORMALIZE_WHITESPACE
    [(1, 'COMPLETE', [0, 10, 20]), (2, 'COMPLETE', [0, 10, 20]),
     (3, 'COMPLETE', [0, 10, 20])]
    """
    if not specs:
        return []
    _same_study(specs)
    first = specs[0]
    device = resolve_device(first.device)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(max(1, first.threads))
    try:
        data = _data(first, device)
        if first.batch_size > data.n_train:
            raise RunError(f"batch size {first.batch_size} is larger than the "
                           f"{data.n_train} training examples of {first.dataset}")
        size = trials_that_fit(first, data, device)
        results: list[TrialResult] = []
        for group in _groups(specs, size):
            results += _train_group(group, data, device)
        return results
    finally:
        torch.set_num_threads(previous_threads)
