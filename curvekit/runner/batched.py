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
* **Divergence.** A trial whose training loss is not finite at a step still takes that
  step (as one-by-one does), records a last row at the next step and is INFEASIBLE; a
  non-finite train cross-entropy at an evaluation stops a trial there. On a GPU nothing is
  read back between evaluations (:data:`SYNC_FREE`): the trial's parameters, optimizer
  state and batch-norm statistics are masked out of every later update on the device,
  and the next evaluation records its row (frozen weights give the same numbers later as
  then). On a CPU, where reading a value back costs nothing, the trial leaves the group at
  once. Finished trials leave the group at every evaluation.
* **Evaluation.** Every trial on every example of every split, as one-by-one, with one
  read-back for the whole group: on a GPU all trials at once, on a CPU one trial after
  another (:data:`EVAL_ALL_AT_ONCE`), where a trial's weights and activations then stay in
  the caches.
* **Models.** The built-in models (``fc_*``, ``simple_cnn_*``, with or without batch norm
  and ghost batch norm) run as stacked layers: batched matrix products, grouped
  convolutions, and batch norm over (trial, channel) pairs. A user model
  (``module:function``) runs through ``torch.func.vmap`` when it can; when it cannot, or
  with the gradient noise scale (``noise_micro_batches``), the trials run one by one with
  :func:`run_trial`, and a :class:`BatchingFallbackWarning` says so.

What differs from one-by-one is float rounding only (a batched product sums in another
order than a single one): in float64 the curves agree to 1e-9 relative or better
(``tests/test_run_batched.py``); in float32 they agree like two machines do. A trial's
curve does not depend on which trials it trains beside beyond that rounding (a demo trial
trained alone and in its group of 24: 1.7e-7 relative at most, float32).

