"""Read a release archive as a stream of parsed records, never extracting it.

The archive is a bzip2-compressed tar. :func:`read_archive` decompresses it in a pipeline
(``lbzip2`` when it is on the PATH, else ``indexed_bzip2``'s parallel reader, else Python's
``bz2``), walks the tar member by member, and yields typed records:

* :class:`~curvekit.records.StudyRecord` for each ``study.json``,
* :class:`~curvekit.records.TrialRecord` for each ``metadata.json``,
* :class:`CsvRecord` for each ``measurements.csv`` (raw bytes; parsing is batched later).

:func:`read_release` reads the same layout from a folder or any tar (``curvekit add``);
both refuse a member given twice and, at the end, a trial missing one of its files. They
are this package's only readers of the layout: the store's converter and the release
importer both read through them.

Member names are only ever *parsed* into keys; nothing is written to a path taken from the
archive. Links, devices, absolute paths and ``..`` components are refused.

Nothing a member claims is trusted. A member the layout uses may be at most
:data:`MEMBER_LIMITS` bytes for its kind (checked against the tar header before its data is
read); every other member is skipped without being held in memory. JSON nested too deep,
non-finite or fractional numbers where an integer belongs, and integers beyond 64 bits are
refused naming the member and the field.

>>> from curvekit.release.archive import parse_member_name
>>> kind, key, trial = parse_member_name(
...     "batch_science/mnist_subsets/mnist_6875/simple_cnn/sgd/64/7/metadata.json")
>>> kind, key.base_dir, key.batch_size, trial
('metadata.json', 'mnist_subsets/mnist_6875', 64, 7)
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, Protocol, cast

from curvekit import structured
from curvekit._processes import find_program, start_program
from curvekit.errors import ArchiveError
from curvekit.records import STATUSES, StudyKey, StudyRecord, TrialRecord
from curvekit.release.tarstream import MemberType, iter_members
from curvekit.values import flag_problem, integer_problem, parameter_problem

__all__ = [
    "MEMBER_LIMITS",
    "CsvRecord",
    "Decompressor",
    "Record",
    "SourceReader",
    "member_limit",
    "open_decompressed",
    "parse_member_name",
    "read_archive",
    "read_release",
]

Decompressor = Literal["auto", "lbzip2", "indexed_bzip2", "python"]
_FILES = {"study.json": 4, "metadata.json": 5, "measurements.csv": 5}
MEMBER_LIMITS: dict[str, int] = {
    "study.json": 1 << 20,
    "metadata.json": 1 << 20,
    "measurements.csv": 64 << 20,
}
"""Largest size accepted per member kind, in bytes. The release's JSON files are a few
hundred bytes and a trial's ``measurements.csv`` a few hundred rows (tens of kilobytes; its
71.6 million measurements over 194,399 trials average 368 rows), so 1 MiB and 64 MiB are
far above any real member while bounding what one member can make curvekit hold."""
_DIGITS = re.compile(r"[0-9]{1,18}")  # ASCII digits only; 18 of them always fit in int64
_STUDY_FIELDS = frozenset({"batch_size", "dataset", "model", "optimizer", "early_stopping",
                           "train_steps", "parameter_configs"})


@dataclass(frozen=True, slots=True)
class CsvRecord:
    """The raw bytes of a ``measurements.csv``."""

    key: StudyKey
    trial_id: int
    data: bytes
    member: str


Record = StudyRecord | TrialRecord | CsvRecord


def _int_component(text: str, what: str, member: str) -> int:
    # str.isdigit() would accept '²' or '٣'; int() would accept '1_000' and ' 1'.
    if not _DIGITS.fullmatch(text):
        raise ArchiveError(
            f"{member}: {what} directory {text!r} is not a non-negative integer of at most "
            "18 digits; the release names batch-size and trial directories by integers",
            member=member,
        )
    return int(text)


def parse_member_name(name: str) -> tuple[str, StudyKey, int | None] | None:
    """Split a member name into (file kind, study key, trial id), or None for other files.

    The first component is the archive's root (``batch_science``); ``base_dir`` is every
    component between the root and ``model/optimizer/batch_size``, so it may be one or two
    (or more) components deep.

    Raises :class:`ArchiveError` for unsafe names (absolute, ``..``) and for non-integer
    batch-size or trial directories.
    """
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(f"unsafe member {name!r}: absolute path; refusing the archive",
                           member=name)
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"unsafe member {name!r}: '..' component; refusing the archive",
                           member=name)
    if not parts or parts[-1] not in _FILES:
        return None
    kind = parts[-1]
    depth = _FILES[kind]
    # root + at least one base_dir component + model/optimizer/batch_size[/trial] + file
    if len(parts) < depth + 2:
        raise ArchiveError(
            f"{name}: {kind} must sit at <root>/<base_dir>/<model>/<optimizer>/<batch_size>"
            + ("/<trial_id>" if depth == 5 else "") + f"/{kind}",
            member=name,
        )
    base = parts[1 : len(parts) - depth]
    model, optimizer, bs = parts[len(parts) - depth : len(parts) - depth + 3]
    key = StudyKey("/".join(base), model, optimizer, _int_component(bs, "batch-size", name))
    trial = _int_component(parts[-2], "trial", name) if depth == 5 else None
    return kind, key, trial


def member_limit(name: str) -> int | None:
    """The most bytes a member named ``name`` may hold, or None if the layout never reads it.

    >>> member_limit("batch_science/mnist/fc_1024/sgd/8/1/measurements.csv") == 64 << 20
    True
    >>> member_limit("batch_science/README.md") is None
    True
    """
    return MEMBER_LIMITS.get(name.rpartition("/")[2])


def _tar_limit(name: str, kind: MemberType) -> int | None:
    return member_limit(name) if kind == "file" else None


def _load_json(data: bytes, member: str) -> dict[str, Any]:
    # The one loader of users' structured files: malformed JSON, nesting deeper than the
    # release's two or three levels allow (structured.MAX_DEPTH), a top level that is not an
    # object.
    obj: dict[str, Any] = structured.loads(
        data, "json", where=member, expect=dict,
        error=lambda message, _: ArchiveError(message, member=member))
    return obj


def _field(obj: dict[str, Any], name: str, kind: type | tuple[type, ...], member: str) -> Any:
    if name not in obj:
        raise ArchiveError(f"{member}: missing field {name!r}", member=member)
    value = obj[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ArchiveError(f"{member}: field {name!r} = {value!r} is not of the expected type",
                           member=member)
    return value


def _as_int(value: Any, name: str, member: str) -> int:
    # JSON writers sometimes emit integral floats (200000.0); anything else is an error:
    # NaN, Infinity and 1e400 (which json reads as inf) included (curvekit.values' rule).
    problem = integer_problem(value)
    if problem is not None:
        raise ArchiveError(f"{member}: field {name!r} = {value!r} {problem} (a whole number "
                           "from 0 to 2**63 - 1)", member=member)
    return int(value)


def _check_numbers(value: Any, name: str, member: str) -> None:
    """Refuse what the store cannot hold in metaparameters (curvekit.values): integers beyond
    int64 and non-finite floats, which would otherwise fail (or silently turn into strings)
    when the store is written, far from the member at fault."""
    problem = parameter_problem(value, name)
    if problem is not None:
        raise ArchiveError(f"{member}: field {problem}", member=member)


def parse_study(data: bytes, key: StudyKey, member: str) -> StudyRecord:
    """Parse a ``study.json``; unknown fields are kept in ``extra``."""
    obj = _load_json(data, member)
    if "batch_size" in obj and _as_int(obj["batch_size"], "batch_size", member) != key.batch_size:
        raise ArchiveError(
            f"{member}: batch_size {obj['batch_size']!r} disagrees with its directory "
            f"{key.batch_size}", member=member)
    configs = _field(obj, "parameter_configs", dict, member)
    _check_numbers(configs, "parameter_configs", member)
    early_stopping = obj.get("early_stopping", False)
    problem = flag_problem(early_stopping)
    if problem is not None:
        raise ArchiveError(f"{member}: field 'early_stopping' {problem}", member=member)
    return StudyRecord(
        key=key,
        dataset=str(obj.get("dataset", key.base_dir)),
        early_stopping=early_stopping,
        train_steps=_as_int(_field(obj, "train_steps", (int, float), member), "train_steps",
                            member),
        parameter_configs=configs,
        extra={k: v for k, v in obj.items() if k not in _STUDY_FIELDS},
        member=member,
    )


def parse_trial(data: bytes, key: StudyKey, trial_id: int, member: str) -> TrialRecord:
    """Parse a ``metadata.json``; internal and unknown fields are ignored."""
    obj = _load_json(data, member)
    tid = _as_int(_field(obj, "trial_id", (int, float), member), "trial_id", member)
    if tid != trial_id:
        raise ArchiveError(f"{member}: trial_id {tid} disagrees with its directory {trial_id}",
                           member=member)
    parameters = _field(obj, "parameters", dict, member)
    _check_numbers(parameters, "parameters", member)
    status = _field(obj, "status", str, member)
    if status not in STATUSES:
        raise ArchiveError(
            f"{member}: status {status!r} is not one of {', '.join(STATUSES)}",
            member=member)
    return TrialRecord(
        key=key,
        trial_id=trial_id,
        status=status,
        steps=_as_int(_field(obj, "steps", (int, float), member), "steps", member),
        parameters=parameters,
        member=member,
    )


class _ProcessStream(io.RawIOBase):
    """stdout of a decompressor process; its failure surfaces as an ArchiveError. It reads
    the file named in ``argv``, or ``stdin``, a file already opened."""

    def __init__(self, argv: list[str], path: Path, stdin: IO[bytes] | None = None) -> None:
        super().__init__()
        self._path = path
        self._proc = start_program(argv, purpose="decompressor", stdin=stdin,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   bufsize=1 << 20)
        self._out = cast(io.BufferedReader, self._proc.stdout)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n: int = self._out.readinto(buffer)
        if not n and len(buffer):
            self._check()
        return n

    def read(self, size: int = -1) -> bytes:
        # Skip RawIOBase's readinto round trip: the pipe's buffered reader is faster.
        data = self._out.read(size)
        if not data and size != 0:
            self._check()
        return data

    def _check(self) -> None:
        code = self._proc.wait()
        if code != 0:
            assert self._proc.stderr is not None
            msg = self._proc.stderr.read().decode(errors="replace").strip()
            raise ArchiveError(f"{self._path}: corrupt or truncated bzip2 data ({msg}); "
                               "delete it and fetch again")

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(OSError):
                self._out.close()
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            assert self._proc.stderr is not None
            self._proc.stderr.close()
        super().close()


def _choose(decompressor: Decompressor) -> Decompressor:
    if decompressor != "auto":
        return decompressor
    if find_program("lbzip2"):
        return "lbzip2"
    try:
        import indexed_bzip2  # noqa: F401
    except ImportError:  # pragma: no cover - a declared dependency, but keep a fallback
        return "python"
    return "indexed_bzip2"


@contextlib.contextmanager
def open_decompressed(path: str | os.PathLike[str], *, decompressor: Decompressor = "auto",
                      threads: int | None = None) -> Iterator[IO[bytes]]:
    """Open a ``.bz2`` file as a decompressed byte stream, in parallel where possible.

    Examples
    --------
    >>> import bz2, tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.bz2"; _ = p.write_bytes(bz2.compress(b"hi"))
    >>> with open_decompressed(p, decompressor="python") as f:
    ...     f.read()
    b'hi'
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            magic = fh.read(3)
    except OSError as exc:
        raise ArchiveError(f"cannot read archive {path}: {exc.strerror}") from exc
    if magic != b"BZh":
        raise ArchiveError(f"{path} is not a bzip2 file (it starts with {magic!r}); "
                           "expected the release's .tar.bz2")
    threads = threads or os.cpu_count() or 1
    chosen = _choose(decompressor)
    stream: IO[bytes]
    if chosen == "lbzip2":
        program = find_program("lbzip2")
        if program is None:
            raise ArchiveError("--decompressor lbzip2: no lbzip2 program in the folders of "
                               "PATH (only absolute folders other than the working folder "
                               "are searched); install lbzip2, or choose --decompressor "
                               "auto or indexed_bzip2")
        # A full path, so that a file name starting with "-" is never read as an option.
        stream = cast(IO[bytes], _ProcessStream(
            [program, "-dc", "-n", str(threads), os.path.abspath(path)], path))
    elif chosen == "indexed_bzip2":
        import indexed_bzip2

        stream = indexed_bzip2.open(str(path), parallelization=threads)
    else:
        stream = bz2.open(path, "rb")  # noqa: SIM115 - closed below
    try:
        yield stream
    finally:
        stream.close()


