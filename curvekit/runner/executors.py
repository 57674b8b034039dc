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
* ``local`` with N workers starts N fresh Python processes (:mod:`curvekit._processes`:
  isolated, so no state is shared with the parent and nothing is imported from the working
  folder); each holds the data set once and uses one CPU thread, or one GPU each when the
  device is ``cuda``. A worker takes the next chunk as soon as it has sent back the last.
* ``ray`` sends each chunk as a Ray task (one CPU, or one GPU with ``--device cuda``) to the
  cluster at ``ray_address`` (default: a running one, or a local instance started with an
  empty working folder of its own). Ray retries a task whose worker died; results come back
  to this process, which writes the parts, so workers need no shared file system.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import IO, Any, cast

from curvekit._processes import python, ray_session
from curvekit.errors import CurvekitError, CurvekitWarning, RunError
from curvekit.runner.plan import TrialResult, TrialSpec

__all__ = ["EXECUTORS", "chunks", "execute", "serve"]

EXECUTORS = ("local", "ray")
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


def _run(chunk: Chunk, batched: bool, folders: Sequence[str]) -> Done:
    from curvekit.runner.names import import_folders
    from curvekit.runner.train import run_trial

    with warnings.catch_warnings(record=True) as caught, import_folders(folders):
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


# -- local worker processes -------------------------------------------------------------------
# Each worker is a Python process started by curvekit._processes (isolated: nothing from the
# working folder is imported). The parent sends one pickled (chunk, batched, folders) at a
# time on the worker's stdin and reads one pickled reply from its stdout, each framed by its
# length; the worker's own prints go to stderr. Closing stdin ends the worker.

_FRAME = struct.Struct(">Q")


