"""``curvekit.run()``: the paper's measurement protocol on your own hardware.

A sweep trains one model on one data set with one or more optimizers at several batch
sizes; each (optimizer, batch size) is a study of ``trials`` quasi-random trials (see
:mod:`curvekit.runner.plan`). Finished trials are written one Parquet part each to the work
folder (default ``<home>/runs/<name>/<model>``), so running the same command again after a
crash or Ctrl-C resumes with every finished trial. When all trials are done, each
optimizer's results go into the store as a workload ``<name>/<model>/<optimizer>``, which
``steps-to-result``, ``fit`` and ``plot`` then read like any release workload.

With a scaling ``protocol`` (:mod:`curvekit.runner.protocols`) there is no search: each
batch size trains the point the protocol derives from a base setting, ``trials`` times with
different seeds, into the workload ``<name>/<model>/<optimizer>+<protocol>`` (work folder
``<home>/runs/<name>/<model>+<protocol>``).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curvekit.errors import RunError
from curvekit.home import confined, resolve_home
from curvekit.progress import Progress
from curvekit.records import release_workloads
from curvekit.runner.adaptive import Adaptive, AdaptiveResult
from curvekit.runner.executors import EXECUTORS, execute
from curvekit.runner.limits import MAX_BATCH_SIZE, MAX_TRIALS, MAX_WORKERS, check_count
from curvekit.runner.names import (
    canonical_dataset,
    dataset_directory,
    import_folders,
    model_directory,
)
from curvekit.runner.parts import finished_trials, open_work_dir, write_part
from curvekit.runner.plan import Sweep, TrialSpec
from curvekit.runner.protocols import PROTOCOLS, TUNED, Protocol, Warmup, parse_warmup
from curvekit.values import exact_integer

__all__ = ["BASE_METRIC", "Adaptive", "Progress", "RunResult", "base_setting", "run"]

FULL = "full"


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` did."""

    workloads: list[str]
    work_dir: Path
    trials: int
    ran: int
    resumed: int
    statuses: dict[str, int]
    seconds: float
    added: list[Any] = field(default_factory=list)
    adaptive: AdaptiveResult | None = None


ADAPTIVE_FIRST_TRIALS = 2
"""An adaptive run's first round: this many trials at each of its batch sizes
(:func:`curvekit.runner.adaptive.first_grid`), unless ``trials`` says otherwise."""


def _check_adaptive(adaptive: Adaptive, protocol: Protocol | None,
                    optimizers: Sequence[str], *, store: bool) -> Adaptive:
    if protocol is not None:
        raise RunError(f"--adaptive chooses where the search's trials go; the {protocol.name} "
                       "protocol does not search: drop --adaptive or --protocol")
    opts = list(dict.fromkeys(optimizers))
    if len(opts) != 1:
        raise RunError(f"an adaptive run measures one workload's B_crit: give one optimizer, "
                       f"not {', '.join(opts)} (run one command per optimizer)")
    if not store:
        raise RunError("an adaptive run reads each round's steps to result from the store: "
                       "drop --no-store")
    return adaptive


def _require_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise RunError("training needs PyTorch and scikit-learn: "
                       'pip install -e ".[train]"') from exc
    return torch


def _batch_sizes(sizes: Sequence[int | str], dataset: str, data_dir: str | None) -> list[int]:
    out: list[int] = []
    for size in sizes:
        if isinstance(size, str) and size.strip().lower() == FULL:
            from curvekit.runner.workloads import load_dataset

            out.append(load_dataset(dataset, data_dir).n_train)
            continue
        value = exact_integer(size) if isinstance(size, str) else size
        if value is None:
            raise RunError(f"batch size {size!r} is not an integer (or 'full')")
        out.append(check_count(value, "batch size", 1, MAX_BATCH_SIZE))
    return out


def _check_names(workloads: Sequence[str]) -> None:
    taken = sorted(set(workloads) & release_workloads())
    if taken:
        raise RunError(f"{', '.join(taken)} is a workload of the published release; give the "
                       "run another name (e.g. my_runs/mnist) so both can live in the store")


BASE_METRIC = "val/classification_error"
"""How the best trial of a tuned study is chosen as a protocol's base setting: the lowest
value of this metric reached, then the earliest step, then the lowest trial id."""
_MOMENTUM = ("momentum", "nesterov_momentum")


