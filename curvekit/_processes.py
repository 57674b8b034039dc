"""The processes curvekit starts, each started here and nowhere else.

The rule: **no process curvekit starts imports a module, or runs a program, from the working
folder**. A folder of logs or downloads is not code, and a ``json.py`` or ``lbzip2`` that
someone left in it must never run because a command was typed there.

* **Python helpers** (:data:`PROCESSES` lists them) run ``sys.executable -I -c BOOT``.
  Isolated mode (``-I``) puts neither the working folder nor a script's folder on the
  import path and ignores every ``PYTHON*`` variable and the user's site folder. The
  runner's workers keep the site module (the environment's ``.pth`` files may install
  import hooks a user's model needs); the renderer skips it (``-S``), needing only
  vl-convert. The bootstrap then sets the import path explicitly to
  :func:`child_import_path` (this process's ``sys.path``: absolute entries only, without
  the working folder) and loads ``curvekit`` from the folder this very copy was imported
  from, by its location (an editable install, a wheel and ``PYTHONPATH`` alike), before
  it imports anything else of curvekit's.
* **Programs** (``lbzip2``) are found by :func:`find_program` on the absolute folders of
  ``PATH`` other than the working folder, and started by their full path.
* **Forked workers** (``generate-archive --jobs``) are copies of this process, made by
  :func:`fork_pool` only where ``fork`` exists: no new interpreter starts, so nothing is
  looked up anew. Elsewhere the work runs in this process.
* **Ray's workers** are started by Ray. When curvekit starts Ray (:func:`ray_session`), it
  gives the job an empty ``working_dir`` of its own: Ray otherwise puts the driver's
  working folder first on every worker's import path.

Folders named with ``curvekit run --import-path`` are the one explicit exception: the
runner puts them in front of the import path where a user's ``module:function`` is loaded.

>>> sorted(PROCESSES)
['decompressor', 'generator', 'ray', 'renderer', 'worker']
>>> "" in child_import_path()
False
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from curvekit import structured
from curvekit._resources import package_dir

if TYPE_CHECKING:
    import multiprocessing.pool

__all__ = ["PROCESSES", "child_import_path", "find_program", "fork_pool", "python",
           "ray_session", "start_program", "where"]

PROCESSES: dict[str, str] = {
    "renderer": "curvekit figure --format png|svg|pdf: vl-convert's engine in a helper "
                "Python process (curvekit.plotting.static)",
    "worker": "curvekit run --workers N (N >= 2, the local executor): one Python process "
              "per worker (curvekit.runner.executors)",
    "ray": "curvekit run --executor ray: Ray's worker processes, when curvekit starts Ray",
    "decompressor": "curvekit fetch / add of a .tar.bz2 with lbzip2: the lbzip2 program",
    "generator": "curvekit generate-archive --jobs N: forked copies of this process (no new "
                 "interpreter: they import from its import path only)",
}
"""Every kind of process curvekit starts, and the command that starts it."""

# Runs with the interpreter's own library and site-packages only (-I): sets the import path,
# loads this copy of curvekit by its location, then calls MODULE.FUNCTION(*args).
_BOOT = """\
import importlib, importlib.util, json, sys
package, module, function, path = sys.argv[1:5]
del sys.argv[1:5]
sys.path[:] = json.loads(path)
spec = importlib.util.spec_from_file_location(
    "curvekit", package + "/__init__.py", submodule_search_locations=[package])
