"""The release's own layout, as a folder or a ``.tar``/``.tar.bz2``/``.tar.gz``/``.tar.xz``.

Studies, trials and measurements are read with the converter's reader
(:func:`curvekit.release.archive.read_release`, :mod:`curvekit.release.csvparse`), so the
same checks apply: safe member names, integer batch-size and trial folders, each member
once, complete trials, a ``step`` column, numbers everywhere. Statuses are the ones
``metadata.json`` gives. The source may be

* the release root (the folder holding ``<base_dir>/<model>/<optimizer>/<batch_size>/``,
  like ``batch_science/``) or a folder holding that root, or an archive of it;
* one workload's folder (``.../<model>/<optimizer>`` holding ``<batch_size>/study.json``),
  named by ``--name`` or else by its last three path components.

A source holding several workloads needs ``--name`` to say which one to add; with one
workload, ``--name`` renames it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl
import pyarrow as pa

from curvekit._version import __version__
from curvekit.errors import ArchiveError, IngestError
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.manifest import RunManifest
from curvekit.ingest.metrics import apply_map
from curvekit.records import StudyKey, StudyRecord, TrialRecord, Workload
from curvekit.release import archive
from curvekit.release.csvparse import CsvBatcher
from curvekit.store.update import WorkloadData

__all__ = ["build_release"]


def build_release(source: Path, *, name: str | None, overrides: Mapping[str, str],
                  manifest: RunManifest, files: SourceFiles | None = None) -> WorkloadData:
    """One workload of a release source as :class:`WorkloadData` (renamed to ``name``);
    its folders and files are reached through ``files`` (:mod:`curvekit.ingest.files`)."""
    if manifest.runs:
        raise IngestError("a release source takes batch sizes and statuses from study.json "
                          "and metadata.json; leave [[runs]] out of the manifest",
                          path=manifest.path)
    studies: dict[StudyKey, StudyRecord] = {}
    trials: dict[tuple[StudyKey, int], TrialRecord] = {}
    tables: dict[StudyKey, list[pa.Table]] = {}
    batcher = CsvBatcher(lambda key, table: tables.setdefault(key, []).append(table))
    try:
        try:
            # the converter's reader: the same checks, complete trials only
            for record in archive.read_release(source, files=files_of(source, files)):
                if isinstance(record, StudyRecord):
                    studies[record.key] = record
                elif isinstance(record, TrialRecord):
                    trials[(record.key, record.trial_id)] = record
                else:
                    batcher.add(record)
        finally:
            batcher.close()
    except ArchiveError as exc:
        # folder records already name their file; archive members need the archive's path
        raise IngestError(str(exc), path=None if str(source) in str(exc) else str(source)
                          ) from exc
    workloads = sorted({k.workload for k in studies})
    if not workloads:
        raise IngestError("no study.json found: not the release's layout", path=str(source))
    chosen = workloads[0]
    if len(workloads) > 1:
        if name not in workloads:
            raise IngestError(f"holds {len(workloads)} workloads ({', '.join(workloads)}); "
                              "pass --name with the one to add", path=str(source))
        chosen = name
    base_dir, model, optimizer = Workload.parse(
        (name or chosen).strip("/"), fix="pass --name base_dir/model/optimizer",
        error=lambda m: IngestError(m, path=str(source)))

    def renamed(key: StudyKey) -> StudyKey:
        return StudyKey(base_dir, model, optimizer, key.batch_size)

    out_studies = [StudyRecord(renamed(s.key), s.dataset, s.early_stopping, s.train_steps,
                               s.parameter_configs, s.extra, s.member)
                   for k, s in sorted(studies.items()) if k.workload == chosen]
    out_trials = [TrialRecord(renamed(t.key), t.trial_id, t.status, t.steps, t.parameters,
                              t.member)
                  for (k, _), t in sorted(trials.items()) if k.workload == chosen]
    rows: dict[tuple[StudyKey, int], pa.Table] = {}
    for key, parts in tables.items():
        if key.workload != chosen:
            continue
        frame = pl.from_arrow(pa.concat_tables(parts, promote_options="default"))
        assert isinstance(frame, pl.DataFrame)
        for (trial,), group in frame.partition_by("trial_id", as_dict=True).items():
            member = trials[(key, int(trial))].member
            mapped = apply_map(group.drop("trial_id").sort("step"), "step", member, overrides)
            rows[(renamed(key), int(trial))] = mapped.frame.to_arrow()
    for t in out_trials:
        rows.setdefault((t.key, t.trial_id), pa.table({"step": pa.array([], pa.int64())}))
    origin = {"format": "release", "source": str(source.resolve()), "workload": chosen,
              "metric_map": dict(sorted(overrides.items())), "manifest": manifest.path or None,
              "tool": f"curvekit {__version__} add"}
    return WorkloadData(out_studies, out_trials, rows, origin)
