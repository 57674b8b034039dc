"""The ground floor and the store's one transaction and one metadata model, attacked.

- a damaged ``_store.json`` is refused everywhere it is read, naming the file and the fix,
  and the store stays as it was;
- ``_store.json`` read and saved again is the same text, byte for byte;
- a change that fails, or is never published, leaves no trace;
- a workload name splits one way, whichever door it comes through;
- the release importer refuses a member given twice, as the converter does;
- package data is found inside a wheel's package as in a checkout.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from curvekit import _resources
from curvekit.cli import main
from curvekit.errors import IngestError, StoreError
from curvekit.ingest.add import add
from curvekit.names import MAX_FOLDER_BYTES
from curvekit.records import StudyKey, StudyRecord, TrialRecord, Workload
from curvekit.release.synthetic import tiny_archive
from curvekit.store.build import convert
from curvekit.store.fetch import fetch
from curvekit.store.metadata import METADATA_FILE, StoreMetadata
from curvekit.store.store import Store
from curvekit.store.transaction import transaction
from curvekit.store.update import WorkloadData, add_workload, remove_workload
from tests.conftest import ROOT, small_members, snapshot

NAME = "mine/mlp/sgd"


def _data(name: str = NAME, value: float = 0.5) -> WorkloadData:
    key = StudyKey(*Workload.parse(name), 32)
    return WorkloadData([StudyRecord(key, "mine", False, 3, {}, {}, "r.toml")],
                        [TrialRecord(key, 0, "COMPLETE", 3, {"lr": 0.1}, "r0.csv")],
                        {(key, 0): pa.table({"step": [1, 2, 3], "val/error": [0.9, 0.7, value]})},
                        {"format": "test"})


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    path = tmp_path_factory.mktemp("release") / "tiny.tar.bz2"
    return path, tiny_archive(path)


@pytest.fixture
def home(tmp_path: Path, archive: tuple[Path, Any]) -> Path:
    """A converted release with one workload added."""
    convert(archive[0], tmp_path / "home", manifest=archive[1])
    add_workload(tmp_path / "home", _data())
    return tmp_path / "home"


# -- a damaged _store.json --------------------------------------------------------------

DAMAGE = {
    "not json": "{\"store_format\": 1,",
    "not an object": "[1, 2]",
    "no store_format": "{\"workloads\": []}",
    "store_format text": "{\"store_format\": \"1\"}",
    "added not objects": "{\"store_format\": 1, \"added\": {\"a/b/c\": 3}}",
    "workloads not names": "{\"store_format\": 1, \"workloads\": [1]}",
    "counts not integers": "{\"store_format\": 1, \"counts\": {\"trials\": \"many\"}}",
}


def _damage(home: Path, text: str) -> Path:
    path = (home / "store").resolve() / METADATA_FILE
    path.write_text(text)
    return path


@pytest.mark.parametrize("text", DAMAGE.values(), ids=DAMAGE.keys())
def test_damaged_metadata_is_refused_by_every_reader(home: Path, archive: tuple[Path, Any],
                                                     text: str) -> None:
    path = _damage(home, text)
    before = snapshot(home)
    calls = [
        lambda: Store.open(home),
        lambda: fetch(home=home, archive=archive[0], manifest=archive[1]),
        lambda: fetch(home=home, archive=archive[0], manifest=archive[1],
                      force=True),
        lambda: add_workload(home, _data(value=0.1), replace=True),
        lambda: remove_workload(home, NAME),
    ]
    for call in calls:
        with pytest.raises(StoreError) as info:
            call()
        message = str(info.value)
        # named through the link or the snapshot it points to
        assert any(f"{where} is damaged" in message
                   for where in (path, home / "store" / METADATA_FILE))
        assert f"Remove {home / 'store'} and run `curvekit fetch`" in message
        assert snapshot(home) == before


def test_damaged_metadata_through_the_cli(home: Path) -> None:
    _damage(home, "not json")
    result = CliRunner().invoke(main, ["info", "--home", str(home)])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "_store.json is damaged" in result.output


def test_the_fix_the_message_gives_works(home: Path, archive: tuple[Path, Any]) -> None:
    _damage(home, "[]")
    (home / "store").unlink()
    assert fetch(home=home, archive=archive[0], manifest=archive[1],
                 ).action == "converted"
    assert NAME not in Store.open(home).workloads()  # added again by hand, as it says


# -- byte for byte -----------------------------------------------------------------------

_json = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6)
                     | st.text(max_size=5), lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


@hsettings(max_examples=40, deadline=None)
@given(extra=st.dictionaries(st.text(min_size=1, max_size=8).filter(
           lambda k: k not in ("store_format", "curvekit_version", "source", "counts",
                               "metric_columns", "parameter_columns", "workloads", "added")),
           _json, max_size=4),
       first=st.booleans())
def test_metadata_read_and_saved_again_is_the_same_text(
        tmp_path_factory: pytest.TempPathFactory, extra: dict[str, Any], first: bool) -> None:
    folder = tmp_path_factory.mktemp("meta")
    known = {"store_format": 1, "counts": {"trials": 3, "workloads": 1}, "workloads": ["a/b/c"]}
    data = {**extra, **known} if first else {**known, **extra}
    text = json.dumps(data, indent=1) + "\n"
    (folder / METADATA_FILE).write_text(text)
    meta = StoreMetadata.read(folder)
    assert meta is not None and meta.counts == {"trials": 3, "workloads": 1}
    meta.save(folder)
    assert (folder / METADATA_FILE).read_text() == text
    assert meta.replace(workloads=[]).text() == json.dumps({**data, "workloads": []},
                                                            indent=1) + "\n"


def test_metadata_is_read_only(home: Path) -> None:
    meta = Store.open(home).metadata
    with pytest.raises(TypeError):
        meta["workloads"] = []  # type: ignore[index]
    counts = meta.counts
    counts["trials"] = -1
    assert meta.counts["trials"] != -1


# -- the transaction ---------------------------------------------------------------------

def test_a_failed_change_leaves_no_trace(home: Path) -> None:
    before = snapshot(home)
    with pytest.raises(RuntimeError, match="killed"), transaction(home) as tx:
        (tx.staging / "half.parquet").write_bytes(b"PAR1")
        assert tx.metadata is not None and NAME in (tx.metadata.workloads or [])
        raise RuntimeError("killed")
    assert snapshot(home) == before
    assert not list((home / "stores").glob(".staging-*"))


def test_a_change_never_published_leaves_no_trace(home: Path) -> None:
    before = snapshot(home)
    with transaction(home) as tx:
        (tx.staging / "unused").write_text("x")
    assert snapshot(home) == before
    assert not list((home / "stores").glob(".staging-*"))


def test_a_transaction_publishes_once(tmp_path: Path) -> None:
    with transaction(tmp_path) as tx:
        tx.publish("local", StoreMetadata.empty())
        with pytest.raises(StoreError, match="already published"):
            tx.publish("local", StoreMetadata.empty())
    assert StoreMetadata.read(tmp_path / "store") == StoreMetadata.empty()


def test_a_refused_remove_on_an_empty_home_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not an added workload"):
        remove_workload(tmp_path, NAME)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]


def test_add_and_remove_go_through_one_transaction(home: Path) -> None:
    # the same data again publishes nothing; a remove publishes one new snapshot
    link = (home / "store").readlink()
    assert not add_workload(home, _data()).changed
    assert (home / "store").readlink() == link
    remove_workload(home, NAME)
    assert (home / "store").readlink() != link
    assert NAME not in Store.open(home).workloads()


# -- names -------------------------------------------------------------------------------

_part = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp"),
                              exclude_characters="/"), min_size=1, max_size=12).filter(
    lambda p: p == p.strip() and p not in (".", ".."))



def _fits(base: list[str]) -> bool:
    """A base_dir whose store folder stays within the folder-name limit (longer ones are
    refused, which tests/test_hostile_names.py checks)."""
    return len(f"base_dir={quote('/'.join(base), safe='')}".encode()) <= MAX_FOLDER_BYTES


@hsettings(max_examples=50, deadline=None)
@given(base=st.lists(_part, min_size=1, max_size=3).filter(_fits), model=_part,
       optimizer=_part)
def test_a_workload_name_splits_one_way(base: list[str], model: str, optimizer: str) -> None:
    name = "/".join([*base, model, optimizer])
    parsed = Workload.parse(name)
    assert parsed == Workload("/".join(base), model, optimizer) == Workload.known(name)
    assert str(parsed) == name == StudyKey(*parsed, 8).workload


@pytest.mark.parametrize("base_dir", ["a//b", " a", "a/./b", "", "..", "a/b\n"])
def test_a_bad_workload_name_is_refused_by_every_door(base_dir: str, tmp_path: Path) -> None:
    name = f"{base_dir}/m/o"
    with pytest.raises(IngestError, match="workload name"):
        Workload.parse(name)
    key = StudyKey(base_dir, "m", "o", 8)
    with pytest.raises(StoreError, match="workload name"):
        add_workload(tmp_path, WorkloadData(
            [StudyRecord(key, "d", False, 1, {}, {}, "x")], [], {}))
    assert list(tmp_path.iterdir()) == []


def test_a_two_part_name_is_refused() -> None:
    with pytest.raises(IngestError, match="must be base_dir/model/optimizer"):
        Workload.parse("mnist/sgd")
    with pytest.raises(IngestError, match="not base_dir/model/optimizer"):
        Workload.known("mnist/sgd")


# -- the release reader ------------------------------------------------------------------

def test_the_release_importer_refuses_a_member_given_twice(tmp_path: Path) -> None:
    members = small_members()
    path = tmp_path / "a.tar"
    # a plain tar with one metadata.json twice (tarfile writes both members)
    raw = io.BytesIO()
    dup = f"{ROOT}/mnist/fc_1024/sgd/8/1/metadata.json"
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in [*members.items(), (dup, members[dup])]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(raw.getvalue())
    with pytest.raises(IngestError, match=r"8/1/metadata\.json: appears twice"):
        add(path, name="mine/fc_1024/sgd", home=tmp_path / "home")
    assert not (tmp_path / "home" / "store").exists()


# -- package data ------------------------------------------------------------------------

def test_package_data_is_found_inside_a_wheel_first(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "site-packages" / "curvekit"
    (package / "_data_manifest").mkdir(parents=True)
    (package / "_data_manifest" / "index.json").write_text('{"datasets": {}}')
    (tmp_path / "site-packages" / "data_manifest").mkdir()  # not the checkout's: ignored
    monkeypatch.setattr(_resources, "package_dir", lambda: package)
    assert _resources.manifest_dir() == package / "_data_manifest"
    assert _resources.demo_dir() == package / "_demo"


def test_package_data_is_found_in_a_checkout() -> None:
    root = Path(__file__).resolve().parent.parent
    assert _resources.package_dir() == root / "curvekit"
    assert _resources.manifest_dir() == root / "data_manifest"
    assert (_resources.demo_dir() / "demo.json").is_file()
    assert _resources.manifest_path("batch_science").is_file()
