"""PD1, the training curves released with HyperBO (Wang et al., JMLR 2024): its manifest and
a streaming reader that maps each line onto the store's records.

PD1 is one ``pd1.tar.gz`` holding four gzip-compressed JSON Lines files under ``pd1/``
(matched and unmatched metaparameter points, phase 0 and phase 1), one line per trial, whose
per-evaluation columns are arrays aligned with ``global_step``. This module reads it as a
stream (the tar, then each member's gzip, line by line: nothing is extracted, memory is one
line at a time) and turns each line into a :class:`Pd1Trial`: the store's
:class:`~curvekit.records.TrialRecord` and its :class:`~curvekit.store.writer.Evaluations`
columns. The mapping (``docs/datasets.md``):

- workload ``pd1/<dataset>/<model>[_<activation>]/nesterov_momentum``, one study per batch
  size (``hps.batch_size``);
- trial id ``F × 10,000,000 + L``: ``F`` the file (1 matched phase 0, 2 matched phase 1,
  3 unmatched phase 0, 4 unmatched phase 1), ``L`` the line, counted from 1: every line is
  kept, and the id says where it came from, whatever the members' order;
- status ``done`` → COMPLETE, ``diverged`` → INFEASIBLE, anything else → INCOMPLETE (the
  file's word kept as the parameter ``pd1_status``);
- step = ``global_step`` (never ``epoch``); the error rates and cross-entropies under the
  release's names (:data:`METRIC_NAMES`), every other array under its own name; a null
  array, or a null element, stays missing;
- the tuned metaparameters under the store's names (:data:`PARAMETER_NAMES`; ``momentum``
  is β as stored, not 1 − β).

>>> map_metric("valid/error_rate"), map_metric("valid/denominator")
('val/classification_error', 'valid/denominator')
>>> trial_id("pd1_unmatched_phase1_results.jsonl.gz", 42)
40000042
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import tarfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from curvekit import structured
from curvekit.errors import ArchiveError, ManifestError
from curvekit.records import StudyKey, TrialRecord
from curvekit.release.about import Release
from curvekit.values import INT64_MAX

__all__ = [
    "ARRAYS",
    "DATA_FILES",
    "FILE_CODES",
    "ID_BLOCK",
    "METRIC_NAMES",
    "NAME",
    "OPTIMIZER",
    "PARAMETER_NAMES",
    "SEARCH_SPACE",
    "Pd1Manifest",
    "Pd1Trial",
    "file_hashes",
    "load_pd1_manifest",
    "map_metric",
    "read_pd1",
    "release_info",
    "trial_id",
]

ROOT = "pd1"
DATA_FILES = (
    "pd1_matched_phase0_results.jsonl.gz",
    "pd1_matched_phase1_results.jsonl.gz",
    "pd1_unmatched_phase0_results.jsonl.gz",
    "pd1_unmatched_phase1_results.jsonl.gz",
)
"""The four data members (under ``pd1/``), in the order of their file codes."""

FILE_CODES = {name: i for i, name in enumerate(DATA_FILES, 1)}
ID_BLOCK = 10_000_000
"""Trial ids of file ``F`` are ``F × ID_BLOCK + line``; a file may hold fewer lines."""

OPTIMIZER = "nesterov_momentum"

ARRAYS = (
    "global_step", "epoch", "eval_time", "learning_rate", "preemption_count",
    "steps_per_sec", "train_cost",
    "train/error_rate", "valid/error_rate", "test/error_rate",
    "train/ce_loss", "valid/ce_loss", "test/ce_loss",
    "train/denominator", "valid/denominator", "test/denominator",
)
"""PD1's per-evaluation columns (arrays aligned with ``global_step``)."""

METRIC_NAMES = {
    "train/error_rate": "train/classification_error",
    "valid/error_rate": "val/classification_error",
    "test/error_rate": "test/classification_error",
    "train/ce_loss": "train/cross_entropy_error",
    "valid/ce_loss": "val/cross_entropy_error",
    "test/ce_loss": "test/cross_entropy_error",
    # the learning rate applied at the evaluation, apart from the initial value (a
    # metaparameter named learning_rate)
    "learning_rate": "learning_rate_at_step",
}
"""PD1 arrays stored under another name; every other array keeps its own."""

PARAMETER_NAMES = {
    "hps.lr_hparams.initial_value": "learning_rate",
    "hps.opt_hparams.momentum": "momentum",
    "hps.lr_hparams.end_factor": "end_learning_rate_factor",
    "hps.lr_hparams.power": "learning_rate_decay_power",
    "hps.lr_hparams.decay_steps_factor": "learning_rate_decay_steps_factor",
}
"""PD1 columns stored as metaparameters under the store's names (β as stored for momentum)."""

