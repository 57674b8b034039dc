"""Where trials run: in this process, in local worker processes, or on a Ray cluster.

Every executor takes trial specs and yields :class:`TrialResult` objects as trials finish,
in completion order; the sweep writes each one to its own part at once. Closing the
generator early (an error, Ctrl-C) cancels the trials that have not started.

The unit of work is a *chunk*: up to ``trials_at_once`` trials of one study (consecutive
specs with the same study, budget and device), trained together by
:func:`curvekit.runner.batched.train_trials`; ``trials_at_once=1`` runs each trial alone
with :func:`curvekit.runner.train.run_trial`, the reference. A chunk's results still come
back one per trial, and a chunk's notices (:class:`BatchingFallbackWarning`) are raised
again in this process, wherever the chunk ran.

* ``local`` with one worker runs chunks one after another in this process.
* ``local`` with N workers starts N processes (``spawn``, so no state is shared with the
  parent); each holds the data set once and uses one CPU thread, or one GPU each when the
  device is ``cuda``.
* ``ray`` sends each chunk as a Ray task (one CPU, or one GPU with ``--device cuda``) to the
  cluster at ``ray_address`` (default: a running one, or a local instance). Ray retries a
  task whose worker died; results come back to this process, which writes the parts, so
  workers need no shared file system.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, cast

from curvekit.errors import CurvekitError, CurvekitWarning, RunError
from curvekit.runner.plan import TrialResult, TrialSpec

__all__ = ["EXECUTORS", "chunks", "execute"]

EXECUTORS = ("local", "ray")
_GPU: str | None = None
Chunk = list[TrialSpec]
Done = tuple[list[TrialResult], list[tuple[type[Warning], str]]]
"""A chunk's results and the notices it raised (category, message)."""


def _describe(chunk: Sequence[TrialSpec]) -> str:
    spec = chunk[0]
    ids = (f"trial {spec.trial_id}" if len(chunk) == 1
           else f"trials {', '.join(str(s.trial_id) for s in chunk)}")
    return (f"{ids} of {spec.base_dir}/{spec.model}/{spec.optimizer} "
            f"at batch size {spec.batch_size}")


def _study(spec: TrialSpec) -> tuple[Any, ...]:
    return (spec.base_dir, spec.model, spec.optimizer, spec.batch_size, spec.dataset,
            spec.steps, spec.eval_every, spec.data_dir, spec.device, spec.threads,
            spec.noise_micro_batches)


def chunks(specs: Sequence[TrialSpec], trials_at_once: int | None) -> list[Chunk]:
    """``specs`` cut into runs of consecutive trials of one study, at most
    ``trials_at_once`` each (None: whole studies).

    >>> from curvekit.runner.plan import Sweep
    >>> sweep = Sweep.create("doc", dataset="digits", model="fc_16", optimizers=["sgd"],
    ...                      batch_sizes=[16, 64], trials=3, steps=10, eval_every=10)
    >>> [[s.trial_id for s in c] for c in chunks(sweep.trial_specs(), 2)]
    [[1, 2], [3], [1, 2], [3]]
    """
    if trials_at_once is not None and trials_at_once < 1:
        raise RunError(f"trials at once must be at least 1, got {trials_at_once}")
    out: list[Chunk] = []
    for spec in specs:
        if (out and _study(out[-1][0]) == _study(spec)
                and (trials_at_once is None or len(out[-1]) < trials_at_once)):
            out[-1].append(spec)
        else:
            out.append([spec])
    return out