def _records(stream: IO[bytes]) -> Iterator[Record]:
    root: str | None = None
    for member in iter_members(stream, limit=_tar_limit):
        name = member.name
        if member.type == "link":
            raise ArchiveError(f"unsafe member {name!r}: a link (to {member.linkname!r}); "
                               "refusing the archive", member=name)
        if member.type == "other":
            raise ArchiveError(f"unsafe member {name!r}: not a regular file or directory; "
                               "refusing the archive", member=name)
        parsed = parse_member_name(name)
        if member.type == "dir" or parsed is None:
            continue
        top = next(p for p in name.split("/") if p not in ("", "."))
        if root is None:
            root = top
        elif top != root:
            raise ArchiveError(f"{name}: outside the archive's root {root!r}/", member=name)
        kind, key, trial = parsed
        if kind == "measurements.csv":
            assert trial is not None
            yield CsvRecord(key, trial, member.data, name)
        elif kind == "metadata.json":
            assert trial is not None
            yield parse_trial(member.data, key, trial, name)
        else:
            yield parse_study(member.data, key, name)


def _checked(records: Iterator[Record]) -> Iterator[Record]:
    """``records``, refusing a member that comes twice, and at their end a trial without
    its metadata, its measurements or its study's ``study.json``."""
    seen: set[tuple[str, StudyKey, int | None]] = set()
    trials: set[tuple[StudyKey, int]] = set()
    measured: set[tuple[StudyKey, int]] = set()
    studies: set[StudyKey] = set()
    for record in records:
        if isinstance(record, CsvRecord):
            ident: tuple[str, StudyKey, int | None] = ("csv", record.key, record.trial_id)
            measured.add((record.key, record.trial_id))
        elif isinstance(record, TrialRecord):
            ident = ("meta", record.key, record.trial_id)
            trials.add((record.key, record.trial_id))
        else:
            ident = ("study", record.key, None)
            studies.add(record.key)
        if ident in seen:
            raise ArchiveError(f"{record.member}: appears twice in the archive",
                               member=record.member)
        seen.add(ident)
        yield record
    for key, trial in sorted(measured - trials):
        member = f"{key.path()}/{trial}/measurements.csv"
        raise ArchiveError(f"{member}: trial {trial} has measurements but no metadata.json",
                           member=member)
    for key, trial in sorted(trials - measured):
        member = f"{key.path()}/{trial}/metadata.json"
        raise ArchiveError(f"{member}: trial {trial} has metadata but no measurements.csv",
                           member=member)
    for key in sorted({k for k, _ in trials} - studies):
        raise ArchiveError(f"{key.path()}/study.json: study has trials but no study.json",
                           member=f"{key.path()}/study.json")


