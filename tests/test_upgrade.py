"""A store of format 1 (every metric and metaparameter a column), made by the curvekit that
wrote that format (tests/format1/make.py), is upgraded with nothing lost: by `curvekit
upgrade`, and by the first add, remove or fetch; opening it for reading says so
(docs/store.md, "Stores of format 1")."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import curvekit
from curvekit.cli import main
from curvekit.errors import StoreError
from curvekit.release.synthetic import tiny_archive
from curvekit.store.build import convert
from curvekit.store.catalog import verify
from curvekit.store.layout import STORE_FORMAT, TABLES, fixed_schema
from curvekit.store.store import Store
from curvekit.store.update import add_workload, remove_workload
from curvekit.store.upgrade import upgrade
from tests.conftest import snapshot
from tests.test_update import workload

FROZEN = Path(__file__).resolve().parent / "format1"
MINE = "mine/cnn/sgd"
FIXED = {"trial_id", "step"}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home whose current store is the frozen format-1 snapshot."""
    home = tmp_path / "home"
    snap = home / "stores" / "local-0123456789ab"
    shutil.copytree(FROZEN / "store", snap)
    (snap / ".lease").touch()
    (home / "store").symlink_to(Path("stores") / snap.name)
    return home


def _old_rows(folder: Path) -> dict[tuple[Any, ...], float]:
    """Every non-null metric cell of the format-1 measurements files:
    (workload folder, batch size, trial, step, metric, occurrence) -> value."""
    out: dict[tuple[Any, ...], float] = {}
    for path in sorted((folder / "measurements").rglob("*.parquet")):
        table = pq.read_table(path)
        where = path.relative_to(folder).parts[1:5]
        seen: dict[tuple[Any, ...], int] = {}
        for row in table.to_pylist():
            key = (*where, row["trial_id"], row["step"])
            k = seen[key] = seen.get(key, -1) + 1
            for metric, value in row.items():
                if metric not in FIXED and value is not None:
                    out[(*key, metric, k)] = value
    return out


def _new_rows(folder: Path) -> dict[tuple[Any, ...], float]:
    out: dict[tuple[Any, ...], float] = {}
    for path in sorted((folder / "measurements").rglob("*.parquet")):
        seen: dict[tuple[Any, ...], int] = {}
        for row in pq.read_table(path).to_pylist():
            # the batch size, a folder in formats 1 and 2, is a column in format 3
            where = (*path.relative_to(folder).parts[1:4], f"batch_size={row['batch_size']}")
            key = (*where, row["trial_id"], row["step"], row["metric"])
            k = seen[key] = seen.get(key, -1) + 1
            if row["value"] is not None:
                out[(*where, row["trial_id"], row["step"], row["metric"], k)] = row["value"]
    return out


def _same(a: dict[tuple[Any, ...], float], b: dict[tuple[Any, ...], float]) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        other = b[key]
        assert (math.isnan(value) and math.isnan(other)) or value == other, key


def _old_parameters(folder: Path) -> dict[tuple[Any, ...], Any]:
    fixed = set(fixed_schema("trials").names)
    out = {}
    for path in sorted((folder / "trials").rglob("*.parquet")):
        where = path.relative_to(folder).parts[1:4]
        for row in pq.read_table(path).to_pylist():
            for name, value in row.items():
                if name not in fixed and value is not None:
                    out[(*where, row["batch_size"], row["trial_id"], name)] = value
    return out


def _new_parameters(folder: Path) -> dict[tuple[Any, ...], Any]:
    out = {}
    for path in sorted((folder / "parameters").rglob("*.parquet")):
        where = path.relative_to(folder).parts[1:4]
        for row in pq.read_table(path).to_pylist():
            value = {"float64": row["number"], "int64": row["integer"], "string": row["text"],
                     "bool": bool(row["integer"])}[row["type"]]
            out[(*where, row["batch_size"], row["trial_id"], row["name"])] = value
    return out