def base_setting(home: Path, workload: str, batch_size: int) -> tuple[dict[str, Any], str]:
    """The metaparameters of the best trial of ``workload``'s study at ``batch_size`` (by
    :data:`BASE_METRIC`), and a note saying which trial it was."""
    from curvekit.errors import CurvekitError
    from curvekit.measure import best as best_values
    from curvekit.selection import Selection
    from curvekit.store.store import Store

    fix = ("pass --base-learning-rate (and --base-parameter momentum=... for momentum "
           "optimizers), or run the tuned sweep first")
    try:
        store = Store.open(home)
    except CurvekitError as exc:
        raise RunError(f"no base setting: {exc}; {fix}") from exc
    with store:
        if workload not in store.workloads():
            raise RunError(f"no base setting: the store has no tuned workload {workload} to take "
                           f"the best trial at batch size {batch_size} from; {fix}")
        best = best_values(store, Selection(workload, BASE_METRIC), explain=False)
        row = best.filter(best["batch_size"] == batch_size)
        if row.is_empty():
            have = sorted(best["batch_size"].to_list())
            raise RunError(f"no base setting: {workload} has no COMPLETE trial with "
                           f"{BASE_METRIC} at batch size {batch_size} (it has {have}); give "
                           f"--base-batch-size one of those, or {fix}")
        record = row.to_dicts()[0]
        params = {k: v for k, v in store.trial_parameters(
            workload, batch_size, int(record["trial_id"])).items() if v is not None}
    note = (f"{workload} trial {record['trial_id']} at batch size {batch_size} "
            f"(best {BASE_METRIC} {record[BASE_METRIC]:.4g})")
    return params, note


def _protocol(name: str, sweep_name: str | None, *, dataset: str, model: str,
              optimizers: Sequence[str], home: Path, base_batch_size: int | None,
              base_learning_rate: float | None, base_parameters: Mapping[str, Any] | None,
              warmup: str | int | float | Warmup, ghost_batch_size: int | None
              ) -> Protocol | None:
    """The sweep's protocol, its base setting resolved (None for ``tuned``)."""
    if name not in PROTOCOLS:
        raise RunError(f"unknown protocol {name!r}; choose {', '.join(PROTOCOLS)}")
    length = parse_warmup(warmup)
    if name == TUNED:
        given = [option for option, value in (
            ("--base-batch-size", base_batch_size), ("--base-learning-rate", base_learning_rate),
            ("--base-parameter", base_parameters or None),
            ("--warmup", length.value or None), ("--ghost-batch-size", ghost_batch_size))
            if value is not None]
        if given:
            raise RunError(f"{', '.join(given)} only apply to the scaling protocols; add "
                           "--protocol linear-scaling (or sqrt-scaling), or drop them")
        return None
    if base_batch_size is None:
        raise RunError(f"the {name} protocol scales from a base batch size: pass "
                       "--base-batch-size")
    base_batch_size = check_count(base_batch_size, "base batch size", 1, MAX_BATCH_SIZE)
    if ghost_batch_size is not None:
        ghost_batch_size = check_count(ghost_batch_size, "ghost batch size", 2, MAX_BATCH_SIZE)
    opts = list(dict.fromkeys(optimizers))
    if len(opts) != 1:
        raise RunError(f"the {name} protocol takes one optimizer, got {', '.join(opts)}; "
                       "run one command per optimizer (each gets its own base setting)")
    optimizer = opts[0]
    params = dict(base_parameters or {})
    if base_learning_rate is not None:
        params["learning_rate"] = base_learning_rate
    source = "given"
    if "learning_rate" not in params:
        from curvekit.runner.names import model_directory

        base_dir = (sweep_name or dataset_directory(dataset)).strip("/")
        tuned, source = base_setting(home, f"{base_dir}/{model_directory(model)}/{optimizer}",
                                     int(base_batch_size))
        params = {**tuned, **params}
    if optimizer in _MOMENTUM and "momentum" not in params:
        raise RunError(f"{optimizer} needs a momentum in the base setting; pass "
                       "--base-parameter momentum=0.9 (for example)")
    if optimizer not in _MOMENTUM and "momentum" in params:
        raise RunError(f"{optimizer} has no momentum; drop momentum from the base setting")
    return Protocol.create(name, base_batch_size=base_batch_size, base_parameters=params,
                           warmup=length, ghost_batch_size=ghost_batch_size, base_from=source)