def read_archive(path: str | os.PathLike[str], *, decompressor: Decompressor = "auto",
                 threads: int | None = None) -> Iterator[Record]:
    """Yield the records of a release archive (``.tar.bz2``) in member order.

    Raises :class:`ArchiveError` naming the member at fault for unsafe, malformed,
    duplicated or truncated content, and, once every member is read, for a trial that lacks
    its ``metadata.json``, its ``measurements.csv`` or its study's ``study.json``.

    Examples
    --------
    >>> from curvekit.release.synthetic import tiny_archive
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "tiny.tar.bz2"; m = tiny_archive(p)
    >>> kinds = {type(r).__name__ for r in read_archive(p)}
    >>> sorted(kinds)
    ['CsvRecord', 'StudyRecord', 'TrialRecord']
    """
    last: str | None = None
    with open_decompressed(path, decompressor=decompressor, threads=threads) as stream:
        try:
            for record in _checked(_records(stream)):
                last = record.member
                yield record
        except (ArchiveError, EOFError, OSError, ValueError, RuntimeError) as exc:
            if isinstance(exc, ArchiveError) and (exc.member or str(path) in str(exc)):
                raise  # already names the member or the file at fault
            raise ArchiveError(
                f"{path}: corrupt or truncated archive "
                + (f"after member {last!r}" if last else "before its first member")
                + f" ({exc}); "
                "delete it and fetch again, or check the file you passed with --archive",
                member=last,
            ) from exc


