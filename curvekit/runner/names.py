"""Names of the runner's built-in workloads, checked without importing torch.

Models follow the release's directory names: ``fc_<width>_<width>...`` (a fully connected
ReLU network with those hidden widths; ``fc-128-128`` is accepted too), the paper's
``simple_cnn_base``, ``simple_cnn_narrow`` and ``simple_cnn_wide`` (``simple_cnn`` is the
base one), or a user's entry point ``package.module:function``. A ``_bn`` suffix
(``fc_128_128_bn``, ``simple_cnn_base_bn``) adds batch norm after every hidden layer, before
its ReLU: the built-in models that ghost batch norm (``--ghost-batch-size``) applies to.

A ``module:function`` is imported by name: from the folders given with ``--import-path``
(:func:`import_folders`, put in front of the import path), then from Python's import path
(installed packages, ``PYTHONPATH``). curvekit adds no other folder, the working folder
included: a process curvekit starts never has it (:mod:`curvekit._processes`).

>>> canonical_model("fc-128-128"), canonical_model("simple_cnn"), canonical_model("fc-64-BN")
('fc_128_128', 'simple_cnn_base', 'fc_64_bn')
>>> model_directory("my_models.nets:build")
'my_models.nets.build'
"""

from __future__ import annotations

import contextlib
import importlib
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from curvekit.errors import RunError

__all__ = [
    "BATCH_NORM_SUFFIX",
    "DATASETS",
    "OPTIMIZERS",
    "SIMPLE_CNNS",
    "canonical_dataset",
    "canonical_model",
    "dataset_directory",
    "import_folders",
    "is_entry_point",
    "load_entry_point",
    "model_directory",
]

OPTIMIZERS = ("sgd", "momentum", "nesterov_momentum", "adam")
DATASETS = ("digits", "mnist", "fashion_mnist", "cifar_10")
# The paper's simple CNN: conv 5x5 (c1) -> max pool -> conv 5x5 (c2) -> max pool -> dense (d).
SIMPLE_CNNS = {"base": (32, 64, 1024), "narrow": (16, 32, 512), "wide": (64, 128, 2048)}
_FC = re.compile(r"fc(?:[_-][1-9][0-9]*)+(?:[_-]bn)?")
BATCH_NORM_SUFFIX = "_bn"
_ENTRY = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def is_entry_point(name: str) -> bool:
    """Whether ``name`` looks like ``package.module:function``."""
    return bool(_ENTRY.fullmatch(name))


def canonical_model(name: str) -> str:
    """The model's canonical name, or :class:`RunError` for an unknown one."""
    text = name.strip()
    if is_entry_point(text):
        return text
    lowered = text.lower()
    if _FC.fullmatch(lowered):
        return lowered.replace("-", "_")
    norm = lowered.replace("-", "_")
    bn = BATCH_NORM_SUFFIX if norm.endswith(BATCH_NORM_SUFFIX) else ""
    cnn = norm.removesuffix(bn)
    if cnn == "simple_cnn":
        return "simple_cnn_base" + bn
    for size in SIMPLE_CNNS:
        if cnn == f"simple_cnn_{size}":
            return f"simple_cnn_{size}{bn}"
    raise RunError(f"unknown model {name!r}; use fc_<width>_<width>... (e.g. fc_128_128), "
                   f"simple_cnn_base, simple_cnn_narrow, simple_cnn_wide (each with an "
                   f"optional _bn suffix for batch norm), or your own builder as "
                   f"package.module:function")


def canonical_dataset(name: str) -> str:
    """The data set's canonical name, or :class:`RunError` for an unknown one."""
    text = name.strip()
    if is_entry_point(text):
        return text
    lowered = text.lower().replace("-", "_")
    lowered = {"cifar10": "cifar_10", "fashionmnist": "fashion_mnist"}.get(lowered, lowered)
    if lowered in DATASETS:
        return lowered
    raise RunError(f"unknown data set {name!r}; use one of {', '.join(DATASETS)}, or your "
                   f"own loader as package.module:function")


def _directory(name: str) -> str:
    return name.replace(":", ".")


def model_directory(name: str) -> str:
    """The store's ``model`` value for a model name (an entry point's ``:`` becomes ``.``)."""
    return _directory(canonical_model(name))


def dataset_directory(name: str) -> str:
    """The default ``base_dir`` for a data set name."""
    return _directory(canonical_dataset(name))


_FOLDERS: ContextVar[tuple[str, ...]] = ContextVar("import_folders", default=())


@contextlib.contextmanager
def import_folders(folders: Sequence[str]) -> Iterator[None]:
    """Look ``module:function`` entry points up in ``folders`` (absolute paths) first, for
    the block: they go in front of ``sys.path`` and leave it afterwards (a module imported
    meanwhile stays imported)."""
    added = [f for f in dict.fromkeys(folders) if f not in sys.path]
    sys.path[:0] = added
    token = _FOLDERS.set(tuple(dict.fromkeys((*_FOLDERS.get(), *folders))))
    try:
        yield
    finally:
        _FOLDERS.reset(token)
        for folder in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)


def load_entry_point(spec: str) -> Callable[..., Any]:
    """Import ``package.module:function`` and return the function (where it is looked up:
    see the module docstring)."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        folders = _FOLDERS.get()
        given = ", ".join(folders) if folders else "none given"
        raise RunError(
            f"cannot import {module_name!r} for {spec!r}: {exc}. Modules are looked up in "
            f"the --import-path folders ({given}), then on Python's import path (installed "
            "packages and PYTHONPATH; never the working folder by itself): pass the folder "
            "that holds it with --import-path DIR (import_paths=[DIR] in curvekit.run), or "
            "install it") from exc
    target: Callable[..., Any] | None = getattr(module, attr, None)
    if not callable(target):
        raise RunError(f"{spec!r}: {module_name} has no callable {attr!r}")
    return target
