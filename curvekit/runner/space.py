"""Search spaces in the release's ``parameter_configs`` format, sampled quasi-randomly.

A search space maps each metaparameter name to a config, exactly as a release
``study.json`` writes it::

    {"learning_rate": {"type": "DOUBLE", "min_value": 0.001, "max_value": 10.0,
                       "scale": "LOG_SCALE"},
     "momentum": {"type": "DOUBLE", "min_value": 0.5, "max_value": 0.999,
                  "scale": "REVERSE_LOG_SCALE"},
     "learning_rate_decay_steps": {"type": "INTEGER", "min_value": 500, "max_value": 1000,
                                   "scale": "LINEAR_SCALE"},
     "end_learning_rate_factor": {"type": "DISCRETE", "feasible_points": [0.001, 0.01, 0.1],
                                  "scale": "LOG_SCALE"}}

Sampling follows the paper's protocol: quasi-random search. A scrambled Sobol (or Halton)
sequence in the unit cube, one dimension per metaparameter in name order, is mapped to each
range on its scale:

* ``LINEAR_SCALE`` (or ``""``): uniform between ``min_value`` and ``max_value``;
* ``LOG_SCALE``: ``log(value)`` uniform (``min_value`` > 0);
* ``REVERSE_LOG_SCALE``: ``log(1 - value)`` uniform (``max_value`` < 1), so values crowd
  towards 1, as for momentum;
* ``INTEGER``: the same on ``[min_value - 0.5, max_value + 0.5]``, rounded, so every integer
  gets its share (LINEAR or LOG scale);
* ``DISCRETE``: each feasible point equally likely (its scale is kept as written).

The first ``n`` points of a seeded sequence do not depend on how many are drawn, so a sweep
that asks for more trials later keeps the first trials' metaparameters.

>>> space = SearchSpace.from_configs({
...     "learning_rate": {"type": "DOUBLE", "min_value": 0.01, "max_value": 1.0,
...                       "scale": "LOG_SCALE"}})
>>> points = space.sample(4, seed=0)
>>> all(0.01 <= p["learning_rate"] <= 1.0 for p in points)
True
>>> sorted(p["learning_rate"] < 0.1 for p in points)  # half below the log-midpoint
[False, False, True, True]
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy.stats import qmc

from curvekit.errors import RunError

__all__ = ["SCALES", "TYPES", "Parameter", "Sampler", "SearchSpace"]

TYPES = ("DOUBLE", "INTEGER", "DISCRETE")
SCALES = ("LINEAR_SCALE", "LOG_SCALE", "REVERSE_LOG_SCALE", "")
Sampler = Literal["sobol", "halton"]


def _number(name: str, field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RunError(f"search space: {name}.{field} must be a finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Parameter:
    """One metaparameter's range, in the release's format."""

    name: str
    type: str
    scale: str
    min_value: float | None = None
    max_value: float | None = None
    feasible_points: tuple[float | int, ...] | None = None

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, Any]) -> Parameter:
        """Validate one ``parameter_configs`` entry (raises :class:`RunError`)."""
        if not isinstance(config, Mapping):
            raise RunError(f"search space: {name} must be an object with type, min_value, "
                           f"max_value (or feasible_points) and scale, got {config!r}")
        kind = config.get("type")
        scale = config.get("scale", "")
        if kind not in TYPES:
            raise RunError(f"search space: {name}.type is {kind!r}; expected one of "
                           f"{', '.join(TYPES)}")
        if scale not in SCALES:
            raise RunError(f"search space: {name}.scale is {scale!r}; expected one of "
                           f"{', '.join(repr(s) for s in SCALES)}")
        if kind == "DISCRETE":
            points = config.get("feasible_points")
            if not isinstance(points, list | tuple) or not points:
                raise RunError(f"search space: {name} is DISCRETE and needs a non-empty "
                               f"feasible_points list, got {points!r}")
            for p in points:
                _number(name, "feasible_points", p)
            # Integers stay integers (a batch of 32, not 32.0); duplicates count once.
            values = tuple(sorted({p: None for p in points}, key=float))
            return cls(name, kind, scale, feasible_points=values)
        low = _number(name, "min_value", config.get("min_value"))
        high = _number(name, "max_value", config.get("max_value"))
        if low > high:
            raise RunError(f"search space: {name} has min_value {low} > max_value {high}")
        if kind == "INTEGER":
            if not (low.is_integer() and high.is_integer()):
                raise RunError(f"search space: {name} is INTEGER but its bounds {low}, {high} "
                               "are not whole numbers")
            if scale == "REVERSE_LOG_SCALE":
                raise RunError(f"search space: {name} is INTEGER; REVERSE_LOG_SCALE only "
                               "suits DOUBLE values below 1. Use LINEAR_SCALE or LOG_SCALE")
            if scale == "LOG_SCALE" and low < 1:
                raise RunError(f"search space: {name} is INTEGER on LOG_SCALE and needs "
                               f"min_value >= 1, got {low}")
        if kind == "DOUBLE" and scale == "LOG_SCALE" and low <= 0:
            raise RunError(f"search space: {name} is on LOG_SCALE and needs min_value > 0, "
                           f"got {low}")
        if scale == "REVERSE_LOG_SCALE" and high >= 1:
            raise RunError(f"search space: {name} is on REVERSE_LOG_SCALE (1 - value is "
                           f"log-uniform) and needs max_value < 1, got {high}")
        return cls(name, kind, scale, min_value=low, max_value=high)

    def to_config(self) -> dict[str, Any]:
        """The release-format config of this parameter."""
        if self.feasible_points is not None:
            return {"type": self.type, "feasible_points": list(self.feasible_points),
                    "scale": self.scale}
        assert self.min_value is not None and self.max_value is not None
        if self.type == "INTEGER":
            return {"type": self.type, "min_value": int(self.min_value),
                    "max_value": int(self.max_value), "scale": self.scale}
        return {"type": self.type, "min_value": self.min_value, "max_value": self.max_value,
                "scale": self.scale}

    def value(self, u: float) -> float | int:
        """Map ``u`` in [0, 1) to a value of this parameter on its scale."""
        u = min(max(u, 0.0), math.nextafter(1.0, 0.0))
        if self.feasible_points is not None:
            return self.feasible_points[int(u * len(self.feasible_points))]
        assert self.min_value is not None and self.max_value is not None
        low, high = self.min_value, self.max_value
        if self.type == "INTEGER":
            low, high = low - 0.5, high + 0.5
        if self.scale == "LOG_SCALE":
            x = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
        elif self.scale == "REVERSE_LOG_SCALE":
            a, b = math.log1p(-high), math.log1p(-low)
            x = -math.expm1(a + (1 - u) * (b - a))
        else:
            x = low + u * (high - low)
        if self.type == "INTEGER":
            assert self.min_value is not None and self.max_value is not None
            return int(min(max(round(x), self.min_value), self.max_value))
        return min(max(x, low), high)


@dataclass(frozen=True)
class SearchSpace:
    """A search space: parameters in name order (see the module docstring)."""

    parameters: tuple[Parameter, ...]

    @classmethod
    def from_configs(cls, configs: Mapping[str, Any]) -> SearchSpace:
        """Validate a ``parameter_configs`` mapping (raises :class:`RunError`)."""
        if not isinstance(configs, Mapping):
            raise RunError(f"a search space is an object mapping metaparameter names to "
                           f"configs, got {type(configs).__name__}")
        return cls(tuple(Parameter.from_config(str(name), configs[name])
                         for name in sorted(configs)))

    def to_configs(self) -> dict[str, dict[str, Any]]:
        """The space as release-format ``parameter_configs``."""
        return {p.name: p.to_config() for p in self.parameters}

    @property
    def names(self) -> list[str]:
        """Parameter names, sorted."""
        return [p.name for p in self.parameters]

    def sample(self, n: int, *, seed: int | Sequence[int] = 0,
               method: Sampler = "sobol") -> list[dict[str, float | int]]:
        """``n`` quasi-random points; the first k of them do not depend on ``n``.

        ``seed`` (an int or a sequence of ints, for :class:`numpy.random.SeedSequence`)
        fixes the scrambling.
        """
        if n < 0:
            raise RunError(f"cannot draw {n} trials; ask for a positive number")
        if n == 0:
            return []
        d = len(self.parameters)
        if d == 0:
            return [{} for _ in range(n)]
        rng = np.random.default_rng(np.random.SeedSequence(seed))
        if method == "sobol":
            # Whole powers of two keep Sobol's balance; the first n of them are a prefix of
            # every longer draw with the same scrambling.
            engine: qmc.QMCEngine = qmc.Sobol(d, scramble=True, seed=rng)
            units = engine.random_base2(max(0, math.ceil(math.log2(n))))[:n]
        elif method == "halton":
            engine = qmc.Halton(d, scramble=True, seed=rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                units = engine.random(n)
        else:
            raise RunError(f"unknown sampler {method!r}; choose sobol or halton")
        return [{p.name: p.value(float(u[i])) for i, p in enumerate(self.parameters)}
                for u in units]

    def contains(self, point: Mapping[str, Any]) -> bool:
        """Whether ``point`` has exactly this space's names, each value in range and type."""
        if sorted(point) != self.names:
            return False
        for p in self.parameters:
            v = point[p.name]
            if p.feasible_points is not None:
                if v not in p.feasible_points:
                    return False
                continue
            assert p.min_value is not None and p.max_value is not None
            kind = int if p.type == "INTEGER" else float
            if type(v) is not kind or not p.min_value <= v <= p.max_value:
                return False
        return True
