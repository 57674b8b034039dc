"""Convert the PD1 archive into the store, beside what the store holds, in one snapshot.

The release's workloads and the ones users added are hard-linked into the new snapshot as
they are; PD1's workloads (``pd1/<dataset>/<model>/nesterov_momentum``) are written by the
store's one writer (:class:`~curvekit.store.writer.StoreBuilder`) from the lines
:func:`curvekit.release.pd1.read_pd1` streams, a study's evaluations flushed to the writer
every few thousand rows (the writer spills to disk past its memory limit). A conversion of
PD1 replaces the PD1 workloads of an earlier one; a failure leaves the store as it was.

PD1's workloads are recorded in ``_store.json`` under ``added`` with the origin
``{"dataset": "pd1", "sha256": …, "md5": …, "manifest": …}``, so that a later ``curvekit
fetch`` of the release carries them over like any added workload, and ``curvekit.remove_
workload`` can remove one.

>>> import tempfile, pathlib
>>> from curvekit.release.pd1_synthetic import generate_pd1
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> m = generate_pd1(tmp / "pd1.tar.gz", points=3)
>>> meta = convert_pd1(tmp / "pd1.tar.gz", tmp / "home", manifest=m, sha256=m.sha256)
>>> sorted(meta["workloads"])[0]
'pd1/cifar10/wide_resnet/nesterov_momentum'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from curvekit import structured
from curvekit._version import __version__
from curvekit.errors import ArchiveError, StoreError
from curvekit.progress import StageCounter
from curvekit.records import StudyKey, StudyRecord, TrialRecord
from curvekit.release.pd1 import ID_BLOCK, SEARCH_SPACE, Pd1Manifest, Pd1Trial, read_pd1
from curvekit.store.metadata import ADDED_KEY, NAMES_KEY, StoreMetadata
from curvekit.store.transaction import conversion_room, transaction
from curvekit.store.update import _carried, _shifted
from curvekit.store.writer import Evaluations, StoreBuilder

__all__ = ["DATASET", "Pd1Check", "check_pd1", "convert_pd1", "pd1_workloads"]

DATASET = "pd1"
_FLUSH_ROWS = 16_384  # a study's buffered evaluations handed to the writer at once


def pd1_workloads(meta: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The store's PD1 workloads (``added`` entries whose origin is PD1), by name.

    >>> pd1_workloads({"added": {"a/b/c": {"origin": {"dataset": "pd1"}}, "x/y/z": {}}})
    {'a/b/c': {'origin': {'dataset': 'pd1'}}}
    """
    added = (meta or {}).get(ADDED_KEY) or {}
    return {w: info for w, info in added.items()
            if isinstance(info, dict) and (info.get("origin") or {}).get("dataset") == DATASET}


@dataclass
class _Study:
    """A study as its lines arrive: its first line's columns and its buffered evaluations."""

    record: Pd1Trial
    train_steps: int = 0
    trials: int = 0
    rows: int = 0
    buffered: int = 0
    ids: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    values: dict[str, list[pa.Array]] = field(default_factory=dict)

    def add(self, trial: Pd1Trial) -> None:
        n = len(trial.steps)
        self.ids.extend([trial.record.trial_id] * n)
        self.steps.extend(trial.steps)
        for name, parts in self.values.items():
            parts.append(trial.metrics.get(name, pa.nulls(n, pa.float64())))
        for name, values in trial.metrics.items():
            if name not in self.values:
                self.values[name] = [pa.nulls(self.buffered, pa.float64()), values]
        self.buffered += n

    def take(self) -> Evaluations:
        names = tuple(sorted(self.values))
        rows = Evaluations(pa.array(self.ids, pa.int64()), pa.array(self.steps, pa.int64()),
                           names, tuple(pa.concat_arrays(self.values[n]) for n in names))
        self.ids, self.steps, self.values, self.buffered = [], [], {}, 0
        return rows


def _parameters(trial: Pd1Trial, first: Pd1Trial) -> dict[str, Any]:
    """The trial's parameters, plus any ``hps.*`` value that differs from its study's first
    line (the study keeps the first line's in ``extra``; nothing is lost)."""
    params = dict(trial.record.parameters)
    if trial is not first:
        for name in set(trial.fixed) | set(first.fixed):
            value = trial.fixed.get(name)
            if value != first.fixed.get(name):
                params[name] = structured.finite(value)
    return params


