"""A sweep's plan: studies × trials, their metaparameters and seeds (no torch needed).

A :class:`Sweep` is a workload family (one data set, one model, one or more optimizers)
at several batch sizes. Each (optimizer, batch size) is a study with its own search space
and step budget; its trials take the first ``trials`` points of a quasi-random sequence
seeded by (sweep seed, workload, batch size). Each trial's own seed (initialisation and
data order) comes from the same numbers plus its trial id, so one trial can be rerun alone
and gives the same curve.

>>> sweep = Sweep.create("digits", dataset="digits", model="fc-32", optimizers=["sgd"],
...                      batch_sizes=[16, 64], trials=2, steps=100, eval_every=50)
>>> [(t.batch_size, t.trial_id) for t in sweep.trial_specs()]
[(16, 1), (16, 2), (64, 1), (64, 2)]
>>> sweep.trial_specs()[0].key.workload
'digits/fc_32/sgd'
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from curvekit import structured
from curvekit.errors import RunError
from curvekit.records import StudyKey, Workload
from curvekit.runner.limits import (
    MAX_BATCH_SIZE,
    MAX_SEED,
    MAX_STEPS,
    MAX_TRIALS,
    check_count,
)
from curvekit.runner.names import (
    OPTIMIZERS,
    canonical_dataset,
    canonical_model,
    dataset_directory,
    model_directory,
)
from curvekit.runner.protocols import Protocol, optimizer_directory
from curvekit.runner.space import SearchSpace

__all__ = ["PLAN_FORMAT", "Sweep", "TrialResult", "TrialSpec", "default_space"]

PLAN_FORMAT = 1

KNOWN_PARAMETERS = {
    "learning_rate", "momentum", "end_learning_rate_factor", "learning_rate_decay_steps",
    "label_smoothing", "beta1", "beta2", "epsilon", "weight_decay",
    "warmup_steps", "warmup_start_learning_rate", "ghost_batch_size",
}
_LEARNING_RATES = {"sgd": (0.01, 10.0), "momentum": (0.001, 1.0),
                   "nesterov_momentum": (0.001, 1.0), "adam": (1e-5, 0.1)}


def default_space(optimizer: str, steps: int) -> dict[str, dict[str, Any]]:
    """The default search space for ``optimizer`` at a step budget, in release format.

    The learning rate is log-uniform over four decades; momentum (for ``momentum`` and
    ``nesterov_momentum``) has 1 − momentum log-uniform in [0.001, 0.5]; the learning rate
    decays linearly to a factor in {0.001, 0.01, 0.1} over 50–100% of the budget.

    >>> sorted(default_space("nesterov_momentum", 1000))
    ['end_learning_rate_factor', 'learning_rate', 'learning_rate_decay_steps', 'momentum']
    """
    if optimizer not in _LEARNING_RATES:
        raise RunError(f"unknown optimizer {optimizer!r}; choose from {', '.join(OPTIMIZERS)}")
    low, high = _LEARNING_RATES[optimizer]
    space: dict[str, dict[str, Any]] = {
        "learning_rate": {"type": "DOUBLE", "min_value": low, "max_value": high,
                          "scale": "LOG_SCALE"},
        "end_learning_rate_factor": {"type": "DISCRETE", "feasible_points": [0.001, 0.01, 0.1],
                                     "scale": "LOG_SCALE"},
        "learning_rate_decay_steps": {"type": "INTEGER", "min_value": max(1, steps // 2),
                                      "max_value": max(1, steps), "scale": "LINEAR_SCALE"},
    }
    if optimizer in ("momentum", "nesterov_momentum"):
        space["momentum"] = {"type": "DOUBLE", "min_value": 0.5, "max_value": 0.999,
                             "scale": "REVERSE_LOG_SCALE"}
    return space


def _stable(text: str) -> int:
    return zlib.crc32(text.encode())


@dataclass(frozen=True)
class TrialSpec:
    """Everything one trial needs; picklable, so it travels to worker processes and Ray.

    ``optimizer`` is the workload's optimizer directory: the optimizer's name, followed by
    ``+PROTOCOL`` for a scaling protocol (:mod:`curvekit.runner.protocols`).
    ``noise_micro_batches`` (0: off) records the gradient noise scale at every evaluation
    (:func:`curvekit.runner.train.gradient_noise`).
    """

    base_dir: str
    model: str
    optimizer: str
    batch_size: int
    trial_id: int
    dataset: str
    parameters: dict[str, Any]
    steps: int
    eval_every: int
    seed: int
    data_dir: str | None = None
    device: str = "cpu"
    threads: int = 1
    noise_micro_batches: int = 0

    @property
    def key(self) -> StudyKey:
        """The study this trial belongs to."""
        return StudyKey(self.base_dir, model_directory(self.model), self.optimizer,
                        self.batch_size)


@dataclass(frozen=True)
class TrialResult:
    """A finished trial: status, steps taken and its evaluation rows, column by column."""

    spec: TrialSpec
    status: str
    steps: int
    columns: dict[str, list[float]]
    seconds: float
    device: str
    torch_version: str


@dataclass(frozen=True)
class Sweep:
    """Studies × trials of one data set and model (see the module docstring)."""

    base_dir: str
    dataset: str
    model: str
    optimizers: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    trials: int
    steps: dict[int, int]
    eval_every: int
    seed: int = 0
    sampler: str = "sobol"
    spaces: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    data_dir: str | None = None
    protocol: Protocol | None = None
    noise_micro_batches: int = 0

    @classmethod
    def create(cls, base_dir: str | None, *, dataset: str, model: str,
               optimizers: Sequence[str], batch_sizes: Sequence[int], trials: int,
               steps: int | Mapping[int, int], eval_every: int, seed: int = 0,
               sampler: str = "sobol", space: Mapping[str, Any] | None = None,
               data_dir: str | None = None, protocol: Protocol | None = None,
               n_train: int | None = None, noise_micro_batches: int = 0) -> Sweep:
        """Validate the options and build the plan (raises :class:`RunError`).

        ``space`` is one ``parameter_configs`` mapping for every study, or a mapping from
        optimizer name to one; without it each optimizer gets :func:`default_space`.
        With a scaling ``protocol`` there is no search: each study's space is the single
        point the protocol gives it (``n_train``, the training-set size, turns a warmup
        in epochs into steps), and its trials differ only in their seed.
        ``noise_micro_batches`` ≥ 2 records the gradient noise scale at every evaluation
        from that many micro-batches of a batch (0: not recorded).
        """
        dataset, model = canonical_dataset(dataset), canonical_model(model)
        base_dir = (base_dir or dataset_directory(dataset)).strip("/")
        opts = tuple(dict.fromkeys(optimizers))
        for opt in opts:
            if opt not in OPTIMIZERS:
                raise RunError(f"unknown optimizer {opt!r}; choose from {', '.join(OPTIMIZERS)}")
        if not opts:
            raise RunError("give at least one optimizer")
        # The store's one name rule, before anything runs (the optimizers are known names).
        Workload.parse(f"{base_dir}/{model_directory(model)}/{opts[0]}", error=RunError,
                       fix="give a data-set directory such as 'digits' or 'my_runs/digits'")
        if not batch_sizes:
            raise RunError("give at least one batch size")
        sizes = tuple(sorted({check_count(b, "batch size", 1, MAX_BATCH_SIZE)
                              for b in batch_sizes}))
        check_count(trials, "trials", 1, MAX_TRIALS)
        check_count(eval_every, "eval_every", 1, MAX_STEPS)
        check_count(seed, "seed", 0, MAX_SEED)
        check_count(noise_micro_batches, "noise micro-batches", 0, MAX_BATCH_SIZE)
        budget = ({b: check_count(steps, "steps", 1, MAX_STEPS) for b in sizes}
                  if not isinstance(steps, Mapping) else
                  {check_count(b, "steps' batch size", 1, MAX_BATCH_SIZE):
                   check_count(s, f"steps at batch size {b}", 1, MAX_STEPS)
                   for b, s in steps.items()})
        missing = [b for b in sizes if b not in budget]
        if missing:
            raise RunError(f"every batch size needs a positive step budget; missing for "
                           f"{missing}")
        if noise_micro_batches and not 2 <= noise_micro_batches <= sizes[0]:
            raise RunError(f"noise micro-batches {noise_micro_batches}: the noise scale "
                           f"compares a micro-batch with the whole batch, so give 2 to the "
                           f"smallest batch size ({sizes[0]}), or 0 to not record it")
        if sampler not in ("sobol", "halton"):
            raise RunError(f"unknown sampler {sampler!r}; choose sobol or halton")
        per_opt: dict[str, Any] = {}
        if space is not None and not isinstance(space, Mapping):
            raise RunError(f"a search space is a mapping of metaparameter names to configs "
                           f"(a JSON object), or of optimizer names to such mappings; got "
                           f"{type(space).__name__}")
        if protocol is not None and space is not None:
            raise RunError(f"the {protocol.name} protocol does not search, so it takes no "
                           "search space; drop --space (or use --protocol tuned)")
        if protocol is not None and protocol.warmup.unit == "epochs" and n_train is None:
            raise RunError(f"warmup {protocol.warmup} is in epochs: give the training-set "
                           "size (n_train) to turn it into steps")
        if space is not None and set(space) and set(space) <= set(OPTIMIZERS):
            per_opt = dict(space)
        spaces: dict[str, dict[int, dict[str, Any]]] = {}
        for opt in opts:
            spaces[opt] = {}
            for b in sizes:
                given = per_opt.get(opt, space if not per_opt else None)
                if protocol is not None:
                    configs = _point_space(protocol.parameters(b, steps=budget[b],
                                                               n_train=n_train or 1))
                elif given is not None:
                    configs = dict(given)
                else:
                    configs = default_space(opt, budget[b])
                spaces[opt][b] = _check_space(configs, opt)
        return cls(base_dir, dataset, model, opts, sizes, int(trials),
                   {b: budget[b] for b in sizes}, int(eval_every), int(seed), sampler, spaces,
                   data_dir, protocol, int(noise_micro_batches))

    @property
    def protocol_name(self) -> str:
        """``tuned``, or the scaling protocol's name."""
        return "tuned" if self.protocol is None else self.protocol.name

    def directory(self, optimizer: str) -> str:
        """The optimizer part of ``optimizer``'s workload name (with ``+PROTOCOL``)."""
        return optimizer_directory(optimizer, self.protocol_name)

    def workloads(self) -> list[str]:
        """The store workloads this sweep writes, one per optimizer."""
        model = model_directory(self.model)
        return [f"{self.base_dir}/{model}/{self.directory(opt)}" for opt in self.optimizers]

    def study_seed(self, optimizer: str, batch_size: int) -> list[int]:
        """Entropy of a study's quasi-random sequence."""
        workload = f"{self.base_dir}/{model_directory(self.model)}/{self.directory(optimizer)}"
        return [self.seed, _stable(workload), batch_size]

    def trial_specs(self, *, device: str = "cpu", threads: int = 1,
                    counts: Mapping[int, int] | None = None) -> list[TrialSpec]:
        """Every trial of the sweep, by optimizer, batch size and trial id.

        ``counts`` (batch size → trials) takes only the first ``counts[b]`` trials of each
        study, the same trials a sweep of that many trials has (an adaptive run's rounds);
        a batch size it leaves out gets none.
        """
        specs = []
        for opt in self.optimizers:
            for b in self.batch_sizes:
                count = self.trials if counts is None else min(self.trials, counts.get(b, 0))
                if not count:
                    continue
                space = SearchSpace.from_configs(self.spaces[opt][b])
                entropy = self.study_seed(opt, b)
                points = space.sample(count, seed=entropy,
                                      method=self.sampler)  # type: ignore[arg-type]
                for trial_id, params in enumerate(points, start=1):
                    seed = int(np.random.SeedSequence([*entropy, trial_id])
                               .generate_state(1)[0])
                    specs.append(TrialSpec(self.base_dir, self.model, self.directory(opt), b,
                                           trial_id,
                                           self.dataset, params, self.steps[b], self.eval_every,
                                           seed, self.data_dir, device, threads,
                                           self.noise_micro_batches))
        return specs

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description (batch-size keys become strings)."""
        data = asdict(self)
        data["steps"] = {str(b): s for b, s in self.steps.items()}
        data["spaces"] = {o: {str(b): c for b, c in per.items()}
                          for o, per in self.spaces.items()}
        # A tuned sweep's plan stays as it was before protocols existed (same plan.json).
        data.pop("protocol")
        if not self.noise_micro_batches:  # likewise a sweep that does not record it
            data.pop("noise_micro_batches")
        if self.protocol is not None:
            data["protocol"] = self.protocol.to_json()
        return {"plan_format": PLAN_FORMAT, **data}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sweep:
        """Inverse of :meth:`to_json`."""
        if data.get("plan_format") != PLAN_FORMAT:
            raise RunError(f"plan format {data.get('plan_format')!r} is not {PLAN_FORMAT}; "
                           "this work folder was written by another curvekit version")
        fields = {k: v for k, v in data.items() if k != "plan_format"}
        fields["optimizers"] = tuple(fields["optimizers"])
        fields["batch_sizes"] = tuple(fields["batch_sizes"])
        fields["steps"] = {int(b): s for b, s in fields["steps"].items()}
        fields["spaces"] = {o: {int(b): c for b, c in per.items()}
                            for o, per in fields["spaces"].items()}
        protocol = fields.pop("protocol", None)  # plans written before protocols: tuned
        return cls(**fields, protocol=None if protocol is None else Protocol.from_json(protocol))

    def differences(self, other: Sweep) -> list[str]:
        """Fields in which ``other`` is not this sweep or an extension of it.

        An extension may have more trials and more batch sizes: every trial of this sweep
        is then a trial of ``other`` with the same metaparameters and seed.
        """
        shared = [b for b in self.batch_sizes if b in other.batch_sizes]
        if len(shared) < len(self.batch_sizes):
            return ["batch_sizes"]
        mine = replace(self, trials=0, batch_sizes=(), steps={}, spaces={})
        theirs = replace(other, trials=0, batch_sizes=(), steps={}, spaces={})
        a, b = mine.to_json(), theirs.to_json()
        out = {k for k in a if structured.dumps(a[k], sort_keys=True) != structured.dumps(b[k],
                                                                              sort_keys=True)}
        if any(self.steps[x] != other.steps[x] for x in shared):
            out.add("steps")
        if any(structured.dumps(self.spaces[o][x], sort_keys=True)
               != structured.dumps(other.spaces.get(o, {}).get(x), sort_keys=True)
               for o in self.optimizers if o in other.optimizers for x in shared):
            out.add("spaces")
        return sorted(out)


def _point_space(point: Mapping[str, Any]) -> dict[str, Any]:
    """A search space holding one point: how a protocol study's configs say "no search"."""
    return {name: {"type": "DISCRETE", "feasible_points": [value], "scale": ""}
            for name, value in point.items()}


def _check_space(configs: dict[str, Any], optimizer: str) -> dict[str, Any]:
    space = SearchSpace.from_configs(configs)
    unknown = sorted(set(space.names) - KNOWN_PARAMETERS)
    if unknown:
        raise RunError(f"search space: unknown metaparameters {unknown}; the runner uses "
                       f"{', '.join(sorted(KNOWN_PARAMETERS))}")
    if "learning_rate" not in space.names:
        raise RunError("search space: learning_rate is required")
    has_momentum = "momentum" in space.names
    if optimizer in ("momentum", "nesterov_momentum") and not has_momentum:
        raise RunError(f"search space: {optimizer} needs a momentum range")
    if optimizer in ("sgd", "adam") and has_momentum:
        raise RunError(f"search space: {optimizer} has no momentum; remove it from the space "
                       "or use the momentum optimizer (or give one space per optimizer)")
    adam_only = sorted({"beta1", "beta2", "epsilon"} & set(space.names))
    if adam_only and optimizer != "adam":
        raise RunError(f"search space: {adam_only} only apply to adam, not {optimizer}")
    return space.to_configs()