def _send(stream: IO[bytes], message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_FRAME.pack(len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    """The next message on ``stream``; None at its end (the other side closed or died)."""
    head = stream.read(_FRAME.size)
    if len(head) < _FRAME.size:
        return None
    size = _FRAME.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RunError that keeps its text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RunError(f"{type(exc).__name__}: {exc}")
    return exc


def serve() -> int:
    """A local worker process (started by the ``local`` executor): run each chunk sent on
    stdin and send back its results, or its error, until stdin closes."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a model's print() is not a reply
    tasks = sys.stdin.buffer
    try:
        while (task := _receive(tasks)) is not None:
            chunk, batched, folders = task
            try:
                reply: tuple[str, Any] = ("done", _run(chunk, batched, folders))
            except Exception as exc:
                reply = ("error", _portable(exc))
            _send(replies, reply)
    except (KeyboardInterrupt, BrokenPipeError):  # the parent stops: it reports, not us
        return 1
    return 0


class _Worker:
    """One worker process and the thread that feeds it chunks from the shared queue and
    puts (chunk, reply) on ``replies``; a reply of None means the process died."""

    def __init__(self, index: int, gpu: int | None, todo: queue.SimpleQueue[Chunk],
                 replies: queue.SimpleQueue[tuple[Chunk, Any]], batched: bool,
                 folders: Sequence[str]) -> None:
        self.process = python("curvekit.runner.executors", "serve", purpose="worker",
                              site=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._gpu, self._todo, self._replies = gpu, todo, replies
        self._batched, self._folders = batched, tuple(folders)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._feed, name=f"curvekit-worker-{index}",
                                       daemon=True)
        self.thread.start()

    def _feed(self) -> None:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            while not self.stop.is_set():
                try:
                    chunk = self._todo.get_nowait()
                except queue.Empty:
                    break
                task = chunk
                if self._gpu is not None and chunk[0].device.startswith("cuda"):
                    task = [replace(spec, device=f"cuda:{self._gpu}") for spec in chunk]
                try:
                    _send(stdin, (task, self._batched, self._folders))
                    reply = _receive(stdout)
                except (OSError, ValueError):  # the process died, or was stopped
                    reply = None
                self._replies.put((chunk, reply))
                if reply is None:
                    return
        finally:
            with contextlib.suppress(OSError):
                stdin.close()  # no more work: the process ends

    def close(self, *, kill: bool) -> None:
        self.stop.set()
        if kill and self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.thread.join()
        if self.process.stdout is not None:
            self.process.stdout.close()


def _local(units: Sequence[Chunk], workers: int, gpus: int, batched: bool,
           folders: Sequence[str]) -> Iterator[TrialResult]:
    if workers <= 1:
        for chunk in units:
            yield from _deliver(_run(chunk, batched, folders))
        return
    todo: queue.SimpleQueue[Chunk] = queue.SimpleQueue()
    for chunk in units:
        todo.put(chunk)
    replies: queue.SimpleQueue[tuple[Chunk, Any]] = queue.SimpleQueue()
    pool: list[_Worker] = []
    clean = False
    try:
        for i in range(min(workers, len(units))):
            pool.append(_Worker(i, i % gpus if gpus else None, todo, replies, batched,
                                folders))
        for _ in units:
            chunk, reply = replies.get()
            if reply is None:
                raise RunError(
                    f"a worker process died while running {_describe(chunk)} (out of memory, "
                    "or killed); finished trials are kept: rerun the same command to resume")
            kind, payload = reply
            if kind == "error":
                raise payload
            yield from _deliver(payload)
        clean = True
    finally:
        for worker in pool:
            worker.stop.set()
        for worker in pool:
            worker.close(kill=not clean)


def _ray(units: Sequence[Chunk], workers: int, address: str | None, device: str,
         batched: bool, folders: Sequence[str]) -> Iterator[TrialResult]:
    try:
        import ray
    except ImportError as exc:
        raise RunError('--executor ray needs Ray: pip install -e ".[ray]"') from exc
    cpus = max(1, workers) if address is None and not os.environ.get("RAY_ADDRESS") else None
    with ray_session(address, cpus):
        task = ray.remote(num_cpus=1, num_gpus=1 if device.startswith("cuda") else 0,
                          max_retries=2)(_run)
        # Ray's workers run in a folder of their own: a relative data folder is given as
        # the one it means here, and each result gets its trial's own spec back.
        refs = {task.remote(_absolute_data(chunk), batched, tuple(folders)): chunk
                for chunk in units}
        clean = False
        try:
            while refs:
                done, _ = ray.wait(list(refs), num_returns=1)
                chunk = refs.pop(done[0])
                try:
                    results, notes = ray.get(done[0])
                except ray.exceptions.RayTaskError as exc:
                    # Ray's method is untyped and Ray itself is optional: cast the bound
                    # method so the check is the same whether or not Ray is installed.
                    unwrap = cast(Callable[[], BaseException], exc.as_instanceof_cause)
                    cause = unwrap()
                    if isinstance(cause, CurvekitError):
                        raise cause from None
                    raise RunError(f"{_describe(chunk)} failed on Ray: {cause}") from exc
                except ray.exceptions.RayError as exc:
                    raise RunError(f"{_describe(chunk)} was lost on Ray "
                                   f"({type(exc).__name__}); finished trials are kept: rerun "
                                   "the same command to resume") from exc
                data_dir = chunk[0].data_dir
                yield from _deliver(([replace(r, spec=replace(r.spec, data_dir=data_dir))
                                      for r in results], notes))
            clean = True
        finally:
            if not clean:
                for ref in refs:
                    ray.cancel(ref, force=True)


def _absolute_data(chunk: Chunk) -> Chunk:
    data_dir = chunk[0].data_dir
    if data_dir is None or os.path.isabs(data_dir):
        return chunk
    return [replace(spec, data_dir=os.path.abspath(data_dir)) for spec in chunk]


def execute(specs: Sequence[TrialSpec], *, executor: str = "local", workers: int = 1,
            gpus: int = 0, ray_address: str | None = None,
            trials_at_once: int | None = 1,
            import_paths: Sequence[str] = ()) -> Iterator[TrialResult]:
    """Run ``specs`` and yield results as trials finish (see the module docstring).

    ``trials_at_once`` caps the trials of one study trained together (None: whole studies;
    1: one by one). ``import_paths`` (absolute folders) are where a user's
    ``module:function`` is looked up first, wherever the trials run.
    """
    if executor not in EXECUTORS:
        raise RunError(f"unknown executor {executor!r}; choose {' or '.join(EXECUTORS)}")
    units = chunks(specs, trials_at_once)
    if not units:  # a finished sweep: start no pool and no Ray instance
        return iter(())
    if executor == "local":
        return _local(units, workers, gpus, trials_at_once != 1, import_paths)
    return _ray(units, workers, ray_address, specs[0].device, trials_at_once != 1,
                import_paths)