How many trials fit at once is estimated from the model (parameters, gradients,
optimizer state, activations of a batch and of an evaluation chunk) against the free GPU
memory, or on the CPU against :data:`CPU_BUDGET_BYTES` (a 24 GB machine with room to
spare) and :data:`CPU_ROWS`; :func:`train_trials` splits a larger group.
"""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from curvekit.errors import BatchingFallbackWarning, RunError
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

__all__ = [
    "CPU_BUDGET_BYTES",
    "CPU_ROWS",
    "EVAL_ALL_AT_ONCE",
    "SYNC_FREE",
    "BatchingFallbackWarning",
    "group_bytes",
    "train_trials",
    "trial_bytes",
    "trials_that_fit",
]

CPU_BUDGET_BYTES = 12 * 2**30
"""Memory the batched trainer plans to use on a CPU: half of a 24 GB machine, leaving the
rest to the data set, Python and the operating system."""
_GPU_PERCENT = 70  # of the free GPU memory: room for the allocator's fragmentation
CPU_ROWS = 4096
"""On a CPU, a group trains at most this many examples per step in all (trials × batch
size): larger groups' activations outgrow the caches, and a large-batch step is already
one efficient product per layer (measured on digits at batch size 1,197: 12 trials in
groups of 3 took 2.6 s, in one group 3.1 s, one by one 4.0 s)."""


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
    """Parameters and buffers stacked along the trial axis, and a batched forward.

    Each parameter is one contiguous ``[T, *shape]`` leaf tensor (a batched product reads
    it in place), each buffer ``[T, *shape]``; dropping finished trials is one index each.
    """

    params: list[torch.Tensor]
    buffers: list[torch.Tensor]

    def _stack_params(self, stacked: Sequence[torch.Tensor]) -> None:
        self.params = [t.detach().clone().contiguous().requires_grad_(True) for t in stacked]

    @property
    def trials(self) -> int:
        """How many trials the group holds now."""
        return int(self.params[0].shape[0])

    def select(self, index: torch.Tensor) -> None:
        """Keep the trials at ``index`` (positions in the group), in that order."""
        self.params = [p.detach()[index].contiguous().requires_grad_(True)
                       for p in self.params]
        self.buffers = [b[index].contiguous() for b in self.buffers]

    def forward(self, x: torch.Tensor, shared: bool, training: bool) -> torch.Tensor:
        """Logits ``[T, B, classes]``; ``x`` is ``[B, ...]`` for every trial when
        ``shared``, else ``[T, B, ...]``."""
        raise NotImplementedError

    def trial(self, k: int) -> _Stacked:
        """Trial ``k`` alone, as a group of one that shares (views) this group's tensors."""
        one = copy.copy(self)
        one.params = [p[k:k + 1] for p in self.params]
        one.buffers = [b[k:k + 1] for b in self.buffers]
        return one


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
        self.kinds = layers[0]
        self.stacked: list[torch.Tensor] = []
        self.buffers = []
        self.slots: list[tuple[int, ...]] = []
        for i, layer in enumerate(self.kinds):
            column = [trial[i] for trial in layers]
            if isinstance(layer, nn.Linear):
                # Stacked as [T, in, out], the layout the batched product reads without a
                # transpose, so that the weights' gradients come out contiguous: an update
                # through a transposed gradient is ten times slower on a CPU.
                self.slots.append((self._param(column, "weight", transpose=True),
                                   self._param(column, "bias")))
            elif isinstance(layer, nn.Conv2d):
                self.slots.append((self._param(column, "weight"), self._param(column, "bias")))
            elif isinstance(layer, nn.BatchNorm1d | nn.BatchNorm2d | GhostBatchNorm):
                bns = [_bn_layer(m) for m in column]
                self.slots.append((self._param(bns, "weight"), self._param(bns, "bias"),
                                   self._buffer(bns, "running_mean"),
                                   self._buffer(bns, "running_var")))
            else:
                self.slots.append(())
        self._stack_params(self.stacked)
        del self.stacked

    def _param(self, modules: Sequence[nn.Module], name: str, transpose: bool = False) -> int:
        values = [getattr(m, name).detach() for m in modules]
        self.stacked.append(torch.stack([v.t() for v in values] if transpose else values))
        return len(self.stacked) - 1

    def _buffer(self, modules: Sequence[nn.Module], name: str) -> int:
        self.buffers.append(torch.stack([getattr(m, name).detach() for m in modules]).clone())
        return len(self.buffers) - 1

    def forward(self, x: torch.Tensor, shared: bool, training: bool) -> torch.Tensor:
        t = self.trials
        params = self.params
        layout = "shared" if shared else "trials"
        for layer, slot in zip(self.kinds, self.slots, strict=True):
            if isinstance(layer, nn.Flatten):
                if layout == "channels":
                    x = x.reshape(x.shape[0], t, -1).transpose(0, 1)
                    layout = "trials"
                else:
                    x = x.flatten(1 if layout == "shared" else 2)
            elif isinstance(layer, nn.Linear):
                weight, bias = params[slot[0]], params[slot[1]]
                if layout == "shared":  # the same inputs for every trial, not copied
                    x = x.expand(t, *x.shape)
                    layout = "trials"
                x = torch.baddbmm(bias.unsqueeze(1), x, weight)
            elif isinstance(layer, nn.Conv2d):
                weight, bias = params[slot[0]], params[slot[1]]
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
                x = F.relu(x, inplace=not training)  # nothing to keep for a backward pass
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
                x = self._batch_norm(layer, params, slot, x, training)
                if dense:
                    x = x.view(x.shape[0], t, -1).transpose(0, 1)
        return x

    def _batch_norm(self, layer: nn.Module, params: list[torch.Tensor], slot: tuple[int, ...],
                    x: torch.Tensor, training: bool) -> torch.Tensor:
        bn = _bn_layer(layer)
        weight, bias = params[slot[0]].reshape(-1), params[slot[1]].reshape(-1)
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

        params, buffers = stack_module_state(list(models))
        self.names = list(params)
        self.buffer_names = list(buffers)
        self._stack_params([params[n] for n in self.names])
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
    except Exception as exc:
        return f"torch.func.vmap cannot batch it ({type(exc).__name__}: {exc})".splitlines()[0]
    return stacked


def _footprint(spec: TrialSpec, data: Splits, eval_chunk: int) -> tuple[int, int]:
    """(bytes each trial adds to a group, bytes the group's evaluations need once)."""
    torch.manual_seed(0)
    model = build_model(spec.model, data.input_shape, data.num_classes)
    sizes: list[int] = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: sizes.append(out.numel()))
             for m in model.modules() if not list(m.children())]
    model.eval()
    with torch.no_grad():  # a probe on the CPU, wherever the data set lies
        model(torch.zeros((1, *data.input_shape), dtype=torch.get_default_dtype()))
    for hook in hooks:
        hook.remove()
    element = torch.empty((), dtype=torch.get_default_dtype()).element_size()
    params = sum(p.numel() for p in model.parameters())
    state = 2 if split_optimizer(spec.optimizer)[0] == "adam" else 1
    activations = sum(sizes)
    example = math.prod(data.input_shape)
    chunk = min(eval_chunk, max(len(y) for _, y in data.splits.values()))
    per_trial = params * (3 + state) + activations * 3 * spec.batch_size \
        + example * spec.batch_size
    return element * per_trial, element * activations * chunk