def _import_folders(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    """``--import-path`` folders as absolute paths; RunError for one that is not a folder."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    folders = []
    for given in paths:
        folder = Path(given).expanduser().absolute()
        if not folder.is_dir():
            raise RunError(f"--import-path {os.fspath(given)!r} is not a folder; give the "
                           "folder that holds your module (the one with my_models.py or "
                           "my_models/ in it)")
        folders.append(str(folder))
    return folders


def run(
    name: str | None = None,
    *,
    dataset: str = "digits",
    model: str = "fc_128_128",
    optimizers: Sequence[str] = ("nesterov_momentum",),
    batch_sizes: Sequence[int | str] = (16, 64, 256),
    trials: int | None = None,
    steps: int | Mapping[int, int] = 1000,
    eval_every: int = 50,
    space: Mapping[str, Any] | None = None,
    seed: int = 0,
    sampler: str = "sobol",
    device: str = "auto",
    workers: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    home: str | os.PathLike[str] | None = None,
    work_dir: str | os.PathLike[str] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    store: bool = True,
    progress: Progress | None = None,
    protocol: str = TUNED,
    base_batch_size: int | None = None,
    base_learning_rate: float | None = None,
    base_parameters: Mapping[str, Any] | None = None,
    warmup: str | int | float = 0,
    ghost_batch_size: int | None = None,
    noise_micro_batches: int = 0,
    trials_at_once: int | None = None,
    import_paths: Sequence[str | os.PathLike[str]] = (),
    adaptive: Adaptive | None = None,
) -> RunResult:
    """Run a sweep (or resume it) and add its workloads to the store.

    Parameters
    ----------
    name
        The workloads' data-set directory (``base_dir``); default: the data set's name.
        Each optimizer becomes a workload ``name/<model>/<optimizer>``.
    dataset, model
        Built-in names (``digits``, ``mnist``, ``fashion_mnist``, ``cifar_10``;
        ``fc_128_128``, ``simple_cnn_base``, ...) or ``package.module:function``.
    optimizers
        Any of ``sgd``, ``momentum``, ``nesterov_momentum``, ``adam``.
    batch_sizes
        Integers, or ``"full"`` for the whole training set.
    trials, steps, eval_every
        Trials per study (default 8; 1 seed with a scaling protocol); step budget (one for
        all, or per batch size); evaluation interval.
    space
        A ``parameter_configs`` search space for every study, or one per optimizer;
        default: :func:`curvekit.runner.plan.default_space`.
    device
        ``auto`` (a GPU when torch sees one, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``.
    workers, executor, ray_address
        ``local`` with ``workers`` processes (default 1, or one per GPU), or ``ray``.
    home, work_dir, data_dir
        The store's home; the sweep's work folder (default ``<home>/runs/<name>/<model>``);
        where torchvision data sets are.
    store
        Add the results to the store when every trial has finished.
    progress
        Called as ``progress("trials", done, total)`` after each trial is saved (a
        :class:`curvekit.progress.Progress`); an exception it raises stops the sweep,
        keeping every trial saved so far.
    protocol
        ``tuned`` (the paper's search at every batch size), ``linear-scaling`` or
        ``sqrt-scaling`` (:mod:`curvekit.runner.protocols`: one optimizer; ``trials`` is
        then the number of seeds per batch size).
    base_batch_size, base_learning_rate, base_parameters
        A scaling protocol's base setting: the batch size it scales from, its learning
        rate and other metaparameters (``momentum``, ``end_learning_rate_factor``, ...).
        Without a learning rate, the best trial of the tuned workload
        ``name/<model>/<optimizer>`` at the base batch size in the store gives them
        (:data:`BASE_METRIC`); given values override its.
    warmup, ghost_batch_size
        A scaling protocol's warmup, in steps (``200``) or epochs (``"5e"``); the ghost
        batch size for models with batch norm.
    noise_micro_batches
        Record the gradient noise scale (``train/gradient_noise_scale`` and its parts) at
        every evaluation, from this many micro-batches of a batch (≥ 2; 0: off). It costs
        one more forward and backward pass of a batch per evaluation.
    trials_at_once
        At most this many trials of a study train together as one batched model
        (:mod:`curvekit.runner.batched`; same protocol, seeds and data order). Default: the
        whole study, as many as the memory estimate allows (the free GPU memory, or
        :data:`~curvekit.runner.batched.CPU_BUDGET_BYTES` on a CPU). ``1`` trains each
        trial alone with :func:`~curvekit.runner.train.run_trial`, the reference.
    import_paths
        Folders where a ``package.module:function`` data set or model is looked up first
        (``--import-path``), in this process and in every worker; then Python's import
        path. curvekit adds no other folder: not the working folder.
    adaptive
        An :class:`~curvekit.runner.adaptive.Adaptive` run (``--adaptive``): one optimizer,
        trained in rounds whose trials go where they shrink B_crit's interval most per
        example processed (:mod:`curvekit.runner.adaptive`), until the interval's relative
        width reaches the target or the trial budget is spent; ``trials`` is then the first
        round's trials per batch size (default 2). The result's ``adaptive`` holds the
        rounds and why the run stopped.

    Examples
    --------
    >>> import tempfile
    >>> home = tempfile.mkdtemp()
    >>> result = run("doc", model="fc_16", optimizers=["sgd"], batch_sizes=[32], trials=2,
    ...              steps=20, eval_every=10, home=home, device="cpu")
    >>> result.workloads, result.ran
    (['doc/fc_16/sgd'], 2)
    """
    start = time.perf_counter()
    torch = _require_torch()
    folders = _import_folders(import_paths)
    with import_folders(folders):  # the parent, too, may load the data set (batch size full)
        if executor not in EXECUTORS:
            raise RunError(f"unknown executor {executor!r}; choose {' or '.join(EXECUTORS)}")
        data_text = None if data_dir is None else str(Path(data_dir).expanduser())
        dataset = canonical_dataset(dataset)
        home_path = resolve_home(home)
        chosen = _protocol(protocol, name, dataset=dataset, model=model, optimizers=optimizers,
                           home=home_path, base_batch_size=base_batch_size,
                           base_learning_rate=base_learning_rate, base_parameters=base_parameters,
                           warmup=warmup, ghost_batch_size=ghost_batch_size)
        if trials is None:  # a search needs points; a scaling protocol trains one setting
            trials = 8 if chosen is None else 1
            if adaptive is not None:
                trials = ADAPTIVE_FIRST_TRIALS
        initial = trials
        if adaptive is not None:
            adaptive = _check_adaptive(adaptive.check(), chosen, optimizers, store=store)
            check_count(trials, "trials", 1, MAX_TRIALS)
            trials = max(adaptive.trial_budget, trials)  # no study outgrows the budget
        n_train = None
        if chosen is not None and chosen.warmup.unit == "epochs":
            from curvekit.runner.workloads import load_dataset

            n_train = load_dataset(dataset, data_text).n_train
        sweep = Sweep.create(name, dataset=dataset, model=model, optimizers=optimizers,
                             batch_sizes=_batch_sizes(batch_sizes, dataset, data_text),
                             trials=trials, steps=steps, eval_every=eval_every, seed=seed,
                             sampler=sampler, space=space, data_dir=data_text, protocol=chosen,
                             n_train=n_train, noise_micro_batches=noise_micro_batches)
        _check_names(sweep.workloads())
        folder_name = model_directory(sweep.model) + ("" if chosen is None else f"+{chosen.name}")
        # the default folder is in the home, so it stays there: a link out of it is refused
        folder = (Path(work_dir).expanduser() if work_dir is not None
                  else confined(home_path, home_path / "runs" / sweep.base_dir / folder_name))
        if executor == "ray":
            resolved = device  # resolved on the worker that runs the trial
            gpus = 0
        else:
            from curvekit.runner.train import resolve_device

            resolved = resolve_device(device)
            gpus = torch.cuda.device_count() if resolved == "cuda" else 0
        if workers is None:
            workers = max(1, gpus)
        check_count(workers, "workers", 1, MAX_WORKERS)
        if trials_at_once is not None:
            check_count(trials_at_once, "trials at once", 1, MAX_TRIALS)
        open_work_dir(folder, sweep)

        def train(specs: list[TrialSpec], total: int) -> tuple[int, int]:
            """Train the specs without a saved part; (ran, found saved)."""
            done = finished_trials(folder, specs)
            todo = [s for i, s in enumerate(specs) if i not in done]
            ran = 0
            results = execute(todo, executor=executor, workers=workers, gpus=gpus,
                              ray_address=ray_address, trials_at_once=trials_at_once,
                              import_paths=folders)
            try:
                for result in results:
                    write_part(folder, result)
                    ran += 1
                    if progress is not None:
                        progress("trials", total - len(todo) + ran, total)
            finally:
                # Stops the workers of an interrupted sweep; the saved parts stay.
                close = getattr(results, "close", None)
                if close is not None:
                    close()
            return ran, len(done)

        if adaptive is not None:
            from curvekit.runner.adaptive import run_adaptive

            done_run = run_adaptive(sweep, folder, adaptive, initial=initial, home=home_path,
                                    device=resolved, train=train)
            return RunResult(sweep.workloads(), folder, done_run.trials, done_run.ran,
                             done_run.resumed, done_run.statuses, time.perf_counter() - start,
                             done_run.added, done_run.result)
        specs = sweep.trial_specs(device=resolved)
        ran, resumed = train(specs, len(specs))
        finished = finished_trials(folder, specs)
        missing = len(specs) - len(finished)
        if missing:
            raise RunError(f"{missing} of {len(specs)} trials have no result in {folder}; rerun "
                           "the same command to run them")
        statuses = dict(Counter(meta["status"] for meta, _, _ in finished.values()))
        added: list[Any] = []
        if store:
            from curvekit.runner.collect import sweep_tables, workload_data
            from curvekit.store.update import add_workload

            tables = sweep_tables(sweep, specs, finished, folder)
            origin = {"format": "curvekit-run", "tool": "curvekit run", "work_dir": str(folder),
                      "plan": sweep.to_json()}
            for data in workload_data(tables, origin):
                added.append(add_workload(home_path, data, replace=True))
        return RunResult(sweep.workloads(), folder, len(specs), ran, resumed, statuses,
                         time.perf_counter() - start, added)
