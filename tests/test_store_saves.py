"""A save that replaces an added workload (``curvekit run`` after each round, ``add
--replace``) writes new files only: the files of each earlier write whose studies are all
unchanged (studies, trials, parameters and measurements) stay as hard links, and the new or
changed studies are a new write (``part-<w>.parquet``, ``part-<w>-*``); the store then
answers as if the workload had been added at once (docs/store.md, "Cost: an add costs what
it adds")."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

import curvekit
from curvekit.store.catalog import verify
from curvekit.store.store import Store
from curvekit.store.update import WorkloadData, add_workload
from tests.test_update import NAME, workload

PARTITION = "base_dir=my_data/model=mlp_64/optimizer=momentum"
FOLDER = f"measurements/{PARTITION}"
TABLES = ("studies", "trials", "parameters", "measurements")


def _inodes(home: Path) -> dict[str, int]:
    snap = (home / "store").resolve()
    return {p.name: p.stat().st_ino for p in (snap / FOLDER).glob("*.parquet")}


def _every_inode(home: Path) -> dict[str, int]:
    """The workload's files of every table, ``table/name``: inode."""
    snap = (home / "store").resolve()
    return {f"{t}/{p.name}": p.stat().st_ino for t in TABLES
            for p in (snap / t / PARTITION).glob("*.parquet")}


def _write(rel: str) -> int:
    """The write a file's name counts: ``part-<w>.parquet`` or ``part-<w>-<k>.parquet``."""
    return int(rel.rsplit("/", 1)[-1].removesuffix(".parquet").split("-")[1])


def _answers(home: Path) -> tuple[str, str, str, str]:
    with Store.open(home) as store:
        wide = store.measurements(NAME)
        assert isinstance(wide, pl.DataFrame)
        rows = "".join(store.sql(f"select * from {t} order by all").write_csv()
                       for t in TABLES)
        best = curvekit.best(store, curvekit.Selection(NAME, "valid/error"), explain=False)
        steps = curvekit.steps_to_result(store, curvekit.Selection(NAME, "valid/error", 0.5),
                                         explain=False)
        assert verify(store).ok, verify(store).problems
        return wide.write_csv(), rows, best.write_csv(), steps.write_csv()


def _fresh(tmp: Path, data: WorkloadData) -> tuple[str, str, str, str]:
    add_workload(tmp, data)
    return _answers(tmp)


def _sizes(home: Path, name: str) -> set[int]:
    return set(pq.read_table((home / "store").resolve() / FOLDER / name)
               .column("batch_size").to_pylist())


def test_a_save_that_adds_a_study_keeps_the_earlier_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    add_workload(home, workload(batch_sizes=(16, 64)))
    before = _every_inode(home)
    assert sorted(before) == ["measurements/part-0-0.parquet", "parameters/part-0.parquet",
                              "studies/part-0.parquet", "trials/part-0.parquet"]
    add_workload(home, workload(batch_sizes=(16, 64, 256)), replace=True)
    after = _every_inode(home)
    assert {f: after[f] for f in before} == before  # hard links, every table's
    assert sorted(set(after) - set(before)) == [
        "measurements/part-1-0.parquet", "parameters/part-1.parquet",
        "studies/part-1.parquet", "trials/part-1.parquet"]
    snap = (home / "store").resolve()
    for table in ("studies", "trials", "parameters"):
        assert set(pq.read_table(snap / table / PARTITION / "part-1.parquet")
                   .column("batch_size").to_pylist()) == {256}
    assert _sizes(home, "part-1-0.parquet") == {256}
    with Store.open(home) as store:
        assert store.measurements_index(NAME) == {
            "part-0-0.parquet": ["train/loss", "valid/error"],
            "part-1-0.parquet": ["train/loss", "valid/error"]}
    assert _answers(home) == _fresh(tmp_path / "fresh", workload(batch_sizes=(16, 64, 256)))


def test_a_changed_study_rewrites_its_write_and_keeps_the_others(tmp_path: Path) -> None:
    home = tmp_path / "home"
    add_workload(home, workload(batch_sizes=(16, 64)))
    add_workload(home, workload(batch_sizes=(16, 64, 256)), replace=True)
    kept = _inodes(home)["part-1-0.parquet"]
    more = workload(batch_sizes=(16, 64), trials=4)  # a trial more at 16 and 64 ...
    same = workload(batch_sizes=(256,))  # ... and 256's study as it was
    changed = WorkloadData([*more.studies, *same.studies], [*more.trials, *same.trials],
                           {**more.measurements, **same.measurements}, more.origin)
    add_workload(home, changed, replace=True)
    after = _inodes(home)
    assert sorted(after) == ["part-1-0.parquet", "part-2-0.parquet"]
    assert after["part-1-0.parquet"] == kept
    assert _sizes(home, "part-2-0.parquet") == {16, 64}
    assert _answers(home) == _fresh(tmp_path / "fresh", changed)


@settings(max_examples=6, deadline=None)
@given(saves=st.lists(st.tuples(st.sets(st.sampled_from([8, 16, 64, 256]), min_size=1),
                                st.sampled_from([1.0, 0.5])), min_size=2, max_size=3))
def test_any_sequence_of_saves_answers_as_one_add(tmp_path_factory: object,
                                                  saves: list[tuple[set[int], float]]
                                                  ) -> None:
    """Whatever studies each save brings (some kept, some new, some changed, some gone),
    the store answers as if the last save's data had been added at once, and a file of
    an earlier write is either kept as it was or not there at all."""
    tmp = tmp_path_factory.mktemp("saves")  # type: ignore[attr-defined]
    home = tmp / "home"
    data = None
    for i, (sizes, scale) in enumerate(saves):
        before = _every_inode(home) if i else {}
        data = workload(batch_sizes=tuple(sorted(sizes)), scale=scale)
        add_workload(home, data, replace=True)
        after = _every_inode(home)
        assert all(after[f] == inode for f, inode in before.items() if f in after)
        # a new file belongs to a write after every earlier one: no name is given twice
        last = max((_write(f) for f in before), default=-1)
        assert all(_write(f) > last for f in set(after) - set(before))
        # each write's files are of every table or of none
        assert len({_write(f) for f in after}) * 3 == len(
            [f for f in after if not f.startswith("measurements/")])
    assert data is not None
    assert _answers(home) == _fresh(tmp / "fresh", data)

