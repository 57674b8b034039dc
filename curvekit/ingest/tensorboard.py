"""TensorBoard event files, read with a small reader of their format (no TensorFlow, no
``tensorboard`` needed, and no sampling: every scalar is kept).

An event file is a TFRecord stream: records of ``length (uint64) | masked CRC-32C of the
length | data | masked CRC-32C of the data``, each holding one ``Event`` protocol buffer
(``wall_time``, ``step``, and a ``Summary`` of tagged values). Scalars come in two shapes,
and both are read:

* ``simple_value`` (TF1, tensorboardX, PyTorch's SummaryWriter), a float32;
* a scalar tensor whose first summary carries the ``scalars`` plugin (TF2's
  ``tf.summary.scalar``, Keras, ``tensorboard.summary.Writer``), float32 or float64.

Each folder holding event files is one run (its files are read in name order, which is
time order), with one exception: Keras's TensorBoard callback writes one run as sibling
folders ``train/`` and ``validation/`` under the run's folder (the split is in the folder's
name, not the tag: both hold ``epoch_loss``). Where a folder has a ``train`` child and a
``validation`` or ``eval`` child, each holding event files, the three are one run, named by
that folder: the ``train`` folder's scalars keep their tags, the other folder's become
validation metrics (``epoch_loss`` -> ``epoch_val_loss`` -> ``val/loss``).
TensorFlow's Estimator writes its training events into the run's folder itself and its
evaluations into an ``eval/`` child: a folder holding event files with an ``eval`` (or
``validation``) child holding event files is one run too, the child's tags its validation
metrics (``loss`` -> ``val_loss``).
Keras also logs each validation at the optimizer's step count
(``evaluation_loss_vs_iterations``); those repeat the ``epoch_*`` values on another axis
and are left out, but where they pair up with the epochs one to one they give the run's
``steps_per_epoch`` parameter, so its epochs become steps without a manifest entry.

Hyperparameters logged with the ``hparams`` plugin become the run's parameters;
tensorboardX and PyTorch write them into a child folder of the run, which is merged into
its parent; an ``hparams.yaml`` in the run's folder (PyTorch Lightning's
TensorBoardLogger) is read too, and wins over the plugin's copies (see
:func:`~curvekit.ingest.yamlish.param_value`). Lightning's logger also writes a
placeholder scalar ``hp_metric`` (one point, -1) unless the user logs one: that
placeholder is left out, a real ``hp_metric`` series is kept. Lightning 1.x also writes
per-batch validation values as one series per epoch (``val_loss_step/epoch_0``, stepped
by the batch's index in that epoch's validation): left out, with a warning. The ``epoch``
scalar is no metric: it tells whether the steps count epochs
(:func:`~curvekit.ingest.runs.settle_axis`), as Keras's ``epoch_*`` tags do, and TF1-era
Keras's history names (``loss`` beside ``val_loss``, at step = epoch). When steps
go back (a restart from a checkpoint), later events replace the earlier ones from that
step on, as TensorBoard does.

Files are read through :mod:`curvekit.ingest.tfrecord`, in blocks (memory does not grow
with the file), with both checksums of every record verified: a damaged record is an
error naming the file and its byte offset; a file that ends inside a record (a run still
writing, or killed while writing) is read up to it, with a warning. A step must lie in
0 ... 2**63 - 1 (an Event's step is an int64: a negative one, or a varint that does not fit
in 64 bits, is refused naming the file, the record and its byte offset). Reading is linear
in the file: a step that goes back finds its place by bisection, and a restart is applied
to a tag's points when the tag is next touched.

>>> import pathlib, struct, tempfile
>>> def varint(n):
...     out = b""
...     while True:
...         out += bytes([n & 0x7F | (0x80 if n > 0x7F else 0)]); n >>= 7
...         if not n: return out
>>> value = b"\\x0a\\x04loss" + b"\\x15" + struct.pack("<f", 0.5)   # tag, simple_value
>>> summary = b"\\x0a" + varint(len(value)) + value
>>> event = b"\\x10" + varint(100) + b"\\x2a" + varint(len(summary)) + summary  # step, summary
>>> d = pathlib.Path(tempfile.mkdtemp()) / "run1"; d.mkdir()
>>> _ = (d / "events.out.tfevents.1.host").write_bytes(record(event))
>>> [(r.key, r.frame.rows()) for r in read_tensorboard_runs(d.parent)]
[('run1', [(100, 0.5)])]
"""

