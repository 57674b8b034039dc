"""A store of format 2 (a measurements file per study, ``batch_size=<n>/part-0.parquet``),
made by the curvekit that wrote that format (tests/format2/make_format2.py), is upgraded to format
3 with every row, value and name kept and every answer the same: by `curvekit upgrade`, and
by the first add or remove; opening it for reading says so (docs/store.md, "Stores of
formats 1 and 2")."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import curvekit
from curvekit.cli import main
from curvekit.errors import StoreError
from curvekit.store.catalog import verify
from curvekit.store.layout import STORE_FORMAT, TABLES, fixed_schema
from curvekit.store.store import Store
from curvekit.store.update import add_workload, remove_workload
from curvekit.store.upgrade import upgrade
from tests.conftest import snapshot
from tests.test_update import workload

FROZEN = Path(__file__).resolve().parent / "format2"
MINE = "mine/Net/sgd"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home whose current store is the frozen format-2 snapshot."""
    home = tmp_path / "home"
    snap = home / "stores" / "local-0123456789ab"
    shutil.copytree(FROZEN / "store", snap)
    (snap / ".lease").touch()
    (home / "store").symlink_to(Path("stores") / snap.name)
    return home


Rows = dict[tuple[Any, ...], list[float | None]]


def _rows(folder: Path) -> Rows:
    """Every measurements row of a store, format 2 or 3: (workload folders, batch size,
    trial, step, metric) -> its values in order (a repeated step keeps both)."""
    out: Rows = {}
    for path in sorted((folder / "measurements").rglob("*.parquet")):
        parts = path.relative_to(folder).parts
        for row in pq.read_table(path).to_pylist():
            bs = row["batch_size"] if "batch_size" in row else int(parts[4].split("=")[1])
            key = (*parts[1:4], bs, row["trial_id"], row["step"], row["metric"])
            out.setdefault(key, []).append(row["value"])
    return out


def _same(a: Rows, b: Rows) -> None:
    assert a.keys() == b.keys()
    for key, values in a.items():
        other = b[key]
        assert len(values) == len(other), key
        for x, y in zip(values, other, strict=True):
            assert (x is None and y is None) or (
                x is not None and y is not None
                and ((math.isnan(x) and math.isnan(y)) or (x == y and str(x) == str(y)))), key


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _check_upgraded(home: Path, *, without: str | None = None) -> Store:
    """The current store has format 3, every file the fixed schema, every row, value and
    name of the frozen store (but ``without``'s), and the answers the old code gave."""
    store = Store.open(home)
    assert store.metadata.store_format == STORE_FORMAT == 3
    for table in TABLES:
        for path in (store.path / table).rglob("*.parquet"):
            assert pq.read_schema(path).remove_metadata().equals(fixed_schema(table))
    old = {k: v for k, v in _rows(FROZEN / "store").items()
           if without is None or k[0] != f"base_dir={without.split('/')[0]}"}
    new = _rows(store.path)
    _same(old, {k: v for k, v in new.items() if k[0] in {o[0] for o in old}})
    answers = json.loads((FROZEN / "answers.json").read_text())
    for name, want in answers.items():
        if name in ("(sql)", without):
            continue
        assert store.metrics(name) == want["metrics"]
        sel = curvekit.Selection(name, want["metric"], want["goal"])
        assert curvekit.best(store, curvekit.Selection(name, want["metric"]),
                             explain=False).write_json() == want["best"]
        assert curvekit.steps_to_result(store, sel, explain=False).write_json() \
            == want["steps"]
        wide = store.measurements(name)
        assert _digest(wide.write_csv()) == want["measurements"]  # type: ignore[union-attr]
    if without is None:
        rows = store.sql("select * from measurements where base_dir <> 'other' order by all")
        assert _digest(rows.write_csv()) == answers["(sql)"]["rows"]
    assert verify(store).ok, verify(store).problems
    return store


def test_opening_a_format_2_store_says_to_upgrade_and_changes_nothing(home: Path) -> None:
    before = snapshot(home)
    with pytest.raises(StoreError, match=r"store format 2 .* run `curvekit upgrade`"):
        Store.open(home)
    result = CliRunner().invoke(main, ["info", "--home", str(home)])
    assert result.exit_code == 1 and "curvekit upgrade" in result.output
    assert snapshot(home) == before


def test_curvekit_upgrade_keeps_every_row_name_and_answer(home: Path) -> None:
    result = CliRunner().invoke(main, ["upgrade", "--home", str(home)])
    assert result.exit_code == 0, result.output
    store = _check_upgraded(home)
    assert store.metrics(MINE) == sorted(["val/err", "VAL/ERR", "step", "Step", "metric",
                                          "batch_size", "é/δ"])
    index = store.measurements_index(MINE)
    assert index == {"part-0-0.parquet": store.metrics(MINE), "part-0-1.parquet": []}
    # the trials and parameters files are carried as they are: hard links
    for table in ("studies", "trials", "parameters"):
        for path in (store.path / table).rglob("*.parquet"):
            rel = path.relative_to(store.path)
            assert path.read_bytes() == (FROZEN / "store" / rel).read_bytes()
    assert upgrade(home).changed is False


def test_the_first_add_upgrades_the_store(home: Path) -> None:
    add_workload(home, workload("other/mlp/sgd"))
    store = _check_upgraded(home)
    assert "other/mlp/sgd" in store.workloads()


def test_the_first_remove_upgrades_the_store(home: Path) -> None:
    remove_workload(home, MINE)
    store = _check_upgraded(home, without=MINE)
    assert MINE not in store.workloads() and MINE not in store.metadata.names