def trial_bytes(spec: TrialSpec, data: Splits) -> int:
    """Estimated memory (bytes) one trial of ``spec``'s study adds to a batched group.

    Parameters count four times (weights, gradients, the masked update's copy and the
    optimizer state, twice for Adam), activations three times per training example (the
    forward pass kept for backward, its gradients and a temporary), and the trial's own
    batch of inputs. A group's evaluations need one chunk of activations more, whatever
    its size (:func:`group_bytes`): on a CPU its trials are evaluated one after another,
    on a GPU together, on a chunk shared between them.
    """
    return _footprint(spec, data, 0)[0]


def group_bytes(spec: TrialSpec, data: Splits, trials: int, *,
                eval_chunk: int = _EVAL_CHUNK) -> int:
    """Estimated memory (bytes) of a batched group of ``trials`` trials of ``spec``'s study:
    ``trials`` × :func:`trial_bytes` and the evaluation chunk's activations, once."""
    per_trial, shared = _footprint(spec, data, eval_chunk)
    return trials * per_trial + shared


def trials_that_fit(spec: TrialSpec, data: Splits, device: str) -> int:
    """How many trials of ``spec``'s study fit together on ``device`` (at least 1): by the
    memory estimate (:func:`group_bytes`), and on a CPU by :data:`CPU_ROWS` too."""
    per_trial, shared = _footprint(spec, data, _EVAL_CHUNK)
    if device.startswith("cuda"):
        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return max(1, (free * _GPU_PERCENT // 100 - shared) // max(1, per_trial))
    by_memory = (CPU_BUDGET_BYTES - shared) // max(1, per_trial)
    return max(1, min(by_memory, CPU_ROWS // spec.batch_size))


# ---------------------------------------------------------------------------------------
# The optimizer updates, on stacked tensors


_SCHEDULE_BLOCK = 1024  # steps of learning rates computed and sent to the device at once


@dataclass
class _Hyper:
    """Per-trial metaparameters as float64 ``[T, 1]`` columns: torch.optim takes them as
    Python floats, and its kernels round them (or what is computed from them) to the
    parameters' dtype where they meet the parameters; the updates below do the same.

    The learning rates come from :func:`learning_rate_at` itself, for a block of steps at a
    time, up to the budget ``steps`` (memory and transfers stay small however long it is)."""

    kind: str
    parameters: list[dict[str, Any]]
    columns: dict[str, torch.Tensor]
    smoothing_any: bool
    decay_any: bool
    device: str
    steps: int
    block: torch.Tensor | None = None
    block_start: int = 0

    def rates(self, step: int) -> torch.Tensor:
        """``[T]`` float64 learning rates of the update taken at ``step``."""
        if self.block is None or not 0 <= step - self.block_start < len(self.block):
            self.block_start = step
            self.block = torch.tensor(
                [[learning_rate_at(s, p) for p in self.parameters]
                 for s in range(step, min(step + _SCHEDULE_BLOCK, self.steps))],
                dtype=torch.float64).to(self.device)
        return self.block[step - self.block_start]

    def select(self, index: torch.Tensor) -> None:
        """Keep the trials at ``index``."""
        positions = index.tolist()
        self.parameters = [self.parameters[k] for k in positions]
        if self.block is not None:
            self.block = self.block[:, index]
        self.columns = {k: v[index] for k, v in self.columns.items()}


_DEFAULTS = {"momentum": 0.0, "weight_decay": 0.0, "beta1": 0.9, "beta2": 0.999,
             "epsilon": 1e-8, "label_smoothing": 0.0}


def _hyper(specs: Sequence[TrialSpec], device: str) -> _Hyper:
    kind = split_optimizer(specs[0].optimizer)[0]
    columns = {name: torch.tensor([[float(s.parameters.get(name, default))] for s in specs],
                                  dtype=torch.float64, device=device)
               for name, default in _DEFAULTS.items()}
    if kind == "sgd":  # torch.optim.SGD gets no momentum for plain sgd
        columns["momentum"].zero_()
    return _Hyper(kind, [dict(s.parameters) for s in specs], columns,
                  any(float(s.parameters.get("label_smoothing", 0.0)) != 0 for s in specs),
                  any(float(s.parameters.get("weight_decay", 0.0)) != 0 for s in specs),
                  device, specs[0].steps)


def _column(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A ``[T, 1]`` column shaped to broadcast over ``like`` [T, ...], in its dtype."""
    return values.view(-1, *([1] * (like.dim() - 1))).to(like.dtype)


class _Optimizer:
    """torch.optim.SGD / Adam on stacked parameters, in place.

    The formulas and their order are torch's (single-tensor implementations): weight decay
    added to the gradient; SGD's momentum buffer starts as the first gradient, then
    ``buf·γ + g``, Nesterov steps along ``g + γ·buf``; Adam's moments by ``lerp`` and
    ``·β₂ + (1−β₂)·g²``, bias corrections in double precision, ``eps`` added after the
    square root and its correction. A parameter without a gradient is skipped.
    """

    def __init__(self, hyper: _Hyper) -> None:
        self.hyper = hyper
        self.state: dict[int, list[torch.Tensor]] = {}
        self.steps = 0

    def select(self, index: torch.Tensor) -> None:
        """Keep the trials at ``index``."""
        self.state = {i: [s[index].contiguous() for s in state]
                      for i, state in self.state.items()}

    @torch.no_grad()
    def step(self, params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor | None],
             lr: torch.Tensor) -> None:
        """One update of every parameter in place; ``lr`` [T] float64. The gradients are
        used as scratch space."""
        h, c = self.hyper, self.hyper.columns
        self.steps += 1
        for i, (param, grad) in enumerate(zip(params, grads, strict=True)):
            if grad is None:
                continue
            rate = _column(lr, param)
            if h.decay_any:
                grad.addcmul_(_column(c["weight_decay"], param), param)
            if h.kind == "adam":
                if i not in self.state:
                    self.state[i] = [torch.zeros_like(param), torch.zeros_like(param)]
                avg, avg_sq = self.state[i]
                avg.lerp_(grad, _column(1 - c["beta1"], param))
                avg_sq.mul_(_column(c["beta2"], param)).add_(
                    grad * grad * _column(1 - c["beta2"], param))
                correction1 = 1 - c["beta1"] ** self.steps
                correction2 = (1 - c["beta2"] ** self.steps).sqrt()
                denom = (avg_sq.sqrt() / _column(correction2, param)).add_(
                    _column(c["epsilon"], param))
                param.sub_((avg / denom).mul_(_column(lr.unsqueeze(1) / correction1, param)))
                continue
            if h.kind != "sgd":
                momentum = _column(c["momentum"], param)
                if i not in self.state:
                    self.state[i] = [grad.clone()]
                else:
                    self.state[i][0].mul_(momentum).add_(grad)
                buffer = self.state[i][0]
                if h.kind == "nesterov_momentum":
                    grad.addcmul_(momentum, buffer)
                else:
                    grad = buffer
            param.addcmul_(grad, rate, value=-1)  # p − g·η, without a temporary


def _losses(logits: torch.Tensor, target: torch.Tensor, hyper: _Hyper) -> torch.Tensor:
    """Per-trial mean cross-entropy ``[T]`` with per-trial label smoothing, as
    ``F.cross_entropy(..., label_smoothing=ε)``."""
    log_p = F.log_softmax(logits, dim=-1)
    if target.dim() == 1:
        target = target.expand(logits.shape[0], -1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1).mean(dim=-1)
    if not hyper.smoothing_any:
        return nll
    eps = hyper.columns["label_smoothing"].squeeze(1).to(logits.dtype)
    smooth = (-log_p.sum(dim=-1) / logits.shape[-1]).mean(dim=-1)
    # Only where ε > 0, so that ε = 0 is exactly the plain loss (0·inf would be NaN).
    return torch.where(eps != 0, (1 - eps) * nll + eps * smooth, nll)


def _eval_chunks(data: Splits, rows: int
                 ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The rows of every split in order, packed into chunks of at most ``rows``:
    (inputs, targets, each row's split number)."""
    xs: list[torch.Tensor] = []
    ys: list[torch.Tensor] = []
    ids: list[torch.Tensor] = []
    filled = 0
    for number, (x, y) in enumerate(data.splits.values()):
        start = 0
        while start < len(y):
            take = min(rows - filled, len(y) - start)
            xs.append(x[start:start + take])
            ys.append(y[start:start + take])
            ids.append(torch.full((take,), number, dtype=torch.int64, device=y.device))
            filled += take
            start += take
            if filled == rows:
                yield torch.cat(xs), torch.cat(ys), torch.cat(ids)
                xs, ys, ids, filled = [], [], [], 0
    if filled:
        yield torch.cat(xs), torch.cat(ys), torch.cat(ids)


@torch.no_grad()
def _evaluate(model: _Stacked, data: Splits, trials: int, all_at_once: bool
              ) -> list[dict[str, float]]:
    """:func:`curvekit.runner.train.evaluate` for every trial, with one read-back.

    The splits' rows go through in chunks that may span splits (the metrics are summed per
    split). With ``all_at_once`` (:data:`EVAL_ALL_AT_ONCE`) a chunk goes through all trials
    at once; otherwise through one trial after another.
    """
    parts = [model] if all_at_once else [model.trial(k) for k in range(trials)]
    splits = list(data.splits)
    device, count = model.params[0].device, len(splits)
    errors = torch.zeros(trials, count, device=device, dtype=torch.float64)
    loss = torch.zeros(trials, count, device=device, dtype=torch.float64)
    bad = torch.zeros(trials, count, device=device, dtype=torch.float64)
    rows = max(1, _EVAL_CHUNK // trials) if all_at_once else _EVAL_CHUNK
    for x, target, number in _eval_chunks(data, rows):
        logits = torch.cat([part.forward(x, True, False) for part in parts])
        per = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.repeat(trials),
                              reduction="none")
        loss.index_add_(1, number, per.view(trials, -1).double())
        bad.index_add_(1, number, (~torch.isfinite(logits).all(dim=-1)).double())
        errors.index_add_(1, number, (logits.argmax(dim=-1) != target).double())
    sizes = torch.tensor([len(y) for _, y in data.splits.values()], device=device,
                         dtype=torch.float64)
    # Non-finite logits have no meaningful arg-max: such a row must never reach a goal.
    error = torch.where(bad == 0, errors / sizes, math.nan)
    table = torch.stack([error, loss / sizes], dim=2).flatten(1).cpu().tolist()
    names = [f"{split}/{metric}" for split in splits
             for metric in ("classification_error", "cross_entropy_error")]
    return [dict(zip(names, row, strict=True)) for row in table]


# ---------------------------------------------------------------------------------------
# Training


def _one_by_one(specs: Sequence[TrialSpec], reason: str) -> list[TrialResult]:
    warnings.warn(f"{len(specs)} trials of {specs[0].base_dir}/{specs[0].model}/"
                  f"{specs[0].optimizer} at batch size {specs[0].batch_size} run one by one: "
                  f"{reason}", BatchingFallbackWarning, stacklevel=3)
    return [run_trial(spec) for spec in specs]


SYNC_FREE: bool | None = None
"""How a trial that diverges between evaluations is handled. ``True``: without reading
anything back, by masking its updates on the device until the next evaluation (the
default on a GPU, where reading back would stall the queue of work). ``False``: the loss
is read back after every step, which on a CPU costs nothing (no queue to wait for), and the
trial leaves the group at once. None: by the device. Both give the same rows."""

EVAL_ALL_AT_ONCE: bool | None = None
"""How a group is evaluated. ``True``: every chunk of examples goes through all trials at
once (the default on a GPU, whose kernels want the work of all trials). ``False``: through
one trial after another (on a CPU, where each trial's weights and activations then stay in
the caches: with the demo's 24 trials at once a chunk's activations are 15 MB and every
layer waits on memory, 3.6 ms per trial and evaluation against 2.0 ms trial by trial).
None: by the device. Both give the same rows, to rounding."""


def _train_group(specs: Sequence[TrialSpec], data: Splits, device: str) -> list[TrialResult]:
    start = time.perf_counter()
    first = specs[0]
    steps = first.steps
    model = _stack(specs, data, device)
    if isinstance(model, str):
        return _one_by_one(specs, model)
    gpu = device.startswith("cuda")
    sync_free = gpu if SYNC_FREE is None else SYNC_FREE
    all_at_once = gpu if EVAL_ALL_AT_ONCE is None else EVAL_ALL_AT_ONCE
    hyper = _hyper(specs, device)
    optimizer = _Optimizer(hyper)
    x_train, y_train = data.splits["train"]
    n_train, batch = data.n_train, first.batch_size
    full_batch = batch == n_train
    # ids[k]: which trial (index into specs) is at position k of the group now.
    ids = list(range(len(specs)))
    generators = [torch.Generator().manual_seed(spec.seed) for spec in specs]

    def shuffle() -> torch.Tensor:
        return torch.stack([torch.randperm(n_train, generator=generators[i]) for i in ids]
                           ).to(device)

    rows: list[dict[str, list[float]]] = [{"step": []} for _ in specs]
    status = ["COMPLETE"] * len(specs)
    last = [0] * len(specs)

    def record(i: int, step: int, metrics: dict[str, float]) -> None:
        rows[i]["step"].append(step)
        for name, value in metrics.items():
            rows[i].setdefault(name, []).append(value)
        last[i] = step

    # On the sync-free path, live: takes the next update; stop_at: the step of the last row
    # of a trial whose loss was not finite (-1: none).
    live = torch.ones(len(ids), dtype=torch.bool, device=device)
    stop_at = torch.full((len(ids),), -1, dtype=torch.int64, device=device)
    order, position = shuffle(), 0

    def leave(positions: list[int]) -> None:
        """Drop the trials at these positions from the group (they are finished)."""
        nonlocal order, live, stop_at
        if not positions:
            return
        keep = [k for k in range(len(ids)) if k not in set(positions)]
        ids[:] = [ids[k] for k in keep]
        if not ids:
            return
        index = torch.tensor(keep, device=device)
        model.select(index)
        optimizer.select(index)
        hyper.select(index)
        order, live, stop_at = order[index], live[index], stop_at[index]

    done = []
    for k, metrics in enumerate(_evaluate(model, data, len(ids), all_at_once)):
        record(ids[k], 0, metrics)
        if not math.isfinite(metrics["train/cross_entropy_error"]):
            status[ids[k]] = "INFEASIBLE"
            done.append(k)
    leave(done)
    step = 0
    while step < steps and ids:
        if full_batch:
            xb, yb = x_train, y_train
        else:
            if position + batch > n_train:
                order, position = shuffle(), 0
            index = order[:, position:position + batch]
            position += batch
            xb, yb = x_train[index], y_train[index]
        if sync_free:
            before = ([t.detach().clone() for t in model.params],
                      {i: [t.clone() for t in state] for i, state in optimizer.state.items()},
                      [t.clone() for t in model.buffers])
        losses = _losses(model.forward(xb, full_batch, True), yb, hyper)
        grads = torch.autograd.grad(losses.sum(), model.params, allow_unused=True)
        loss = losses.detach()
        optimizer.step(model.params, list(grads), hyper.rates(step))
        if sync_free:
            with torch.no_grad():  # frozen trials keep what they had before this step
                params, states, buffers = before
                kept = [*zip(model.params, params, strict=True),
                        *zip(model.buffers, buffers, strict=True)]
                kept += [pair for i, state in states.items()
                         for pair in zip(optimizer.state[i], state, strict=True)]
                for now, then in kept:
                    keep = live.view(-1, *([1] * (now.dim() - 1)))
                    now.copy_(torch.where(keep, now, then))
                # This step's update counts (one-by-one takes it), later ones do not.
                diverged = live & ~torch.isfinite(loss)
                stop_at = torch.where(diverged, step + 1, stop_at)
                live = live & ~diverged
        step += 1
        if not sync_free:
            bad = ~torch.isfinite(loss)
            if bool(bad.any()):  # a read-back, free on a CPU
                positions = bad.nonzero().flatten().tolist()
                evaluated = _evaluate(model, data, len(ids), all_at_once)
                for k in positions:
                    record(ids[k], step, evaluated[k])
                    status[ids[k]] = "INFEASIBLE"
                leave(positions)
        if ids and (step % first.eval_every == 0 or step == steps):
            evaluated = _evaluate(model, data, len(ids), all_at_once)
            stops = stop_at.tolist()
            done = []
            for k, metrics in enumerate(evaluated):
                if stops[k] >= 0:  # frozen since then: these are its numbers at that step
                    record(ids[k], stops[k], metrics)
                    status[ids[k]] = "INFEASIBLE"
                    done.append(k)
                    continue
                record(ids[k], step, metrics)
                if not math.isfinite(metrics["train/cross_entropy_error"]):
                    status[ids[k]] = "INFEASIBLE"
                    done.append(k)
            leave(done)
    seconds = (time.perf_counter() - start) / len(specs)
    return [TrialResult(spec, status[i], last[i], rows[i], seconds, device,
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