def _check_upgraded(home: Path, *, without: str | None = None) -> Store:
    """The current store has format 3, every file the fixed schema, every row, value and
    name of the frozen store (but ``without``'s), and the answers the old code gave."""
    store = Store.open(home)
    assert store.metadata.store_format == STORE_FORMAT == 3
    for table in TABLES:
        for path in (store.path / table).rglob("*.parquet"):
            assert pq.read_schema(path).remove_metadata().equals(fixed_schema(table))
    skip = f"base_dir={without.split('/')[0]}" if without else None
    frozen = {p.relative_to(FROZEN / "store" / "trials").parts[0]
              for p in (FROZEN / "store" / "trials").rglob("*.parquet")}

    def keep(rows: dict[tuple[Any, ...], Any]) -> dict[tuple[Any, ...], Any]:
        return {k: v for k, v in rows.items() if k[0] != skip and k[0] in frozen}

    _same(keep(_old_rows(FROZEN / "store")), keep(_new_rows(store.path)))
    assert keep(_old_parameters(FROZEN / "store")) == keep(_new_parameters(store.path))
    old_trials = {p.relative_to(FROZEN / "store").as_posix():
                  pq.read_table(p).select(fixed_schema("trials").names)
                  for p in (FROZEN / "store" / "trials").rglob("*.parquet")}
    for rel, table in old_trials.items():
        if skip is None or f"/{skip}/" not in f"/{rel}":
            assert pq.read_table(store.path / rel).equals(table)
    answers = json.loads((FROZEN / "answers.json").read_text())
    for name, want in answers.items():
        if name == without:
            continue
        assert store.metrics(name) == want["metrics"]
        sel = curvekit.Selection(name, want["metric"], want["goal"], maximize=want["maximize"])
        assert curvekit.best(store, sel, explain=False).write_json() == want["best"]
        assert curvekit.steps_to_result(store, sel, explain=False).write_json() \
            == want["steps"]
    assert verify(store).ok, verify(store).problems
    return store


def test_opening_a_format_1_store_says_to_upgrade_and_changes_nothing(home: Path) -> None:
    before = snapshot(home)
    with pytest.raises(StoreError, match=r"store format 1 .* run `curvekit upgrade`"):
        Store.open(home)
    result = CliRunner().invoke(main, ["info", "--home", str(home)])
    assert result.exit_code == 1 and "curvekit upgrade" in result.output
    assert snapshot(home) == before


def test_curvekit_upgrade_keeps_every_row_and_name(home: Path) -> None:
    result = CliRunner().invoke(main, ["upgrade", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "Upgraded the store (5 workloads)" in result.output
    store = _check_upgraded(home)
    # the metaparameter format 1 stored as param_optimizer keeps that stored name
    assert store.trials(MINE)["param_optimizer"].to_list() == ["adam", "adam"]
    assert store.trials(MINE)["max_steps"].to_list() == [900, 1200]
    assert store.metrics(MINE) == ["val/classification_error", "val/top5_error"]
    assert "metric_columns" not in store.metadata and "table_columns" not in store.metadata
    assert upgrade(home).changed is False  # once is enough
    again = CliRunner().invoke(main, ["upgrade", "--home", str(home)])
    assert again.exit_code == 0 and "Nothing to do" in again.output


def test_the_first_add_upgrades_the_store(home: Path) -> None:
    add_workload(home, workload("other/mlp/sgd"))
    store = _check_upgraded(home)
    assert "other/mlp/sgd" in store.workloads()
    assert store.metadata["counts"]["trials"] == 48 + 2 + 6


def test_the_first_remove_upgrades_the_store(home: Path) -> None:
    remove_workload(home, MINE)
    store = _check_upgraded(home, without=MINE)
    assert MINE not in store.workloads() and MINE not in store.metadata.names


def test_a_conversion_upgrades_the_added_workloads_it_carries(home: Path,
                                                              tmp_path: Path) -> None:
    archive = tmp_path / "tiny.tar.bz2"
    manifest = tiny_archive(archive)
    convert(archive, home, manifest=manifest)
    store = _check_upgraded(home)  # the release's files are the same archive's, converted
    frame = store.measurements(MINE)
    assert isinstance(frame, pl.DataFrame) and frame.height == 20


def test_a_damaged_format_1_file_stops_the_upgrade_and_keeps_the_store(home: Path) -> None:
    snap = (home / "store").resolve()
    victim = next((snap / "measurements").rglob("*.parquet"))
    victim.write_bytes(victim.read_bytes()[:100])
    before = snapshot(home)
    with pytest.raises(StoreError, match=r"cannot read .* to upgrade the store"):
        upgrade(home)
    assert snapshot(home) == before
