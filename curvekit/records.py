"""What curvekit speaks of: workloads, studies and trials, whatever they were read from.

The release's archive reader, the store's writer, every importer of ``curvekit add`` and the
runner all describe their data with these records, so none of them needs another's code to
name a study or a trial.

A **workload** is named ``base_dir/model/optimizer``; ``base_dir`` may itself hold ``/``
(the release's ``mnist_subsets/mnist_6875``), so a name splits at its *last* two slashes.
:meth:`Workload.parse` is the one place that splits a name, and it checks the name against
the store's name rule (:mod:`curvekit.names`). :func:`check_not_reserved` refuses, for data
of one's own, a name that a workload of the published release already has.

>>> w = Workload.parse("mnist_subsets/mnist_6875/simple_cnn_base/sgd")
>>> w.base_dir, w.model, w.optimizer
('mnist_subsets/mnist_6875', 'simple_cnn_base', 'sgd')
>>> str(w)
'mnist_subsets/mnist_6875/simple_cnn_base/sgd'
>>> StudyKey(*w, 64).path()
'mnist_subsets/mnist_6875/simple_cnn_base/sgd/64'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple
from urllib.parse import quote

from curvekit._resources import manifest_path
from curvekit.errors import IngestError
from curvekit.names import (
    MAX_BASE_DIR_PARTS,
    MAX_FOLDER_BYTES,
    ErrorType,
    folder_problem,
    name_problem,
)

__all__ = [
    "STATUSES",
    "StudyKey",
    "StudyRecord",
    "TrialRecord",
    "Workload",
    "check_not_reserved",
    "release_workloads",
]

STATUSES = ("COMPLETE", "INCOMPLETE", "INFEASIBLE")
"""A trial's status, as the release's ``metadata.json`` states it."""

_PARTS = ("base_dir", "model", "optimizer")


def _split(name: str) -> list[str]:
    # The one split of a workload name: at its last two slashes, base_dir keeps the others.
    return name.rsplit("/", 2)


class Workload(NamedTuple):
    """A workload's name, ``base_dir/model/optimizer``, split into its three parts."""

    base_dir: str
    model: str
    optimizer: str

    def __str__(self) -> str:
        return f"{self.base_dir}/{self.model}/{self.optimizer}"

    @classmethod
    def parse(cls, name: object, *, fix: str = "pass another --name",
              error: ErrorType = IngestError) -> Workload:
        """The parts of a valid workload name, else ``error`` saying why and ``fix``.

        A part (and each folder of ``base_dir``) follows :func:`curvekit.names.name_problem`,
        may not be empty, ``.`` or ``..``, nor start or end with whitespace; ``base_dir`` has
        at most :data:`~curvekit.names.MAX_BASE_DIR_PARTS` folders, and each part's
        partition folder at most :data:`~curvekit.names.MAX_FOLDER_BYTES` bytes.

        >>> Workload.parse("my_data/resnet 20/momentum")
        Workload(base_dir='my_data', model='resnet 20', optimizer='momentum')
        >>> Workload.parse("my_data/../sgd")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        curvekit.errors.IngestError: workload name 'my_data/../sgd': model '..' is '..', which ...
        """
        problem = name_problem(name)
        if problem is not None:
            raise error(f"workload name {name!r} {problem}; {fix}")
        assert isinstance(name, str)
        parts = _split(name)
        if len(parts) != 3:
            raise error(f"workload name {name!r} must be base_dir/model/optimizer (e.g. "
                        f"my_data/resnet_20/momentum); {fix}")
        folders = parts[0].split("/")
        if len(folders) > MAX_BASE_DIR_PARTS:
            raise error(f"workload name {name!r}: base_dir has {len(folders)} folders, more "
                        f"than {MAX_BASE_DIR_PARTS}; {fix}")
        for column, part in zip(_PARTS, parts, strict=True):
            for folder in folders if column == "base_dir" else [part]:
                problem = folder_problem(folder)
                if problem is not None:
                    raise error(f"workload name {name!r}: {column} {folder!r} {problem}; {fix}")
            # base_dir's '/' is percent-encoded too: each part is one folder of the store
            size = len(f"{column}={quote(part, safe='')}".encode())
            if size > MAX_FOLDER_BYTES:
                raise error(f"workload name {name!r}: {column} makes a {size}-byte folder name "
                            f"({column}=<percent-encoded>), more than the {MAX_FOLDER_BYTES} "
                            f"bytes file systems allow; {fix} with a shorter {column}")
        return cls(parts[0], parts[1], parts[2])

    @classmethod
    def known(cls, name: str) -> Workload:
        """The parts of the name of a workload a store already holds.

        Such a name was checked when its data was written (the release's names come from
        its folders), so only its shape is: base_dir, model and optimizer, none empty.

        >>> Workload.known("mnist_subsets/mnist_6875/simple_cnn_base/sgd").base_dir
        'mnist_subsets/mnist_6875'
        """
        parts = _split(name)
        if len(parts) != 3 or not all(parts):
            raise IngestError(f"workload name {name!r} is not base_dir/model/optimizer")
        return cls(parts[0], parts[1], parts[2])


@cache
def release_workloads() -> frozenset[str]:
    """Names of the workloads of the published release (its bundled manifest).

    >>> "cifar_10/resnet_8/nesterov_momentum" in release_workloads()
    True
    """
    data = json.loads(manifest_path("batch_science").read_text())
    return frozenset(str(w["name"]) for w in data["workloads"])


def check_not_reserved(name: str, *, fix: str, error: ErrorType) -> str:
    """``name`` unless a workload of the published release has it, else ``error``.

    Data of one's own gets a name of its own, so that it and the release can live in one
    store and neither hides the other.

    >>> check_not_reserved("my_runs/mnist/fc/sgd", fix="rename it", error=IngestError)
    'my_runs/mnist/fc/sgd'
    """
    if name in release_workloads():
        raise error(f"{name!r} is a workload of the published release; {fix}")
    return name


class StudyKey(NamedTuple):
    """A study: a workload (base_dir/model/optimizer) at one batch size."""

    base_dir: str
    model: str
    optimizer: str
    batch_size: int

    @property
    def workload(self) -> str:
        """The workload's name, ``base_dir/model/optimizer``."""
        return f"{self.base_dir}/{self.model}/{self.optimizer}"

    def path(self) -> str:
        """The study's directory path below the archive root."""
        return f"{self.workload}/{self.batch_size}"


@dataclass(frozen=True, slots=True)
class StudyRecord:
    """A study's description (the release's ``study.json``)."""

    key: StudyKey
    dataset: str
    early_stopping: bool
    train_steps: int
    parameter_configs: dict[str, Any]
    extra: dict[str, Any]
    member: str


@dataclass(frozen=True, slots=True)
class TrialRecord:
    """A trial's description (the release's ``metadata.json``)."""

    key: StudyKey
    trial_id: int
    status: str
    steps: int
    parameters: dict[str, Any]
    member: str