def convert_pd1(
    archive: str | os.PathLike[str],
    home: str | os.PathLike[str],
    *,
    manifest: Pd1Manifest,
    sha256: str,
    md5: str | None = None,
    memory_limit: int = 128 << 20,
    threads: int | None = None,
    progress: StageCounter | None = None,
) -> StoreMetadata:
    """Convert the PD1 archive into the store at ``home/store`` (see the module docs).

    ``sha256`` and ``md5`` are the archive's verified hashes, recorded with its workloads
    so that a later ``fetch`` knows they are up to date. Returns the new store's metadata.
    """
    archive, home = Path(archive), Path(home)
    threads = threads or os.cpu_count() or 2
    with transaction(home, action=f"converting {archive.name}",
                     needed=lambda: conversion_room(archive, home)) as tx:
        meta = tx.metadata if tx.metadata is not None else StoreMetadata.empty()
        before = pd1_workloads(meta)
        if tx.current is not None:
            meta = _carried(tx, lambda w: w not in before)
        builder = StoreBuilder(tx.staging, memory_limit=memory_limit, threads=threads,
                               error=ArchiveError)
        studies: dict[StudyKey, _Study] = {}
        trial_rows: dict[tuple[StudyKey, int], int] = {}
        lines: dict[int, int] = {}
        without: dict[int, int] = {}
        dropped = 0
        for n, trial in enumerate(read_pd1(archive), 1):
            record = trial.record
            key = record.key
            study = studies.get(key)
            if study is None:
                study = studies[key] = _Study(trial)
            elif study.record.study_group != trial.study_group:
                raise ArchiveError(
                    f"{record.member}: study group {trial.study_group!r} maps onto "
                    f"{key.workload} at batch size {key.batch_size}, as does "
                    f"{study.record.study_group!r} ({study.record.record.member}); two tasks "
                    "would share one study. This archive is not laid out as PD1 is")
            builder.add_trial(TrialRecord(key, record.trial_id, record.status, record.steps,
                                          _parameters(trial, study.record), record.member))
            study.trials += 1
            study.rows += len(trial.steps)
            if record.status == "COMPLETE":
                study.train_steps = max(study.train_steps, record.steps)
            trial_rows[(key, record.trial_id)] = len(trial.steps)
            code = record.trial_id // ID_BLOCK
            lines[code] = lines.get(code, 0) + 1
            if not trial.steps and not trial.dropped:
                without[code] = without.get(code, 0) + 1
            dropped += trial.dropped
            if trial.steps:
                study.add(trial)
                if len(study.steps) >= _FLUSH_ROWS:
                    builder.add_evaluations(key, study.take(), record.member)
            if progress is not None and n % 1024 == 0:
                progress(n, None)
        for key, study in studies.items():
            if study.steps:
                builder.add_evaluations(key, study.take(), study.record.record.member)
            first = study.record
            builder.add_study(StudyRecord(
                key, first.dataset, False, study.train_steps, SEARCH_SPACE,
                {"source": DATASET, "study_group": first.study_group,
                 "hps": structured.finite(first.fixed)},
                first.record.member.partition(",")[0]))
        written = builder.finish({}, trial_rows)
        mine = set(written.workloads or [])
        others = set(meta.workloads or []) - set(before)
        clash = sorted(mine & others)
        if clash:
            raise StoreError(f"the store already has workloads named like PD1's: "
                             f"{', '.join(clash)}; remove them (curvekit.remove_workload) or "
                             "add them under another name first")
        now = datetime.now(UTC).isoformat(timespec="seconds")
        origin = {"dataset": DATASET, "synthetic": manifest.dataset != DATASET,
                  "archive": archive.name, "sha256": sha256, "md5": md5,
                  "manifest": manifest.to_dict(),
                  "found": {"lines_by_file": {str(k): v for k, v in sorted(lines.items())},
                            "without_evaluations_by_file":
                                {str(k): v for k, v in sorted(without.items())},
                            "evaluations_without_step": dropped}}
        added = {w: i for w, i in meta.added.items() if w not in before}
        total = dict(meta.counts)
        for info in before.values():
            total = _shifted(total, sorted(others), info.get("counts", {}), -1)
        for w in sorted(mine):
            keys = [k for k in studies if k.workload == w]
            counts = {"studies": len(keys), "trials": sum(studies[k].trials for k in keys),
                      "measurements": sum(studies[k].rows for k in keys)}
            added[w] = {"sha256": sha256, "origin": origin, "counts": counts,
                        "added_at": now, "curvekit_version": __version__}
        workloads = sorted(others | mine)
        total = _shifted(total, workloads, written.counts, +1)
        names = {w: n for w, n in meta.names.items() if w not in before}
        names.update(written.names)
        new = meta.replace(workloads=workloads, counts=total,
                           **{NAMES_KEY: dict(sorted(names.items())),
                              ADDED_KEY: dict(sorted(added.items()))})
        if progress is not None:
            progress(len(trial_rows), len(trial_rows))
        tx.publish(f"pd1-{sha256[:12]}", new)
    return new