from __future__ import annotations

import math
import re
import struct
import warnings
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from curvekit.errors import IngestError
from curvekit.ingest.csvlogs import skip_folder
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.metrics import SPLITS
from curvekit.ingest.runs import MAX_COLUMNS, IngestWarning, RunLog
from curvekit.ingest.select import ALL, FileFilter
from curvekit.ingest.tfrecord import masked_crc32c, read_blocks, record
from curvekit.ingest.yamlish import param_value, read_flat_yaml

__all__ = ["masked_crc32c", "read_event_file", "read_tensorboard_runs", "record"]

# ---------------------------------------------------------------------- protobuf wire format
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A varint of at most 10 bytes whose value fits in 64 bits (protobuf's own limit)."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >> 64:
                raise ValueError("a varint beyond 64 bits")
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 10 bytes")


def _step(value: int) -> int:
    """An Event's step (an int64 sent as its 64-bit two's complement), checked."""
    if value >> 63:
        raise ValueError(f"its step is {value - (1 << 64)} (an int64; {value} as written), "
                         "and steps are 0 ... 2**63 - 1: the file is damaged, or a step "
                         "counter went wrong")
    return value


def _fields(buf: bytes, start: int = 0, end: int | None = None
            ) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a message; length-delimited values as slices."""
    end = len(buf) if end is None else end
    pos = start
    while pos < end:
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = (pos, pos + size), pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value
    if pos != end:
        raise ValueError("truncated protobuf message")


def _text(buf: bytes, span: tuple[int, int]) -> str:
    return buf[span[0]:span[1]].decode("utf-8", errors="replace")


_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64, _DT_HALF = 1, 2, 3, 9, 19


def _tensor_scalar(buf: bytes, span: tuple[int, int]) -> float | None:
    """The single number of a scalar TensorProto, or None if it is not one."""
    dtype, values, elements = 0, [], 1
    for number, wire, value in _fields(buf, *span):
        if number == 1:
            dtype = value
        elif number == 2:  # shape: every dimension's size
            for dn, _, dv in _fields(buf, *value):
                if dn == 2:
                    elements *= next((v for n, _, v in _fields(buf, *dv) if n == 1), 1)
        elif number == 4:
            raw = buf[value[0]:value[1]]
            code = {_DT_FLOAT: "<f", _DT_DOUBLE: "<d", _DT_INT32: "<i", _DT_INT64: "<q",
                    _DT_HALF: "<e"}.get(dtype)
            if code is not None and len(raw) == struct.calcsize(code):
                values.append(struct.unpack(code, raw)[0])
        elif number == 5:  # float_val, packed or not
            raw = buf[value[0]:value[1]] if wire == 2 else value
            values.extend(v for (v,) in struct.iter_unpack("<f", raw))
        elif number == 6:  # double_val
            raw = buf[value[0]:value[1]] if wire == 2 else value
            values.extend(v for (v,) in struct.iter_unpack("<d", raw))
        elif number in (7, 10, 13):  # int_val, int64_val, half_val (as uint16 in int32)
            ints = []
            if wire == 2:
                pos = value[0]
                while pos < value[1]:
                    v, pos = _varint(buf, pos)
                    ints.append(v)
            else:
                ints.append(value)
            if number == 13:
                values.extend(float(np.frombuffer(struct.pack("<H", v & 0xFFFF), "<f2")[0])
                              for v in ints)
            else:
                values.extend(float(v - (1 << 64) if v >= 1 << 63 else v) for v in ints)
    if elements != 1 or len(values) != 1:
        return None
    return float(values[0])


def _hparams(buf: bytes, span: tuple[int, int]) -> dict[str, Any]:
    """The hparams of an HParamsPluginData's session_start_info (empty if none)."""
    out: dict[str, Any] = {}
    for number, _, value in _fields(buf, *span):
        if number != 3:
            continue
        for n, _, entry in _fields(buf, *value):
            if n != 1:
                continue
            key, parsed = "", None
            for en, _, ev in _fields(buf, *entry):
                if en == 1:
                    key = _text(buf, ev)
                elif en == 2:
                    for vn, vw, vv in _fields(buf, *ev):
                        if vn == 2 and vw == 1:
                            parsed = struct.unpack("<d", vv)[0]
                        elif vn == 3:
                            parsed = _text(buf, vv)
                        elif vn == 4:
                            parsed = bool(vv)
            if key:
                out[key] = parsed
    return out


# ---------------------------------------------------------------------- event files
@dataclass
class _Series:
    """The scalars of one run, tag by tag, with TensorBoard's restart handling.

    Each tag's steps are strictly increasing: a step that goes back drops the points from
    it on (found by bisection). A restart (``SessionLog.START``) drops every tag's points
    from its step on; it is recorded once and applied to a tag when the tag is next touched
    (:meth:`settle` applies the rest), so that many restarts over many tags stay linear.
    """

    tags: dict[str, tuple[list[int], list[float]]] = field(default_factory=dict)
    plugins: dict[str, str] = field(default_factory=dict)
    hparams: dict[str, Any] = field(default_factory=dict)
    names: dict[bytes, str] = field(default_factory=dict)  # decoded tags
    steps_per_epoch: int | None = None  # found in Keras's evaluation_*_vs_iterations
    # restarts so far, and (restart number, step) with steps increasing: the smallest step
    # of the restarts from any number on is the first entry at or after it
    _restarts: int = 0
    _lowest: list[tuple[int, int]] = field(default_factory=list)
    _synced: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)  # tag -> points later ones replaced

    def _drop(self, tag: str, steps: list[int], values: list[float], keep: int) -> None:
        if keep < len(steps):
            self.dropped[tag] = self.dropped.get(tag, 0) + len(steps) - keep
            del steps[keep:], values[keep:]

    def _sync(self, tag: str, steps: list[int], values: list[float]) -> None:
        since = self._synced.get(tag, 0)
        if since < self._restarts:
            at = bisect_left(self._lowest, (since, -1))
            if at < len(self._lowest):
                self._drop(tag, steps, values, bisect_left(steps, self._lowest[at][1]))
            self._synced[tag] = self._restarts

    def add(self, tag: str, step: int, value: float) -> None:
        points = self.tags.get(tag)
        if points is None:
            points = self.tags[tag] = ([], [])
            self._synced[tag] = self._restarts
        steps, values = points
        if self._restarts:
            self._sync(tag, steps, values)
        if steps and step <= steps[-1]:
            self._drop(tag, steps, values, bisect_left(steps, step))
        steps.append(step)
        values.append(value)

    def restart(self, step: int) -> None:
        while self._lowest and self._lowest[-1][1] >= step:
            self._lowest.pop()
        self._lowest.append((self._restarts, step))
        self._restarts += 1

    def settle(self) -> None:
        """Apply the restarts not yet applied to every tag."""
        for tag, (steps, values) in self.tags.items():
            self._sync(tag, steps, values)


