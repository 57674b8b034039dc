"""Large-batch training recipes as protocols: how a study's metaparameters are chosen.

The paper's protocol, ``tuned``, searches the metaparameters afresh at every batch size
(quasi-random search, :mod:`curvekit.runner.plan`). The heuristics it is compared with
take one good setting at a **base batch size** B₀ and carry it to every other batch size B
by a rule, with no search (Goyal et al. 2017; Shallue et al. 2019, section 4.7):

* ``linear-scaling``: learning rate η(B) = η₀ · B / B₀;
* ``sqrt-scaling``: η(B) = η₀ · √(B / B₀).

For B > B₀ the rate ramps up linearly from η₀ to η(B) over a **warmup** of W steps (given
in steps, or in epochs of B examples: ``5e``), then decays linearly, the paper's schedule,
to ``end_learning_rate_factor`` · η(B) at the end of the step budget S (so the decay lasts
S − W steps). At B ≤ B₀ the rate is never above η₀ and there is no warmup. Momentum and
the other base metaparameters are kept as they are. Each study is a single point: its
trials differ only in their seed (initialisation and data order).

A protocol's runs are the workload ``NAME/MODEL/OPTIMIZER+PROTOCOL`` (e.g.
``digits/fc_32/sgd+linear-scaling``), beside the tuned ``NAME/MODEL/OPTIMIZER``, which
stays untouched; ``steps-to-result`` reads each like any workload.

>>> p = Protocol.create("linear-scaling", base_batch_size=32,
...                     base_parameters={"learning_rate": 0.1}, warmup="2e")
>>> round(p.learning_rate(128), 6), round(p.learning_rate(16), 6)
(0.4, 0.05)
>>> point = p.parameters(128, steps=500, n_train=1197)
>>> point["learning_rate"], point["warmup_steps"], point["learning_rate_decay_steps"]
(0.4, 18, 482)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from curvekit.errors import RunError

__all__ = ["PROTOCOLS", "SCALING_PROTOCOLS", "TUNED", "Protocol", "Warmup",
           "optimizer_directory", "parse_warmup", "split_optimizer"]

TUNED = "tuned"
SCALING_PROTOCOLS = ("linear-scaling", "sqrt-scaling")
PROTOCOLS = (TUNED, *SCALING_PROTOCOLS)
DEFAULT_END_FACTOR = 0.01
"""``end_learning_rate_factor`` of a protocol whose base setting does not give one."""
_SCHEDULE = ("learning_rate_decay_steps", "warmup_steps", "warmup_start_learning_rate")
_WARMUP = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(e|epochs?|s|steps?)?\s*")


def optimizer_directory(optimizer: str, protocol: str) -> str:
    """The ``optimizer`` part of a protocol's workload name.

    >>> optimizer_directory("sgd", "tuned"), optimizer_directory("sgd", "sqrt-scaling")
    ('sgd', 'sgd+sqrt-scaling')
    """
    return optimizer if protocol == TUNED else f"{optimizer}+{protocol}"


def split_optimizer(directory: str) -> tuple[str, str]:
    """(optimizer, protocol) of an optimizer directory; inverse of :func:`optimizer_directory`.

    >>> split_optimizer("nesterov_momentum+linear-scaling")
    ('nesterov_momentum', 'linear-scaling')
    """
    optimizer, _, protocol = directory.partition("+")
    return optimizer, protocol or TUNED


@dataclass(frozen=True)
class Warmup:
    """A warmup length: ``value`` steps, or ``value`` epochs of the study's batch size."""

    value: float
    unit: str = "steps"

    def steps(self, batch_size: int, n_train: int) -> int:
        """Warmup steps at ``batch_size``: an epoch is ``n_train // batch_size`` steps, as
        the trainer draws them (the remainder of an epoch is skipped)."""
        if self.unit == "steps":
            return int(self.value)
        return round(self.value * max(1, n_train // batch_size))

    def __str__(self) -> str:
        return f"{self.value:g}e" if self.unit == "epochs" else str(int(self.value))


def parse_warmup(text: str | int | float | Warmup) -> Warmup:
    """``200`` or ``"200"`` (steps), ``"5e"`` (epochs); raises :class:`RunError`.

    >>> parse_warmup("5e"), parse_warmup(200)
    (Warmup(value=5.0, unit='epochs'), Warmup(value=200, unit='steps'))
    """
    if isinstance(text, Warmup):
        return text
    if isinstance(text, bool):
        raise RunError(f"warmup {text!r} is not a length; give steps (200) or epochs (5e)")
    if isinstance(text, int | float):
        text = str(text)
    match = _WARMUP.fullmatch(text)
    if match is None:
        raise RunError(f"warmup {text!r} is not a length; give steps (e.g. 200) or epochs "
                       "(e.g. 5e)")
    value, unit = float(match.group(1)), (match.group(2) or "s")
    if unit.startswith("e"):
        return Warmup(value, "epochs")
    if not value.is_integer():
        raise RunError(f"warmup {text!r}: a number of steps must be whole; give epochs with "
                       "an 'e' (e.g. 0.5e)")
    return Warmup(int(value), "steps")


@dataclass(frozen=True)
class Protocol:
    """A scaling protocol with its base setting (see the module docstring)."""

    name: str
    base_batch_size: int
    base_parameters: dict[str, Any]
    warmup: Warmup = field(default_factory=lambda: Warmup(0))
    ghost_batch_size: int | None = None
    base_from: str = "given"

    @classmethod
    def create(cls, name: str, *, base_batch_size: int,
               base_parameters: Mapping[str, Any], warmup: str | int | float | Warmup = 0,
               ghost_batch_size: int | None = None, base_from: str = "given") -> Protocol:
        """Validate a scaling protocol (raises :class:`RunError`).

        ``base_parameters`` holds ``learning_rate`` (η₀) and any other metaparameters the
        trials keep (``momentum``, ``end_learning_rate_factor``, ...); schedule lengths
        in it are dropped, since the protocol sets them per batch size. ``base_from`` says
        where they came from (recorded with the studies).
        """
        if name not in SCALING_PROTOCOLS:
            raise RunError(f"unknown protocol {name!r}; choose {', '.join(PROTOCOLS)}")
        if isinstance(base_batch_size, bool) or int(base_batch_size) < 1:
            raise RunError(f"base batch size must be a positive integer, got "
                           f"{base_batch_size!r}")
        params = {k: v for k, v in base_parameters.items() if k not in _SCHEDULE}
        lr = params.get("learning_rate")
        if (isinstance(lr, bool) or not isinstance(lr, int | float) or not math.isfinite(lr)
                or lr <= 0):
            raise RunError(f"the base learning rate must be a positive number, got {lr!r}; "
                           "pass --base-learning-rate")
        params["learning_rate"] = float(lr)
        params.setdefault("end_learning_rate_factor", DEFAULT_END_FACTOR)
        length = parse_warmup(warmup)
        if length.value < 0:
            raise RunError(f"warmup {length} is negative; give 0 or more steps or epochs")
        if ghost_batch_size is not None and (isinstance(ghost_batch_size, bool)
                                             or int(ghost_batch_size) < 2):
            raise RunError(f"ghost batch size must be at least 2 (batch norm needs two "
                           f"examples to normalize), got {ghost_batch_size!r}")
        return cls(name, int(base_batch_size), params, length,
                   None if ghost_batch_size is None else int(ghost_batch_size), base_from)

    @property
    def base_learning_rate(self) -> float:
        """η₀, the learning rate at the base batch size."""
        return float(self.base_parameters["learning_rate"])

    def learning_rate(self, batch_size: int) -> float:
        """The scaled learning rate η(B) of this protocol."""
        ratio = batch_size / self.base_batch_size
        return self.base_learning_rate * (ratio if self.name == "linear-scaling"
                                          else math.sqrt(ratio))

    def parameters(self, batch_size: int, *, steps: int, n_train: int) -> dict[str, Any]:
        """The trial metaparameters at ``batch_size`` for a step budget of ``steps``.

        Raises :class:`RunError` when the warmup would fill the whole budget, or when the
        ghost batch size does not split the batch into equal virtual batches.
        """
        lr = self.learning_rate(batch_size)
        warmup = self.warmup.steps(batch_size, n_train) if lr > self.base_learning_rate else 0
        if warmup >= steps:
            raise RunError(f"warmup {self.warmup} is {warmup} steps at batch size {batch_size}, "
                           f"not less than its budget of {steps} steps; give a shorter "
                           "--warmup or a larger --steps")
        point = {**self.base_parameters, "learning_rate": lr,
                 "learning_rate_decay_steps": steps - warmup}
        if warmup:
            point["warmup_steps"] = warmup
            point["warmup_start_learning_rate"] = self.base_learning_rate
        ghost = self.ghost_batch_size
        if ghost is not None and ghost < batch_size:
            if batch_size % ghost:
                raise RunError(f"ghost batch size {ghost} does not divide batch size "
                               f"{batch_size}; choose a ghost batch size that divides every "
                               "batch size larger than it (e.g. a power of two)")
            point["ghost_batch_size"] = ghost
        return point

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description, as the plan and ``studies.extra`` hold it."""
        return {"name": self.name, "base_batch_size": self.base_batch_size,
                "base_parameters": dict(sorted(self.base_parameters.items())),
                "warmup": str(self.warmup), "ghost_batch_size": self.ghost_batch_size,
                "base_from": self.base_from}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Protocol:
        """Inverse of :meth:`to_json`."""
        return cls.create(data["name"], base_batch_size=data["base_batch_size"],
                          base_parameters=data["base_parameters"], warmup=data["warmup"],
                          ghost_batch_size=data.get("ghost_batch_size"),
                          base_from=data.get("base_from", "given"))
