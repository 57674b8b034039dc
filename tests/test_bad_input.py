"""Bad archives get a clear error naming the problem, and the previous store stays as it was."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from curvekit.cli import main
from curvekit.errors import ArchiveError
from curvekit.store.build import convert
from tests.conftest import ROOT, metadata_json, small_members, snapshot

GOOD = f"{ROOT}/mnist/fc_1024/sgd/8"


@pytest.fixture
def home(tmp_path: Path, make_archive: Callable[..., Path]) -> Path:
    """A home with a good store already in it."""
    home = tmp_path / "home"
    convert(make_archive(), home)
    return home


def _members(**changes: bytes | None) -> dict[str, bytes]:
    members = small_members()
    for name, data in changes.items():
        if data is None:
            members.pop(name.replace("|", "/"))
        else:
            members[name.replace("|", "/")] = data
    return members


def _link(kind: bytes) -> Callable[[tarfile.TarFile], None]:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(f"{GOOD}/9/measurements.csv")
        info.type = kind
        info.linkname = "/etc/passwd"
        tar.addfile(info)
    return add


def _raw(name: str) -> Callable[[tarfile.TarFile], None]:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    return add


CASES: list[tuple[str, dict[str, bytes | None], Callable[[tarfile.TarFile], None] | None,
                  list[str]]] = [
    ("dotdot", {}, _raw(f"{ROOT}/../../etc/metadata.json"), ["'..'", "../../etc"]),
    ("absolute", {}, _raw("/etc/batch_science/a/b/c/1/2/metadata.json"), ["absolute"]),
    ("symlink", {}, _link(tarfile.SYMTYPE), ["link", "/etc/passwd"]),
    ("hardlink", {}, _link(tarfile.LNKTYPE), ["link"]),
    ("malformed json", {f"{GOOD}|1|metadata.json": b'{"trial_id": 1, "status": '},
     None, ["malformed JSON", f"{GOOD}/1/metadata.json"]),
    ("bad status", {f"{GOOD}|1|metadata.json": metadata_json(1, status="DONE")},
     None, ["'DONE'", f"{GOOD}/1/metadata.json"]),
    ("trial id mismatch", {f"{GOOD}|1|metadata.json": metadata_json(5)},
     None, ["disagrees", "trial_id 5"]),
    ("non-numeric value", {f"{GOOD}|2|measurements.csv":
                           b"step,val/classification_error\n0,0.9\n100,abc\n"},
     None, [f"{GOOD}/2/measurements.csv", "abc"]),
    ("missing step column", {f"{GOOD}|2|measurements.csv": b"iteration,val/x\n0,0.9\n"},
     None, [f"{GOOD}/2/measurements.csv", "'step'"]),
    ("fractional step", {f"{GOOD}|2|measurements.csv": b"step,val/x\n0,0.9\n10.5,0.1\n"},
     None, [f"{GOOD}/2/measurements.csv", "10.5", "not an integer"]),
    ("empty csv", {f"{GOOD}|2|measurements.csv": b""}, None, ["empty measurements.csv"]),
    ("trial without metadata", {f"{GOOD}|2|metadata.json": None}, None,
     ["8/2/measurements.csv", "no metadata.json"]),
    ("trial without measurements", {f"{GOOD}|2|measurements.csv": None}, None,
     ["no measurements.csv"]),
    ("study without study.json", {f"{GOOD}|study.json": None}, None, ["no study.json"]),
    ("non-integer batch size", {f"{ROOT}/mnist/fc_1024/sgd/big|1|metadata.json": b"{}"}, None,
     ["'big'", "not a non-negative integer"]),
    ("missing field", {f"{GOOD}|study.json": b'{"batch_size": 8}'}, None,
     ["missing field", "parameter_configs"]),
]


@pytest.mark.parametrize(("members", "special", "needles"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_archive_is_refused_and_store_kept(
        home: Path, make_archive: Callable[..., Path], members: dict[str, bytes | None],
        special: Callable[[tarfile.TarFile], None] | None, needles: list[str]) -> None:
    before = snapshot(home)
    path = make_archive(_members(**members), special)  # type: ignore[arg-type]
    result = CliRunner().invoke(main, ["fetch", "--home", str(home), "--archive", str(path),
                                       "--sha256", _sha(path), "--quiet"])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ")
    for needle in needles:
        assert needle in result.output
    assert snapshot(home) == before
    assert not list((home / "stores").glob(".staging-*"))


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("damage", ["truncate", "corrupt", "not-bzip2"])
@pytest.mark.parametrize("decompressor", [
    "python", "indexed_bzip2", pytest.param("lbzip2", marks=pytest.mark.needs_lbzip2)])
def test_damaged_compression(home: Path, make_archive: Callable[..., Path], damage: str,
                             decompressor: str) -> None:
    # Large enough to span several bzip2 blocks, so damage lands mid-stream.
    members = small_members(trials=tuple(range(1, 400)))
    path = make_archive(members)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "corrupt":
        for i in range(len(data) // 2, len(data) // 2 + 64):
            data[i] ^= 0x5A
    else:
        data = bytearray(b"\x1f\x8b" + data[2:])
    path.write_bytes(bytes(data))
    before = snapshot(home)
    with pytest.raises(ArchiveError) as info:
        convert(path, home, decompressor=decompressor)  # type: ignore[arg-type]
    message = str(info.value)
    assert str(path) in message or "bzip2" in message
    assert snapshot(home) == before