def _run(chunk: Chunk, batched: bool) -> Done:
    from curvekit.runner.train import run_trial

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CurvekitWarning)
        try:
            # Not by the chunk's length: a study's last trial left to a resumed sweep trains
            # as a batch of one, so its curve is the one it would have had among the others.
            if not batched:
                results = [run_trial(spec) for spec in chunk]
            else:
                from curvekit.runner.batched import train_trials

                results = train_trials(chunk)
        except CurvekitError:
            raise
        except Exception as exc:
            # A user's model or loader failing: name the trials, keep the cause readable.
            raise RunError(f"{_describe(chunk)} failed: {type(exc).__name__}: {exc}") from exc
    notes: list[tuple[type[Warning], str]] = [
        (w.category, str(w.message)) for w in caught if issubclass(w.category, CurvekitWarning)]
    for w in caught:  # anything else is not ours to collect: let it through as it was
        if not issubclass(w.category, CurvekitWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return results, notes


def _deliver(done: Done) -> Iterator[TrialResult]:
    results, notes = done
    for category, message in notes:  # raised again here, wherever the chunk ran
        warnings.warn(message, category, stacklevel=2)
    yield from results


def _init_worker(gpus: Any) -> None:
    global _GPU
    if gpus is not None:
        try:
            _GPU = f"cuda:{gpus.get_nowait()}"
        except queue.Empty:
            _GPU = None


def _run_in_worker(chunk: Chunk, batched: bool) -> Done:
    if _GPU is not None and chunk[0].device.startswith("cuda"):
        from dataclasses import replace

        chunk = [replace(spec, device=_GPU) for spec in chunk]
    return _run(chunk, batched)


def _local(units: Sequence[Chunk], workers: int, gpus: int,
           batched: bool) -> Iterator[TrialResult]:
    if workers <= 1:
        for chunk in units:
            yield from _deliver(_run(chunk, batched))
        return
    context = multiprocessing.get_context("spawn")
    gpu_queue: Any = None
    if gpus:
        gpu_queue = context.Queue()
        for i in range(workers):
            gpu_queue.put(i % gpus)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=_init_worker, initargs=(gpu_queue,))
    pending: dict[Future[Done], Chunk] = {}
    clean = False
    try:
        pending = {pool.submit(_run_in_worker, chunk, batched): chunk for chunk in units}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                chunk = pending.pop(future)
                try:
                    result = future.result()
                except BrokenProcessPool as exc:
                    raise RunError(
                        f"a worker process died while running {_describe(chunk)}: out of "
                        "memory, or a script that cannot be re-imported by a spawned "
                        "process (put the call under `if __name__ == '__main__':`). "
                        "Finished trials are kept: rerun the same command to resume") from exc
                yield from _deliver(result)
        clean = True
    finally:
        pool.shutdown(wait=clean, cancel_futures=True)


def _ray(units: Sequence[Chunk], workers: int, address: str | None,
         device: str, batched: bool) -> Iterator[TrialResult]:
    try:
        import ray
    except ImportError as exc:
        raise RunError('--executor ray needs Ray: pip install -e ".[ray]"') from exc
    started = False
    if not ray.is_initialized():
        options: dict[str, Any] = {"address": address, "include_dashboard": False,
                                   "log_to_driver": False}
        if address is None and not os.environ.get("RAY_ADDRESS"):
            options["num_cpus"] = max(1, workers)
        ray.init(**options)
        started = True
    task = ray.remote(num_cpus=1, num_gpus=1 if device.startswith("cuda") else 0,
                      max_retries=2)(_run)
    refs = {task.remote(chunk, batched): chunk for chunk in units}
    clean = False
    try:
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            chunk = refs.pop(done[0])
            try:
                result: Done = ray.get(done[0])
            except ray.exceptions.RayTaskError as exc:
                # Ray's method is untyped and Ray itself is optional: cast the bound method
                # so the check is the same whether or not Ray is installed.
                unwrap = cast(Callable[[], BaseException], exc.as_instanceof_cause)
                cause = unwrap()
                if isinstance(cause, CurvekitError):
                    raise cause from None
                raise RunError(f"{_describe(chunk)} failed on Ray: {cause}") from exc
            except ray.exceptions.RayError as exc:
                raise RunError(f"{_describe(chunk)} was lost on Ray ({type(exc).__name__}); "
                               "finished trials are kept: rerun the same command to "
                               "resume") from exc
            yield from _deliver(result)
        clean = True
    finally:
        if not clean:
            for ref in refs:
                ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def execute(specs: Sequence[TrialSpec], *, executor: str = "local", workers: int = 1,
            gpus: int = 0, ray_address: str | None = None,
            trials_at_once: int | None = 1) -> Iterator[TrialResult]:
    """Run ``specs`` and yield results as trials finish (see the module docstring).

    ``trials_at_once`` caps the trials of one study trained together (None: whole studies;
    1: one by one).
    """
    if executor not in EXECUTORS:
        raise RunError(f"unknown executor {executor!r}; choose {' or '.join(EXECUTORS)}")
    units = chunks(specs, trials_at_once)
    if not units:  # a finished sweep: start no pool and no Ray instance
        return iter(())
    if executor == "local":
        return _local(units, workers, gpus, trials_at_once != 1)
    return _ray(units, workers, ray_address, specs[0].device, trials_at_once != 1)