_SCALAR_TENSOR = {b"\x08\x01\x12\x00\x2a\x04": "<f", b"\x08\x02\x12\x00\x32\x08": "<d"}


def _fast_scalar(buf: bytes) -> tuple[int, bytes, float, bytes | None] | None:
    """(step, tag, value, metadata) of the two commonest events, or None for any other shape
    (which is then read in full):

    * ``wall_time, step, summary { value { tag, simple_value } }``: metadata None;
    * ``wall_time, step, summary { value { tag, tensor { dtype: FLOAT or DOUBLE,
      tensor_shape {}, float_val/double_val: one value } [, metadata] } }``: the tensor
      scalars of TF2 and ``tensorboard.summary.Writer``; metadata as bytes (``b""`` if none).
    """
    try:
        if buf[0] != 0x09 or buf[9] != 0x10:
            return None
        step, pos = _varint(buf, 10)
        if buf[pos] != 0x2A:
            return None
        size, pos = _varint(buf, pos + 1)
        end = len(buf)
        if pos + size != end or buf[pos] != 0x0A:
            return None
        size, pos = _varint(buf, pos + 1)
        if pos + size != end or buf[pos] != 0x0A:
            return None
        size, pos = _varint(buf, pos + 1)
        tag = buf[pos:pos + size]
        pos += size
        kind = buf[pos]
        if kind == 0x15:
            if pos + 5 != end:
                return None
            return step, tag, struct.unpack_from("<f", buf, pos + 1)[0], None
        if kind != 0x42:
            return None
        size, pos = _varint(buf, pos + 1)
        code = _SCALAR_TENSOR.get(buf[pos:pos + 6])
        if code is None or size != 6 + struct.calcsize(code):
            return None
        value = struct.unpack_from(code, buf, pos + 6)[0]
        pos += size
        if pos == end:
            return step, tag, value, b""
        if buf[pos] != 0x4A:
            return None
        size, pos = _varint(buf, pos + 1)
        if pos + size != end:
            return None
        return step, tag, value, buf[pos:end]
    except (IndexError, struct.error):
        return None