_LABELS = {
    "matched_phase0_lines": (1, False, "matched phase-0 lines"),
    "matched_phase1_lines": (2, False, "matched phase-1 lines"),
    "unmatched_phase0_lines": (3, False, "unmatched phase-0 lines"),
    "unmatched_phase1_lines": (4, False, "unmatched phase-1 lines"),
    "matched_without_evaluations": (0, True, "matched trials without evaluations"),
}


@dataclass(frozen=True)
class Pd1Check:
    """What ``verify`` found about PD1's known counts: the problems, the counts checked
    (name → value found) and the counts it could not check, in words."""

    problems: list[str]
    checked: dict[str, int]
    unchecked: list[str]


def check_pd1(meta: Mapping[str, Any], trials: list[Path]) -> Pd1Check | None:
    """Check the store's PD1 trials (in the ``trials`` files given) against the counts of
    the manifest they were converted with: lines per data file (the trial id's file code)
    and matched trials without evaluations (``n_measurements`` 0). None without PD1.

    The real archive's manifest states the counts public readers observed (matched phase
    0: 2,277 lines, phase 1: 9,200, 1,348 matched trials without evaluations) and none for
    the unmatched files; a generated archive's states the generator's own.
    """
    import duckdb

    workloads = pd1_workloads(meta)
    if not workloads:
        return None
    first = next(iter(workloads.values()))
    expected: dict[str, Any] = ((first.get("origin") or {}).get("manifest") or {}
                                ).get("counts") or {}
    source = "the generator's" if "generator" in str(
        ((first.get("origin") or {}).get("manifest") or {}).get("counts_source", "")) \
        else "the observed"
    found: dict[int, int] = {}
    empty = 0
    files = [p for p in trials if "base_dir=pd1%2F" in p.as_posix()]
    if files:
        names = ", ".join("'" + str(p).replace("'", "''") + "'" for p in files)
        con = duckdb.connect()
        rows = con.sql(
            f"select base_dir || '/' || model || '/' || optimizer as w, trial_id // {ID_BLOCK}"
            f" as f, count(*) as n, count(*) filter (where n_measurements = 0) as e from "
            f"read_parquet([{names}], hive_partitioning=true) group by all").fetchall()
        for w, f, n, e in rows:
            if w in workloads:
                found[int(f)] = found.get(int(f), 0) + int(n)
                if int(f) in (1, 2):
                    empty += int(e)
    problems, checked, unchecked = [], {}, []
    for name, (code, is_empty, words) in _LABELS.items():
        have = empty if is_empty else found.get(code, 0)
        want = expected.get(name)
        if want is None:
            unchecked.append(f"{words}: {have} in the store; no count is known to check it "
                             "against")
            continue
        checked[name] = have
        if have != want:
            problems.append(f"PD1 {words}: {have} in the store, {source} count is {want}; "
                            "run `curvekit fetch --dataset pd1 --force` to convert it again")
    return Pd1Check(problems, checked, unchecked)