curvekit = importlib.util.module_from_spec(spec)
sys.modules["curvekit"] = curvekit
spec.loader.exec_module(curvekit)
sys.exit(getattr(importlib.import_module(module), function)(*sys.argv[1:]))
"""


def _working_folder() -> str | None:
    try:
        return os.path.realpath(os.getcwd())
    except OSError:  # the working folder was removed: nothing can be imported from it
        return None


def _outside_working_folder(entries: Sequence[str]) -> list[str]:
    here = _working_folder()
    out: list[str] = []
    for entry in entries:
        if not entry or not os.path.isabs(entry) or entry in out:
            continue
        if here is not None and os.path.realpath(entry) == here:
            continue
        out.append(entry)
    return out


def child_import_path() -> list[str]:
    """The import path of a Python process curvekit starts: this process's ``sys.path`` in
    order, without ``''``, relative entries (both mean the working folder) and the working
    folder itself, however it got there (``python -m``, ``PYTHONPATH=.``)."""
    return _outside_working_folder(sys.path)


def _check(purpose: str) -> None:
    if purpose not in PROCESSES:
        raise ValueError(f"unknown kind of process {purpose!r}: add it to PROCESSES (and to "
                         "the tests that plant modules in the working folder)")


def python(module: str, function: str, *args: str, purpose: str, site: bool = False,
           **popen: Any) -> subprocess.Popen[bytes]:
    """Start ``curvekit``'s ``module.function(*args)`` in a new, isolated Python process
    (see the module docstring); ``site`` keeps the site module (the environment's ``.pth``
    files); ``popen`` goes to :class:`subprocess.Popen` (pipes)."""
    _check(purpose)
    if not module.startswith("curvekit."):
        raise ValueError(f"{module!r} is not a module of curvekit")
    flags = ["-I"] if site else ["-I", "-S"]
    argv = [sys.executable, *flags, "-c", _BOOT, str(package_dir()), module, function,
            structured.dumps(child_import_path()), *args]
    return subprocess.Popen(argv, **popen)


def find_program(name: str) -> str | None:
    """The full path of the program ``name``, looked up on the absolute folders of ``PATH``
    other than the working folder (an empty or relative ``PATH`` entry means the working
    folder), or None.

    >>> find_program("sh") is not None
    True
    """
    folders = _outside_working_folder(os.environ.get("PATH", os.defpath).split(os.pathsep))
    return shutil.which(name, path=os.pathsep.join(folders)) if folders else None


def start_program(argv: Sequence[str], *, purpose: str,
                  **popen: Any) -> subprocess.Popen[bytes]:
    """Start a program found by :func:`find_program` (``argv[0]``, a full path)."""
    _check(purpose)
    if not os.path.isabs(argv[0]):
        raise ValueError(f"{argv[0]!r} is not a full path: find it with find_program()")
    return subprocess.Popen(list(argv), **popen)


def fork_pool(jobs: int, initializer: Callable[..., object],
              initargs: tuple[Any, ...]) -> multiprocessing.pool.Pool | None:
    """A pool of ``jobs`` forked copies of this process, or None where ``fork`` does not
    exist (a spawned worker would start a new interpreter): the caller then works alone."""
    import multiprocessing

    _check("generator")
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    return multiprocessing.get_context("fork").Pool(jobs, initializer=initializer,
                                                    initargs=initargs)


@contextlib.contextmanager
def ray_session(address: str | None, cpus: int | None) -> Iterator[None]:
    """Ray, started (or joined at ``address``) for the block, then shut down.

    The job's ``working_dir`` is an empty folder of curvekit's, so Ray's workers neither
    import from nor run in this process's working folder. A Ray that the caller started
    before is used as it is: its job settings, working folder included, are the caller's.
    """
    import ray

    _check("ray")
    if ray.is_initialized():
        yield
        return
    empty = tempfile.mkdtemp(prefix="curvekit-ray-")
    options: dict[str, Any] = {"address": address, "include_dashboard": False,
                               "log_to_driver": False,
                               "runtime_env": {"working_dir": empty}}
    if cpus is not None:
        options["num_cpus"] = cpus
    try:
        ray.init(**options)
        try:
            yield
        finally:
            ray.shutdown()
    finally:
        shutil.rmtree(empty, ignore_errors=True)


def where() -> int:
    """Write, as JSON on stdout, where this process imports from: the ``curvekit`` package's
    file, the import path and whether Python runs isolated. Run in a helper
    (``python("curvekit._processes", "where", purpose=...)``), it shows what the helper
    sees."""
    import curvekit

    print(structured.dumps({"curvekit": curvekit.__file__, "path": sys.path,
                      "isolated": bool(sys.flags.isolated), "cwd": os.getcwd()}))
    return 0