# -- the release's layout, as a folder or any tar ------------------------------------------

class SourceReader(Protocol):
    """How :func:`read_release` reaches a source that is not curvekit's own download: the
    folders it walks and the files it opens (``curvekit add`` passes its
    :class:`curvekit.ingest.files.SourceFiles`: regular files only, no links followed)."""

    def walk(self, top: Path | None = None) -> Iterator[tuple[Path, list[str], list[str]]]:
        """(folder, its folders, its other entries) for ``top`` and every folder below."""
        ...

    def open(self, path: Path) -> IO[bytes]:
        """``path`` opened for reading, or an error naming it."""
        ...


@contextlib.contextmanager
def _open_tar(path: Path, files: SourceReader) -> Iterator[IO[bytes]]:
    with contextlib.ExitStack() as stack:
        fh = stack.enter_context(files.open(path))
        magic = os.pread(fh.fileno(), 6, 0)  # fh stays at 0 for a decompressor to read
        program = find_program("lbzip2") if magic.startswith(b"BZh") else None
        if program is not None:
            argv = [program, "-dc", "-n", str(os.cpu_count() or 1)]
            yield stack.enter_context(contextlib.closing(
                cast(IO[bytes], _ProcessStream(argv, path, stdin=fh))))
        elif magic.startswith(b"BZh"):
            yield stack.enter_context(bz2.open(fh, "rb"))
        elif magic.startswith(b"\x1f\x8b"):
            yield cast(IO[bytes], stack.enter_context(gzip.open(fh, "rb")))
        elif magic.startswith(b"\xfd7zXZ"):
            yield stack.enter_context(lzma.open(fh, "rb"))
        else:
            yield fh