@lru_cache(maxsize=256)
def _plugin_name(metadata: bytes) -> str | None:
    """The plugin name of a SummaryMetadata (writers repeat the same bytes every event)."""
    for number, _, span in _fields(metadata):
        if number == 1:
            return next((_text(metadata, v) for n, _, v in _fields(metadata, *span) if n == 1),
                        None)
    return None


def _fast_event(buf: bytes, series: _Series) -> bool:
    """Read a scalar event of :func:`_fast_scalar`'s shapes; False for any other event."""
    fast = _fast_scalar(buf)
    if fast is None or fast[0] >> 63:  # a step out of range: the full reader refuses it
        return False
    step, raw_tag, value, metadata = fast
    tag = series.names.get(raw_tag)
    if tag is None:
        tag = series.names[raw_tag] = raw_tag.decode("utf-8", errors="replace")
    if metadata is not None:  # a tensor: a scalar only under the scalars plugin
        if metadata:
            plugin = _plugin_name(metadata)
            if plugin is None:
                return False
            series.plugins.setdefault(tag, plugin)
        if series.plugins.get(tag) != "scalars":
            return False
    series.add(tag, step, value)
    return True


_EVENT_WIRES = {2: 0, 5: 2, 7: 2}  # step (varint), summary and session_log (messages)


def _event(buf: bytes, series: _Series) -> None:
    if _fast_event(buf, series):
        return
    step, summary, session = 0, None, None
    for number, wire, value in _fields(buf):
        if number in _EVENT_WIRES and wire != _EVENT_WIRES[number]:
            raise ValueError(f"its field {number} has wire type {wire}, not "
                             f"{_EVENT_WIRES[number]}")
        if number == 2:
            step = _step(value)
        elif number == 5:
            summary = value
        elif number == 7:
            session = value
    if session is not None:
        status = next((v for n, _, v in _fields(buf, *session) if n == 1), 0)
        if status == 1:  # SessionLog.START: a restart orphans what came after its step
            series.restart(step)
    if summary is None:
        return
    for number, _, span in _fields(buf, *summary):
        if number != 1:
            continue
        tag, simple, tensor, plugin, content = "", None, None, None, None
        for n, _, v in _fields(buf, *span):
            if n == 1:
                tag = _text(buf, v)
            elif n == 2:
                simple = struct.unpack("<f", v)[0]
            elif n == 8:
                tensor = v
            elif n == 9:
                for mn, _, mv in _fields(buf, *v):
                    if mn == 1:
                        for pn, _, pv in _fields(buf, *mv):
                            if pn == 1:
                                plugin = _text(buf, pv)
                            elif pn == 2:
                                content = pv
        if plugin is not None:
            series.plugins.setdefault(tag, plugin)
            if plugin == "hparams" and content is not None:
                series.hparams.update(_hparams(buf, content))
        if simple is not None:
            series.add(tag, step, float(simple))
        elif tensor is not None and series.plugins.get(tag) == "scalars":
            number_ = _tensor_scalar(buf, tensor)
            if number_ is not None:
                series.add(tag, step, number_)


def read_event_file(path: Path, series: _Series | None = None, *,
                    files: SourceFiles | None = None) -> _Series:
    """Read every record of one event file into ``series`` (a new one by default), through
    ``files`` (:mod:`curvekit.ingest.files`), in bounded memory
    (:func:`~curvekit.ingest.tfrecord.read_records`)."""
    series = series if series is not None else _Series()
    with files_of(path, files).open(path) as fh:
        for first, records in read_blocks(fh, str(path)):
            for n, (offset, body) in enumerate(records, first):
                try:
                    _event(body, series)
                except (ValueError, IndexError, TypeError, struct.error) as exc:
                    # IndexError: a field runs past the record; TypeError: a nested field
                    # of another wire type than its message says (bytes for a number)
                    what = "a field of the wrong type" if isinstance(exc, TypeError) \
                        else exc if isinstance(exc, ValueError) else "it ends inside a field"
                    raise IngestError(f"record {n} (byte {offset}) is not a valid Event: "
                                      f"{what}", path=str(path), line=n) from exc
    series.settle()
    return series