SEARCH_SPACE: dict[str, Any] = {
    "learning_rate": {"type": "DOUBLE", "min_value": 1e-5, "max_value": 10.0,
                      "scale": "LOG_SCALE"},
    "momentum": {"type": "DOUBLE", "min_value": 0.0, "max_value": 0.999,
                 "scale": "REVERSE_LOG_SCALE"},
    "learning_rate_decay_power": {"type": "DOUBLE", "min_value": 0.1, "max_value": 2.0,
                                  "scale": "LINEAR_SCALE"},
    "learning_rate_decay_steps_factor": {"type": "DOUBLE", "min_value": 0.01,
                                         "max_value": 0.99, "scale": "LINEAR_SCALE"},
}
"""Each PD1 study's ``parameter_configs``: the four tuned metaparameters and their space."""

_STATUSES = {"done": "COMPLETE", "diverged": "INFEASIBLE"}
_MAX_LINE = 64 << 20  # one trial's line; the real ones are tens of kilobytes
_MAX_MEMBER_TEXT = 1 << 20  # README, licence, task configs: read and dropped
# per-trial identity and outcome columns kept as parameters under their own names
_KEPT = ("trial_dir", "study_dir", "effective_lr", "model_shape")
# the columns a trial's study takes from its first line
_STUDY = ("dataset", "model", "study_group")


def map_metric(name: str) -> str:
    """The store's name of the PD1 array ``name`` (see :data:`METRIC_NAMES`)."""
    return METRIC_NAMES.get(name, name)


def trial_id(member: str, line: int) -> int:
    """The store's trial id of line ``line`` (from 1) of the data file ``member``."""
    return FILE_CODES[member.rpartition("/")[2]] * ID_BLOCK + line