def _folder_records(source: Path, reader: SourceReader) -> Iterator[Record]:
    files = sorted(here / name for here, _, names in reader.walk(source)
                   for name in names if name in _FILES)
    studies = [p.relative_to(source) for p in files if p.name == "study.json"]
    depth = min((len(p.parts) for p in studies), default=0)
    if depth == 2:  # a workload's folder: <batch_size>/study.json
        prefix = "batch_science/" + "/".join(source.resolve().parts[-3:]) + "/"
    elif studies and studies[0].parts[0] == "batch_science" and depth >= 6:
        prefix = ""
    elif depth >= 5:
        prefix = "batch_science/"
    else:
        raise ArchiveError(
            f"{source}: study.json files sit at an unexpected depth; point at the release root "
            "(holding <base_dir>/<model>/<optimizer>/<batch_size>/study.json) or at one "
            "workload's folder (holding <batch_size>/study.json)", member=str(source))
    for path in files:
        member = prefix + path.relative_to(source).as_posix()
        parsed = parse_member_name(member)
        if parsed is None:
            continue
        kind, key, trial = parsed
        limit = member_limit(member) or MEMBER_LIMITS[kind]
        with reader.open(path) as fh:  # the archive reader's limits, for folders too
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(limit + 1) if size <= limit else b""
        if size > limit or len(data) > limit:
            raise ArchiveError(f"{path}: {max(size, len(data)):,} bytes, more than the "
                               f"{limit:,} bytes allowed for a {kind}; this is not the "
                               "release's file", member=str(path))
        if kind == "study.json":
            yield parse_study(data, key, str(path))
        elif kind == "metadata.json":
            assert trial is not None
            yield parse_trial(data, key, trial, str(path))
        else:
            assert trial is not None
            yield CsvRecord(key, trial, data, str(path))


def read_release(source: str | os.PathLike[str], *, files: SourceReader) -> Iterator[Record]:
    """Yield the records of the release's layout in a folder or a ``.tar`` (plain, ``.bz2``,
    ``.gz`` or ``.xz``), with the checks of :func:`read_archive`; every folder and file of
    the source is reached through ``files``.

    ``source`` is the release root (the folder holding ``<base_dir>/<model>/<optimizer>/
    <batch_size>/``, like ``batch_science/``), a folder holding that root, an archive of
    it, or one workload's folder (holding ``<batch_size>/study.json``), whose records are
    named by its last three path components. Errors are :class:`ArchiveError`, naming
    ``source`` and the file at fault.

    >>> from curvekit.release.synthetic import tiny_archive
    >>> from curvekit.ingest.files import SourceFiles
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "tiny.tar.bz2"; m = tiny_archive(p)
    >>> records = read_release(p, files=SourceFiles.of(p))
    >>> len({r.key.workload for r in records}) == m.totals["workloads"]
    True
    """
    source = Path(source)
    try:
        if source.is_dir():
            yield from _checked(_folder_records(source, files))
            return
        with _open_tar(source, files) as stream:
            yield from _checked(_records(stream))
    except ArchiveError:
        raise
    except (OSError, EOFError, RuntimeError, lzma.LZMAError) as exc:
        raise ArchiveError(f"{source}: corrupt or unreadable archive ({exc}); check the file, "
                           "or extract it and pass the folder", member=str(source)) from exc