def _frame(series: _Series) -> pl.DataFrame:
    """One row per step that any tag logged, one column per tag (missing: null). Built
    column by column on the sorted steps (a pivot's cost grows with the square of the
    number of tags)."""
    tags = sorted(series.tags)
    if not tags:
        return pl.DataFrame({"step": pl.Series([], dtype=pl.Int64)})
    steps = np.unique(np.concatenate([np.asarray(series.tags[t][0], np.int64) for t in tags]))
    columns = {"step": pa.array(steps)}
    for tag in tags:
        at, values = series.tags[tag]
        index = np.searchsorted(steps, np.asarray(at, np.int64))
        column = np.zeros(len(steps))
        missing = np.ones(len(steps), bool)
        column[index] = values
        missing[index] = False
        columns[tag] = pa.array(column, mask=missing)
    frame = pl.from_arrow(pa.table(columns))
    assert isinstance(frame, pl.DataFrame)
    return frame


def read_tensorboard_runs(source: Path, *, select: FileFilter = ALL,
                          files: SourceFiles | None = None) -> list[RunLog]:
    """Every folder under ``source`` that holds event files, as one run each (the files
    ``select`` keeps: ``--include``/``--exclude``; ``files`` reaches them:
    :mod:`curvekit.ingest.files`)."""
    files = files_of(source, files)
    folders: dict[Path, list[Path]] = {}
    if source.is_file():
        folders[source.parent] = [source]
        root = source.parent
    else:
        root = source
        for here, dirs, names in files.walk(source):
            dirs[:] = sorted(d for d in dirs if not skip_folder(here / d) and
                             select.keeps_folder((here / d).relative_to(source).as_posix()))
            events = sorted(here / f for f in names if ".tfevents." in f
                            and select.keeps((here / f).relative_to(source).as_posix()))
            if events:
                folders[here] = events
    series: dict[Path, _Series] = {}
    for folder, paths in sorted(folders.items()):
        s = _Series()
        for f in sorted(paths, key=_started):  # in the order the writers started
            read_event_file(f, s, files=files)
        s.settle()
        if s.dropped:
            # TensorBoard's own rule: a step that goes back (a resumed run, another fit()
            # call or process writing the same run) replaces what was logged from it on
            shown = ", ".join(f"{n} of {tag!r}" for tag, n in sorted(s.dropped.items())[:5])
            more = f" and {len(s.dropped) - 5} more tags" if len(s.dropped) > 5 else ""
            picks = " ".join(f"--include '{p.relative_to(root).as_posix()}'"
                             for p in paths[:3]) if len(paths) > 1 else ""
            warnings.warn(
                f"{folder}: steps go back in its event files ({len(paths)} file(s)); as "
                f"TensorBoard does, later points replaced earlier ones from that step on: "
                f"{shown}{more} point(s) left out. If they are separate attempts, import "
                f"them one at a time"
                + (f" ({picks})" if picks else " (split the run)") + ".",
                IngestWarning, stacklevel=2)
        series[folder] = s
    merged = _add_scalars_folders(series, root)
    for folder, s in series.items():
        parent = series.get(folder.parent)
        if folder in merged:
            continue
        if s.hparams and parent is not None and folder != root and parent.tags:
            # tensorboardX/PyTorch add_hparams: a child folder holding the parent's hparams
            # (and its metric_dict, one final value each, which is no curve). Under a parent
            # without scalars (the HParams plugin's experiment folder) a child is a session,
            # a run of its own.
            parent.hparams = {**s.hparams, **parent.hparams}
            merged.add(folder)
            if s.tags:
                warnings.warn(
                    f"{folder}: left out {', '.join(sorted(s.tags))}: add_hparams's final "
                    f"values of the run {folder.parent}, whose parameters this folder holds "
                    f"(to import them, --include "
                    f"'{folder.relative_to(root).as_posix()}/*' reads this folder alone)",
                    IngestWarning, stacklevel=2)
    for folder, s in list(series.items()):
        sessions = [d for d in series if d.parent == folder and series[d].hparams
                    and d not in merged]
        if not s.tags and sessions:  # the HParams plugin's experiment folder: no run itself
            merged.add(folder)
    for folder in sorted({d.parent for d in series if d.name == TRAIN_FOLDER and d != root}):
        splits = _split_folders(folder, series)
        if splits:
            series[folder] = _one_keras_run(folder, series.get(folder),
                                            {d: series[d] for d in splits})
            merged.update(splits)
    # TensorFlow's Estimator (and other evaluators beside a trainer): the run's folder holds
    # the training events itself, its eval/ (or validation/) child the evaluations
    for folder in sorted({d.parent for d in series if d.name in EVAL_FOLDERS and d != root}):
        evals = [folder / n for n in EVAL_FOLDERS if folder / n in series]
        if folder in series and folder not in merged and (folder / TRAIN_FOLDER) not in series \
                and not set(evals) & merged:
            series[folder] = _one_keras_run(folder, series[folder],
                                            {d: series[d] for d in evals})
            merged.update(evals)
    runs = []
    for folder, s in sorted(series.items()):
        if folder in merged:
            continue
        rel = folder.relative_to(root).as_posix()
        key = source.name if rel == "." else rel
        # One typing rule (yamlish.param_value): the plugin stores numbers as doubles and
        # objects as str(); Lightning's hparams.yaml, when there is one, keeps their types
        # and wins.
        params = {k: param_value(v, doubles=True) for k, v in s.hparams.items()}
        if s.steps_per_epoch is not None:
            params.setdefault("steps_per_epoch", s.steps_per_epoch)
        if files.exists(folder / "hparams.yaml"):  # Lightning's TensorBoardLogger writes one
            params = {**params, **read_flat_yaml(folder / "hparams.yaml", files=files)}
        _drop_placeholder(s)
        _drop_per_epoch_batches(s, folder)
        if len(s.tags) > MAX_COLUMNS:
            raise IngestError(f"the run logs {len(s.tags):,} scalar tags; curvekit reads at "
                              f"most {MAX_COLUMNS:,} per run (one column per metric)",
                              path=str(folder))
        # The step is the caller's global_step: settle_axis decides whether it counts epochs.
        runs.append(RunLog(key, str(folder), _frame(s), params, axis_named=False))
    return runs