@dataclass(frozen=True)
class Pd1Manifest:
    """What the PD1 archive should be: where it is, how to check it, the counts known.

    ``md5`` is the only published checksum (by a third party); no sha256 is published, so
    ``fetch`` records one at the first download and checks it afterwards. ``counts`` maps
    a count's name to its value, or to None where no value is known (see :data:`COUNTS`).
    """

    url: str
    file_name: str
    md5: str
    approx_size_bytes: int | None
    counts: dict[str, int | None]
    sha256: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    dataset: str = "pd1"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pd1Manifest:
        """Build it from its JSON form (``data_manifest/pd1/manifest.json``)."""
        from curvekit.release.manifest import check_file_name

        try:
            archive = data["archive"]
            md5 = str(archive["md5"]).lower()
            if len(md5) != 32 or any(c not in "0123456789abcdef" for c in md5):
                raise ManifestError(f"archive.md5 {archive['md5']!r} is not an md5: expected "
                                    "32 hexadecimal digits. Fix archive.md5 in the manifest")
            counts = {k: (None if v is None else int(v)) for k, v in data["counts"].items()}
            unknown = sorted(set(counts) - set(COUNTS))
            if unknown:
                raise ManifestError(f"counts {unknown} are not PD1 counts: expected some of "
                                    f"{', '.join(COUNTS)}. Fix counts in the manifest")
            size = archive.get("approx_size_bytes")
            return cls(url=str(archive["url"]), md5=md5,
                       file_name=check_file_name(archive["file_name"]),
                       approx_size_bytes=None if size is None else int(size),
                       counts=counts, sha256=archive.get("sha256"), raw=dict(data),
                       dataset=str(data.get("dataset", "pd1")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ManifestError(f"malformed PD1 manifest: missing or invalid field {exc}; "
                                "see data_manifest/pd1/manifest.json for the form") from exc

    def to_dict(self) -> dict[str, Any]:
        """The manifest's JSON form."""
        return dict(self.raw)


COUNTS = {
    "matched_phase0_lines": "lines of pd1_matched_phase0_results",
    "matched_phase1_lines": "lines of pd1_matched_phase1_results",
    "unmatched_phase0_lines": "lines of pd1_unmatched_phase0_results",
    "unmatched_phase1_lines": "lines of pd1_unmatched_phase1_results",
    "matched_without_evaluations": "trials of the two matched files without any evaluation",
}
"""The counts a PD1 manifest may state, and what each counts."""


def load_pd1_manifest(path: str | os.PathLike[str] | None = None) -> Pd1Manifest:
    """The bundled PD1 manifest, or the one at ``path``.

    >>> m = load_pd1_manifest()
    >>> m.md5, m.counts["matched_phase1_lines"], m.counts["unmatched_phase0_lines"]
    ('e04c789cff8d5ddc9f2301e2ac02d0e3', 9200, None)
    """
    from curvekit._resources import manifest_path

    where = Path(path) if path is not None else manifest_path("pd1")
    data = structured.load(where, kind="json", error=lambda m, _: ManifestError(
        f"cannot read manifest: {m}"))
    return Pd1Manifest.from_dict(data)


def file_hashes(path: str | os.PathLike[str], *, chunk_size: int = 1 << 20,
                progress: Callable[[int, int | None], None] | None = None) -> tuple[str, str]:
    """The md5 and sha256 of a file, in one pass (``progress(done, total)`` in bytes).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     _ = f.write(b"test"); f.flush()
    ...     md5, sha256 = file_hashes(f.name)
    >>> md5[:8], sha256[:8]
    ('098f6bcd', '9f86d081')
    """
    md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    total, done = os.path.getsize(path), 0
    with open(path, "rb") as fh:
        while chunk := fh.read(chunk_size):
            md5.update(chunk)
            sha.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return md5.hexdigest(), sha.hexdigest()


@dataclass(frozen=True)
class Pd1Trial:
    """One line of a PD1 data file, mapped: its trial record, its study's columns, and its
    evaluations (steps and one float64 array per metric, null for a missing value)."""

    record: TrialRecord
    dataset: str
    study_group: str
    fixed: dict[str, Any]
    steps: list[int]
    metrics: dict[str, pa.Array]
    dropped: int
    """Evaluations left out because their ``global_step`` is null."""


def read_pd1(path: str | os.PathLike[str]) -> Iterator[Pd1Trial]:
    """Yield every line of the four data files of the PD1 archive at ``path``, mapped.

    Members are read in the archive's order; other members (README, licence, task configs)
    are skipped. Raises :class:`ArchiveError` naming the member and line for anything off
    the layout: a link or device, a path outside ``pd1/``, a data file twice or missing, a
    line that is not a JSON object, arrays of another length than ``global_step``, a step
    that is not a whole number.
    """
    path = Path(path)
    seen: set[str] = set()
    try:
        with tarfile.open(path, mode="r|gz") as tar:
            for info in tar:
                name = info.name
                parts = name.split("/")
                if name.startswith("/") or ".." in parts:
                    raise ArchiveError(f"member {name!r} leaves the archive's folder; a PD1 "
                                       "archive holds pd1/…; download it again")
                if not (info.isfile() or info.isdir()):
                    raise ArchiveError(f"member {name!r} is a link or a device; a PD1 archive "
                                       "holds only files; download it again")
                base = parts[-1]
                if not info.isfile() or base not in FILE_CODES:
                    continue
                if base in seen:
                    raise ArchiveError(f"member {name!r} appears twice; download the archive "
                                       "again")
                seen.add(base)
                raw = tar.extractfile(info)
                if raw is None:  # pragma: no cover - a regular file always has data
                    continue
                yield from _read_member(raw, name, base)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ArchiveError(f"{path}: not a readable PD1 archive (gzip-compressed tar): {exc}; "
                           "download it again") from exc
    missing = [f for f in DATA_FILES if f not in seen]
    if missing:
        raise ArchiveError(f"{path}: no member {', '.join(f'{ROOT}/{m}' for m in missing)}; "
                           "a PD1 archive holds all four data files; download it again")


def _read_member(raw: IO[bytes], name: str, base: str) -> Iterator[Pd1Trial]:
    with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
        stream = io.BufferedReader(gz, 1 << 20)
        n = 0
        while True:
            line = stream.readline(_MAX_LINE + 1)
            if not line:
                break
            n += 1
            if len(line) > _MAX_LINE:
                raise ArchiveError(f"{name}, line {n}: longer than {_MAX_LINE >> 20} MiB; a "
                                   "PD1 line is one trial of tens of kilobytes")
            if not line.strip():
                continue
            if n >= ID_BLOCK:
                raise ArchiveError(f"{name}: more than {ID_BLOCK - 1} lines; PD1's files "
                                   "hold thousands")
            yield parse_line(line, name, base, n)


def _load(line: bytes | str, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ArchiveError(f"{where}: not JSON ({exc}); download the archive again") from exc
    if not isinstance(obj, dict):
        raise ArchiveError(f"{where}: a {type(obj).__name__}, expected a JSON object (one "
                           "trial per line)")
    return obj


def _text(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise ArchiveError(f"{where}: {key!r} is {value!r}, expected text; every PD1 line "
                           "names its dataset, model and study_group")
    return value


def _batch_size(obj: Mapping[str, Any], where: str) -> int:
    value = obj.get("hps.batch_size")
    if value is None:  # the study group's last field is the batch size
        value = str(obj.get("study_group", "")).rpartition(",")[2]
    try:
        size = int(value)
        if isinstance(value, float | bool) and size != value:
            raise ValueError(value)
    except (TypeError, ValueError, OverflowError):
        raise ArchiveError(f"{where}: batch size {value!r} is not a whole number; "
                           "'hps.batch_size' holds the task's batch size") from None
    return size


def _steps(values: Any, where: str) -> list[int | None]:
    if not isinstance(values, list):
        raise ArchiveError(f"{where}: 'global_step' is {type(values).__name__}, expected a "
                           "list of steps or null")
    out: list[int | None] = []
    for v in values:
        if v is None:
            out.append(None)
        elif isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT64_MAX:
            out.append(v)
        elif isinstance(v, float) and math.isfinite(v) and v == int(v) and 0 <= v < 2.0 ** 63:
            out.append(int(v))
        else:
            raise ArchiveError(f"{where}: global_step {v!r} is not a whole number from 0 to "
                               "2**63 - 1; steps are training steps")
    return out


_NUMBERS = frozenset({int, float, type(None)})


def _numbers(values: list[Any], where: str, name: str) -> pa.Array:
    """An array's values as float64 (a null stays null), refusing anything but numbers."""
    try:
        if not _NUMBERS.issuperset(map(type, values)):  # true and false are not numbers
            raise ValueError("not a number")
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        bad = next((v for v in values if v is not None and (
            type(v) is bool or not isinstance(v, int | float)
            or (isinstance(v, int) and not -2**63 <= v < 2**63))), None)
        raise ArchiveError(f"{where}: {name!r} holds {bad!r}, expected numbers or null"
                           ) from None


def _scalar(value: Any) -> Any:
    """A value the parameters table holds: a non-finite number as its text (kept, not lost)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, list | dict):
        return structured.finite(value)
    return value


def parse_line(line: bytes | str, member: str, base: str, n: int) -> Pd1Trial:
    """Map line ``n`` of the data member ``member`` (file name ``base``) onto the store."""
    where = f"{member}, line {n}"
    obj = _load(line, where)
    dataset, model = _text(obj, "dataset", where), _text(obj, "model", where)
    group = _text(obj, "study_group", where)
    activation = obj.get("hps.activation_fn")
    if activation is not None:
        model = f"{model}_{activation}"
    key = StudyKey(f"{ROOT}/{dataset}", model, OPTIMIZER, _batch_size(obj, where))
    raw_steps = obj.get("global_step")
    steps_all = [] if raw_steps is None else _steps(raw_steps, where)
    keep = [i for i, s in enumerate(steps_all) if s is not None]
    metrics: dict[str, list[float | None]] = {}
    for name in ARRAYS[1:]:
        values = obj.get(name)
        if values is None:
            continue  # this task has no such array (e.g. no test split)
        if not isinstance(values, list) or len(values) != len(steps_all):
            length = len(values) if isinstance(values, list) else type(values).__name__
            raise ArchiveError(f"{where}: {name!r} has {length} values, 'global_step' "
                               f"{len(steps_all)}; every array is aligned with global_step")
        if len(keep) < len(steps_all):
            values = [values[i] for i in keep]
        metrics[map_metric(name)] = _numbers(values, where, name)
    code = FILE_CODES[base]
    status = obj.get("status")
    params: dict[str, Any] = {"source": f"{ROOT}/{base}", "phase": (code - 1) % 2,
                              "matched": code <= 2, "pd1_status": _scalar(status)}
    fixed: dict[str, Any] = {}
    for name, value in obj.items():
        if value is None:
            continue  # missing: no row (the parameters table's rule)
        if name in PARAMETER_NAMES:
            params[PARAMETER_NAMES[name]] = _scalar(value)
        elif name.startswith("best_") or name in _KEPT:
            params[name] = _scalar(value)
        elif name.startswith("hps."):
            fixed[name] = value
    steps = [s for s in steps_all if s is not None]
    record = TrialRecord(key, code * ID_BLOCK + n, _STATUSES.get(str(status), "INCOMPLETE"),
                         max(steps, default=0), params, where)
    return Pd1Trial(record, dataset, group, fixed, steps, metrics, len(steps_all) - len(steps))


NAME = "pd1"


def release_info() -> Release:
    """PD1 as the registry lists it (from its bundled manifest).

    >>> release_info().size_text
    'not published'
    """
    manifest = load_pd1_manifest()
    raw, cite = manifest.raw, manifest.raw.get("citation", {})
    citation = (f"{cite.get('authors')}, \"{cite.get('title')}\", {cite.get('journal')} "
                f"{cite.get('volume')}({cite.get('number')}):{cite.get('pages')}, "
                f"{cite.get('year')}")
    return Release(NAME, str(raw.get("title", "")), citation, manifest.url,
                   manifest.file_name, manifest.approx_size_bytes, str(raw.get("license", "")),
                   "md5 (published by a third party); no sha256 is published: curvekit "
                   "records one at the first download and checks it afterwards")
