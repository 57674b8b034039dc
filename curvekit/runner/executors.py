"""Where trials run: in this process, in local worker processes, or on a Ray cluster.

Every executor takes trial specs and yields :class:`TrialResult` objects as trials finish,
in completion order; the sweep writes each one to its own part at once. Closing the
generator early (an error, Ctrl-C) cancels the trials that have not started.

* ``local`` with one worker runs trials one after another in this process.
* ``local`` with N workers starts N processes (``spawn``, so no state is shared with the
  parent); each holds the data set once and uses one CPU thread, or one GPU each when the
  device is ``cuda``.
* ``ray`` sends each trial as a Ray task (one CPU, or one GPU with ``--device cuda``) to the
  cluster at ``ray_address`` (default: a running one, or a local instance). Ray retries a
  task whose worker died; results come back to this process, which writes the parts, so
  workers need no shared file system.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, cast

from curvekit.errors import CurvekitError, RunError
from curvekit.runner.plan import TrialResult, TrialSpec

__all__ = ["EXECUTORS", "execute"]

EXECUTORS = ("local", "ray")
_GPU: str | None = None


def _describe(spec: TrialSpec) -> str:
    return (f"trial {spec.trial_id} of {spec.base_dir}/{spec.model}/{spec.optimizer} "
            f"at batch size {spec.batch_size}")


def _run(spec: TrialSpec) -> TrialResult:
    from curvekit.runner.train import run_trial

    try:
        return run_trial(spec)
    except CurvekitError:
        raise
    except Exception as exc:
        # A user's model or loader failing: name the trial, keep the cause readable.
        raise RunError(f"{_describe(spec)} failed: {type(exc).__name__}: {exc}") from exc


def _init_worker(gpus: Any) -> None:
    global _GPU
    if gpus is not None:
        try:
            _GPU = f"cuda:{gpus.get_nowait()}"
        except queue.Empty:
            _GPU = None


def _run_in_worker(spec: TrialSpec) -> TrialResult:
    if _GPU is not None and spec.device.startswith("cuda"):
        from dataclasses import replace

        spec = replace(spec, device=_GPU)
    return _run(spec)


def _local(specs: Sequence[TrialSpec], workers: int, gpus: int) -> Iterator[TrialResult]:
    if workers <= 1:
        for spec in specs:
            yield _run(spec)
        return
    context = multiprocessing.get_context("spawn")
    gpu_queue: Any = None
    if gpus:
        gpu_queue = context.Queue()
        for i in range(workers):
            gpu_queue.put(i % gpus)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=_init_worker, initargs=(gpu_queue,))
    pending: dict[Future[TrialResult], TrialSpec] = {}
    clean = False
    try:
        pending = {pool.submit(_run_in_worker, spec): spec for spec in specs}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                spec = pending.pop(future)
                try:
                    result = future.result()
                except BrokenProcessPool as exc:
                    raise RunError(
                        f"a worker process died while running {_describe(spec)}: out of "
                        "memory, or a script that cannot be re-imported by a spawned "
                        "process (put the call under `if __name__ == '__main__':`). "
                        "Finished trials are kept: rerun the same command to resume") from exc
                yield result
        clean = True
    finally:
        pool.shutdown(wait=clean, cancel_futures=True)


def _ray(specs: Sequence[TrialSpec], workers: int, address: str | None,
         device: str) -> Iterator[TrialResult]:
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
    refs = {task.remote(spec): spec for spec in specs}
    clean = False
    try:
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            spec = refs.pop(done[0])
            try:
                result: TrialResult = ray.get(done[0])
            except ray.exceptions.RayTaskError as exc:
                # Ray's method is untyped and Ray itself is optional: cast the bound method
                # so the check is the same whether or not Ray is installed.
                unwrap = cast(Callable[[], BaseException], exc.as_instanceof_cause)
                cause = unwrap()
                if isinstance(cause, CurvekitError):
                    raise cause from None
                raise RunError(f"{_describe(spec)} failed on Ray: {cause}") from exc
            except ray.exceptions.RayError as exc:
                raise RunError(f"{_describe(spec)} was lost on Ray ({type(exc).__name__}); "
                               "finished trials are kept: rerun the same command to "
                               "resume") from exc
            yield result
        clean = True
    finally:
        if not clean:
            for ref in refs:
                ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def execute(specs: Sequence[TrialSpec], *, executor: str = "local", workers: int = 1,
            gpus: int = 0, ray_address: str | None = None) -> Iterator[TrialResult]:
    """Run ``specs`` and yield results as trials finish (see the module docstring)."""
    if executor not in EXECUTORS:
        raise RunError(f"unknown executor {executor!r}; choose {' or '.join(EXECUTORS)}")
    if not specs:  # a finished sweep: start no pool and no Ray instance
        return iter(())
    if executor == "local":
        return _local(specs, workers, gpus)
    return _ray(specs, workers, ray_address, specs[0].device)