def _add_scalars_folders(series: dict[Path, _Series], root: Path) -> set[Path]:
    """Merge the folders of ``SummaryWriter.add_scalars`` into their run; return them.

    ``add_scalars("loss", {"train": a, "val": b})`` writes each series into a child folder
    of the run named ``<main tag>_<key>`` (``loss_train``, with ``/`` in the main tag made
    ``_``), under the scalar tag ``<main tag>``. Such a child is no run: its series is the
    run's metric ``<main tag>/<key>`` (``loss/train``, ``loss/val``)."""
    merged: set[Path] = set()
    for folder, s in sorted(series.items()):
        parent = series.get(folder.parent)
        if folder == root or parent is None or not s.tags or s.hparams:
            continue
        names: dict[str, str] = {}
        for tag in s.tags:
            prefix = tag.replace("/", "_") + "_"
            if not folder.name.startswith(prefix) or folder.name == prefix:
                break
            names[tag] = f"{tag}/{folder.name[len(prefix):]}"
        else:
            for tag, points in s.tags.items():
                if names[tag] in parent.tags:
                    raise IngestError(
                        f"the add_scalars series {names[tag]!r} of {folder} is also a scalar "
                        f"of its run {folder.parent}; leave one out with --exclude",
                        path=str(folder))
                parent.tags[names[tag]] = points
            merged.add(folder)
    return merged


def _started(path: Path) -> tuple[int, str]:
    """When an event file's writer started: the Unix time in its name
    (``events.out.tfevents.<time>.<host>...``), then the name (TensorBoard's own order)."""
    stamp = path.name.split(".tfevents.", 1)[-1].split(".", 1)[0]
    return (int(stamp) if stamp.isdigit() else 0, path.name)


# ---------------------------------------------------------------------- layouts of writers
TRAIN_FOLDER = "train"
EVAL_FOLDERS = ("validation", "eval")
"""Keras's TensorBoard callback writes a run as ``<run>/train/`` and ``<run>/validation/``
(``eval`` is the other common name); the folder, not the tag, names the split."""
_EVALUATION = re.compile(r"^evaluation_(.+)_vs_iterations$")
_DECORATIONS = ("epoch_", "batch_")


def _split_folders(folder: Path, series: dict[Path, _Series]) -> list[Path]:
    """The ``train`` and ``validation``/``eval`` children of ``folder`` when it has both,
    each holding event files (Keras's layout of one run), else nothing."""
    train = folder / TRAIN_FOLDER
    evals = [folder / name for name in EVAL_FOLDERS if folder / name in series]
    return [train, *evals] if train in series and evals else []


def _split_tag(tag: str, split: str) -> str:
    """A tag of a split's folder named with its split: ``epoch_loss`` -> ``epoch_val_loss``
    (Keras's decoration stays in front, where :func:`~curvekit.ingest.metrics.target` looks
    for it); a tag that already starts with a split word keeps its name."""
    for decoration in _DECORATIONS:
        if tag.startswith(decoration) and len(tag) > len(decoration):
            return decoration + _split_tag(tag[len(decoration):], split)
    first = re.split(r"[/_\-.\s]", tag, maxsplit=1)[0].lower()
    return tag if first in SPLITS else f"{split}_{tag}"


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6)


def _evaluation_steps_per_epoch(evals: _Series) -> int | None:
    """Steps in one epoch, where Keras's ``evaluation_X_vs_iterations`` (the validation at
    the optimizer's step count) pairs one to one with ``epoch_X`` (the same values at the
    0-based epoch): after epoch *e* the optimizer has done (*e* + 1) * N steps. None where
    they do not pair up that way (a resumed run, an extra ``model.evaluate``)."""
    found: set[int] = set()
    for tag, (steps, values) in evals.tags.items():
        match = _EVALUATION.match(tag)
        if match is None:
            continue
        epochs = evals.tags.get(f"epoch_{match.group(1)}")
        if epochs is None or len(epochs[0]) != len(steps):
            return None
        for epoch, value, step, logged in zip(*epochs, steps, values, strict=True):
            if not _same(value, logged) or step <= 0 or step % (epoch + 1):
                return None
            found.add(step // (epoch + 1))
    return found.pop() if len(found) == 1 else None


def _one_keras_run(folder: Path, own: _Series | None, splits: dict[Path, _Series]
                   ) -> _Series:
    """One run from Keras's split folders (and the run folder's own events: the hparams
    that ``hp.KerasCallback`` writes there)."""
    run = _Series(hparams=dict(own.hparams) if own is not None else {})
    origin: dict[str, Path] = {}

    def put(tag: str, points: tuple[list[int], list[float]], where: Path) -> None:
        if tag in run.tags:
            raise IngestError(
                f"the scalar {tag!r} of {where} is also in {origin[tag]}; Keras's layout "
                f"(train/, validation/ under one run) names each split once: leave one of "
                f"the folders out with --exclude", path=str(folder))
        run.tags[tag] = points
        origin[tag] = where

    if own is not None:
        for tag, points in own.tags.items():
            put(tag, points, folder)
    for path, s in splits.items():
        run.hparams = {**s.hparams, **run.hparams}
        if path.name == TRAIN_FOLDER:
            for tag, points in s.tags.items():
                put(tag, points, path)
            continue
        run.steps_per_epoch = run.steps_per_epoch or _evaluation_steps_per_epoch(s)
        split = SPLITS[path.name]
        for tag, points in s.tags.items():
            if _EVALUATION.match(tag) is None:  # those repeat epoch_* at the step count
                put(_split_tag(tag, split), points, path)
    return run


def _drop_placeholder(series: _Series) -> None:
    """Leave out Lightning's ``hp_metric`` placeholder: one point of -1, written by
    ``log_hyperparams`` when the user gives no metric for the hparams view."""
    points = series.tags.get("hp_metric")
    if points is not None and points[1] == [-1.0]:
        del series.tags["hp_metric"]


_PER_EPOCH_BATCHES = re.compile(r"^.+_step/epoch_\d+$")


def _drop_per_epoch_batches(series: _Series, folder: Path) -> None:
    """Leave out PyTorch Lightning 1.x's per-batch validation series, one tag per epoch
    (``valid_loss_step/epoch_0``): their steps count the batches of that epoch's
    validation, not training steps, and would land on the step axis as if they did."""
    dropped = sorted(t for t in series.tags if _PER_EPOCH_BATCHES.match(t))
    for tag in dropped:
        del series.tags[tag]
    if dropped:
        shown = ", ".join(dropped[:3]) + (", ..." if len(dropped) > 3 else "")
        warnings.warn(f"{folder}: left out {len(dropped)} per-epoch series of per-batch "
                      f"values ({shown}): their steps count the batches of one epoch, not "
                      "training steps", IngestWarning, stacklevel=3)
