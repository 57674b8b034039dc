"""The store stays plain Parquet after demo, add and fetch --force: the snippets that
README.md and docs/store.md show read every row and every column with DuckDB, polars and
pandas, and every file of a table has one schema."""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.cli import main
from curvekit.errors import StoreError
from curvekit.ingest.add import add
from curvekit.records import StudyKey, StudyRecord, TrialRecord
from curvekit.release.download import file_sha256
from curvekit.release.synthetic import tiny_archive
from curvekit.runner.demo import demo
from curvekit.store import writer
from curvekit.store.build import convert
from curvekit.store.catalog import verify
from curvekit.store.fetch import fetch
from curvekit.store.layout import TABLES, fixed_schema, partition_columns
from curvekit.store.snapshots import FILES_FILE, check_files, file_digest
from curvekit.store.store import Store
from curvekit.store.update import WorkloadData, add_workload, remove_workload
from curvekit.store.writer import TABLE_COLUMNS_KEY, recorded_schemas
from tests.conftest import small_members, snapshot, write_archive
from tests.logfiles import manifest_toml

ROOT = Path(__file__).resolve().parent.parent
MINE = "mine/cnn/sgd"
README_HOME = "~/.local/share/curvekit"
PAGE_HOME = "<home>"


# -- the snippets, taken from the documents ----------------------------------------------

def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def readme_blocks() -> list[str]:
    """The python blocks of README.md's "Read the store without curvekit" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Read the store without curvekit", 1)[1].split("\n## ", 1)[0]
    return _python_blocks(section)


def page_blocks() -> list[str]:
    """The python blocks of docs/store.md."""
    return _python_blocks((ROOT / "docs" / "store.md").read_text())


def block(blocks: list[str], needle: str) -> str:
    found = [b for b in blocks if needle in b]
    assert len(found) == 1, f"one block with {needle!r} expected, got {len(found)}"
    return found[0]


def run_snippet(code: str, placeholder: str, home: Path) -> tuple[dict[str, Any], Any]:
    """Run a snippet verbatim but for the home's path; return its names and the value of its
    last line when that is an expression (as a notebook would show it)."""
    assert placeholder in code
    tree = ast.parse(code.replace(placeholder, str(home)))
    last = tree.body.pop() if isinstance(tree.body[-1], ast.Expr) else None
    names: dict[str, Any] = {}
    exec(compile(tree, "<snippet>", "exec"), names)
    value = None
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "<snippet>", "eval"), names)
    return names, value


# -- what the store holds, read file by file ---------------------------------------------

def truth(home: Path, table: str) -> pd.DataFrame:
    """Every row of ``table``: each file read alone, its partition values from its path."""
    store = (home / "store").resolve()
    frames = []
    for path in sorted((store / table).rglob("*.parquet")):
        frame = pq.ParquetFile(path).read().to_pandas()
        for part in path.relative_to(store / table).parts[:-1]:
            name, _, value = part.partition("=")
            frame[name] = unquote(value)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def normal(frame: Any) -> pd.DataFrame:
    """A frame from any reader in one form: pandas, partition columns as strings, columns
    sorted, rows sorted by the partitions and keys."""
    if isinstance(frame, pl.LazyFrame):
        frame = frame.collect()
    if isinstance(frame, (pl.DataFrame, pa.Table)):
        frame = frame.to_pandas()
    elif not isinstance(frame, pd.DataFrame):
        frame = frame.df()  # a DuckDB relation
    frame = frame.copy()
    for col in frame.columns:
        if col in {"base_dir", "model", "optimizer", "batch_size"}:
            frame[col] = frame[col].astype(str)
        elif isinstance(frame[col].dtype, pd.CategoricalDtype):
            frame[col] = frame[col].astype(object)
    frame = frame[sorted(frame.columns)]
    keys = [c for c in ("base_dir", "model", "optimizer", "batch_size", "trial_id", "step")
            if c in frame.columns]
    return frame.sort_values(keys).reset_index(drop=True)


def assert_complete(got: Any, home: Path, table: str,
                    where: Callable[[pd.DataFrame], pd.Series] | None = None) -> None:
    want = truth(home, table)
    if where is not None:
        want = want[where(want)]
    got, want = normal(got), normal(want)
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    pd.testing.assert_frame_equal(got, want, check_dtype=False, check_exact=False)


def one_schema(home: Path) -> dict[str, pa.Schema]:
    """Assert every file of each table has the same schema, recorded in _store.json."""
    store = (home / "store").resolve()
    meta = json.loads((store / "_store.json").read_text())
    recorded = recorded_schemas(meta)
    assert recorded is not None
    out = {}
    for table in TABLES:
        schemas = {pq.read_schema(p).remove_metadata()
                   for p in (store / table).rglob("*.parquet")}
        assert len(schemas) == 1, f"{table}: {len(schemas)} schemas"
        (schema,) = schemas
        assert schema.equals(recorded[table]), table
        fixed = fixed_schema(table).names
        assert schema.names[:len(fixed)] == fixed
        assert schema.names[len(fixed):] == sorted(schema.names[len(fixed):])
        out[table] = schema
    assert meta["metric_columns"] == out["measurements"].names[2:]
    return out


# -- a mixed store: the release, the demo and a CSV workload of one's own -----------------

def _mine_logs(folder: Path) -> Path:
    """Two runs with a metric the release lacks and metaparameters of their own."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, bs in enumerate((32, 64)):
        rows = [f"{s},{0.9 / (1 + s / 100)!r},{0.5 / (1 + s / 50)!r}" for s in range(0, 500, 50)]
        (folder / f"bs{bs}.csv").write_text(
            "step,val/classification_error,val/top5_error\n" + "\n".join(rows) + "\n")
        entries.append((f"bs{bs}.csv", bs, {"learning_rate": 0.1 * (i + 1),
                                            "max_steps": 900 + 300 * i,
                                            "schedule": "cosine"}))
    (folder / "runs.toml").write_text(manifest_toml(entries))
    return folder


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("mixed")
    archive = tmp / "tiny.tar.bz2"
    manifest = tiny_archive(archive)
    home = tmp / "home"
    fetch(home=home, archive=archive, manifest=manifest, sha256=file_sha256(archive))
    demo(home)
    logs = _mine_logs(tmp / "logs")
    add(logs, name=MINE, manifest=logs / "runs.toml", home=home)
    return home


def _mine(frame: pd.DataFrame) -> pd.Series:
    return frame["base_dir"].astype(str) == "mine"


def test_every_file_of_a_table_has_one_schema(mixed: Path) -> None:
    schemas = one_schema(mixed)
    assert {"val/top5_error", "val/average_precision", "test/classification_error"} <= \
        set(schemas["measurements"].names)
    trials = schemas["trials"]
    assert trials.field("max_steps").type == pa.int64()
    assert trials.field("schedule").type == pa.string()
    assert trials.field("learning_rate").type == pa.float64()
    assert verify(Store.open(mixed)).ok


def test_readme_duckdb_snippet(mixed: Path) -> None:
    _, relation = run_snippet(block(readme_blocks(), "import duckdb"), README_HOME, mixed)
    got = relation.df()
    rows = truth(mixed, "measurements")
    rows = rows[(rows.base_dir == "cifar_10") & (rows.model == "resnet_8")
                & (rows.optimizer == "sgd") & (rows["val/classification_error"] < 0.3)]
    want = rows.groupby(rows.batch_size.astype(int))["step"].min()
    assert len(want) > 0
    assert got["batch_size"].tolist() == want.index.tolist()
    assert got["steps"].tolist() == want.tolist()


def test_readme_polars_snippet(mixed: Path) -> None:
    names, _ = run_snippet(block(readme_blocks(), "import polars"), README_HOME, mixed)
    assert_complete(names["trials"], mixed, "trials")
    mine = names["trials"].filter(pl.col("base_dir") == "mine").sort("batch_size")
    assert mine["max_steps"].to_list() == [900, 1200]
    assert mine["schedule"].to_list() == ["cosine", "cosine"]
    assert names["trials"].filter(pl.col("base_dir") == "demo/digits").height == 528


def test_readme_pandas_snippet(mixed: Path) -> None:
    names, _ = run_snippet(block(readme_blocks(), "import pandas"), README_HOME, mixed)
    trials = names["trials"]
    assert_complete(trials, mixed, "trials")
    mine = trials[trials.base_dir == "mine"].sort_values("batch_size")
    assert mine["max_steps"].tolist() == [900, 1200]  # dropped when the first file lacked it


def test_store_page_duckdb_snippet(mixed: Path) -> None:
    names, _ = run_snippet(block(page_blocks(), "import duckdb"), PAGE_HOME, mixed)
    assert_complete(names["measurements"], mixed, "measurements",
                    lambda f: (f.base_dir == "mnist_subsets/mnist_6875")
                    & (f.model == "simple_cnn_base"))


def test_store_page_polars_snippet(mixed: Path) -> None:
    names, _ = run_snippet(block(page_blocks(), "import polars"), PAGE_HOME, mixed)
    assert_complete(names["trials"], mixed, "trials")


def test_store_page_pandas_and_pyarrow_snippet(mixed: Path) -> None:
    names, _ = run_snippet(block(page_blocks(), "import pandas"), PAGE_HOME, mixed)
    assert_complete(names["studies"], mixed, "studies")
    measurements = names["measurements"]
    assert_complete(measurements, mixed, "measurements")
    # the metric only the added workload has: every one of its values comes back
    mine = measurements.filter(pa.compute.equal(measurements["base_dir"], "mine"))
    assert mine.num_rows == 20 and mine["val/top5_error"].null_count == 0
    assert measurements["val/top5_error"].null_count == measurements.num_rows - 20


def test_fetch_force_keeps_one_schema(mixed: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(mixed, home, symlinks=True)
    archive = tmp_path / "tiny.tar.bz2"
    manifest = tiny_archive(archive)
    fetch(home=home, archive=archive, manifest=manifest, sha256=file_sha256(archive),
          force=True)
    schemas = one_schema(home)
    assert "val/top5_error" in schemas["measurements"].names
    assert "max_steps" in schemas["trials"].names
    assert verify(Store.open(home)).ok
    names, _ = run_snippet(block(readme_blocks(), "import pandas"), README_HOME, home)
    assert_complete(names["trials"], home, "trials")


# -- attacks: types that do not mix, rewritten files, wide tables --------------------------

def _workload(name: str, params: dict[str, Any], metrics: tuple[str, ...] = ("val/error",),
              batch_size: int = 16) -> WorkloadData:
    base_dir, model, optimizer = name.rsplit("/", 2)
    key = StudyKey(base_dir, model, optimizer, batch_size)
    study = StudyRecord(key, base_dir, False, 3, {}, {}, "runs.toml")
    trial = TrialRecord(key, 0, "COMPLETE", 3, params, "run0.csv")
    rows = pa.table({"step": pa.array([1, 2, 3], pa.int64()),
                     **{m: [0.5, 0.3, 0.2] for m in metrics}})
    return WorkloadData([study], [trial], {(key, 0): rows}, {"format": "test"})


@pytest.fixture(scope="module")
def small_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A converted one-workload release (learning_rate is float64) to copy per test."""
    tmp = tmp_path_factory.mktemp("small")
    archive = write_archive(tmp / "small.tar.bz2", small_members())
    convert(archive, tmp / "home")
    return tmp / "home"


@pytest.fixture
def home(small_release: Path, tmp_path: Path) -> Path:
    shutil.copytree(small_release, tmp_path / "home", symlinks=True)
    return tmp_path / "home"


def test_a_string_beside_a_number_is_refused_and_the_store_is_unchanged(home: Path,
                                                                       tmp_path: Path) -> None:
    before = snapshot(home)
    with pytest.raises(StoreError, match=r"the trials column 'learning_rate' holds string "
                       r"values in u/text/sgd but double values in mnist/fc_1024/sgd"):
        add_workload(home, _workload("u/text/sgd", {"learning_rate": "fast"}))
    assert snapshot(home) == before
    # through the CLI: an Error: line and a non-zero exit
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.csv").write_text("step,val/error\n1,0.5\n2,0.25\n")
    (logs / "runs.toml").write_text(manifest_toml([("a.csv", 16, {"learning_rate": "fast"})]))
    result = CliRunner().invoke(main, ["add", str(logs), "--name", "u/text/sgd", "--manifest",
                                       str(logs / "runs.toml"), "--home", str(home)])
    assert result.exit_code != 0
    assert result.output.startswith("Error: ") and "'learning_rate'" in result.output
    assert snapshot(home) == before


def test_int_and_float_make_float_and_the_old_snapshot_keeps_its_files(home: Path) -> None:
    add_workload(home, _workload("u/ints/sgd", {"learning_rate": 1, "max_steps": 900}))
    assert one_schema(home)["trials"].field("max_steps").type == pa.int64()
    # a reader holds the current snapshot while max_steps becomes float64 under it
    with Store.open(home) as reader:
        old = reader.path
        add_workload(home, _workload("u/floats/sgd", {"max_steps": 900.5}))
        assert old.exists() and check_files(old).damaged == []
        assert pq.read_schema(next((old / "trials").rglob("*.parquet"))) \
            .field("max_steps").type == pa.int64()
    assert one_schema(home)["trials"].field("max_steps").type == pa.float64()
    trials = pd.read_parquet(home / "store" / "trials")
    assert sorted(trials["max_steps"].dropna().tolist()) == [900.0, 900.5]
    assert sorted(trials[trials.base_dir == "u"]["learning_rate"].dropna().tolist()) == [1.0]
    assert verify(Store.open(home)).ok  # the rewritten files were sealed with new digests


def test_an_integer_a_float_cannot_hold_is_refused(home: Path) -> None:
    add_workload(home, _workload("u/big/sgd", {"seed": 2**53 + 1}))
    before = snapshot(home)
    with pytest.raises(StoreError, match=r"u/big/sgd: cannot widen its trials.*floats or "
                       r"strings"):
        add_workload(home, _workload("u/half/sgd", {"seed": 0.5}))
    with pytest.raises(StoreError, match=r"u/huge/sgd: a metaparameter does not fit"):
        add_workload(home, _workload("u/huge/sgd", {"learning_rate": 2**60 + 1}))
    assert snapshot(home) == before


def test_a_bool_beside_a_number_is_refused(home: Path) -> None:
    add_workload(home, _workload("u/flag/sgd", {"warmup": True}))
    before = snapshot(home)
    with pytest.raises(StoreError, match=r"'warmup' holds int64 values in u/steps/sgd but "
                       r"bool values in u/flag/sgd"):
        add_workload(home, _workload("u/steps/sgd", {"warmup": 100}))
    assert snapshot(home) == before


def test_a_column_without_values_takes_the_others_type(home: Path) -> None:
    add_workload(home, _workload("u/none/sgd", {"decay": None}))
    assert one_schema(home)["trials"].field("decay").type == pa.bool_()  # as the writer alone
    add_workload(home, _workload("u/some/sgd", {"decay": 0.5}))
    assert one_schema(home)["trials"].field("decay").type == pa.float64()


def test_too_many_columns_are_refused(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer, "MAX_TABLE_COLUMNS", 3)
    before = snapshot(home)
    metrics = ("a/1", "a/2", "a/3")  # with the release's val/classification_error: four
    with pytest.raises(StoreError, match=r"measurements table would have 4 columns besides "
                       r"its fixed ones; it holds at most 3"):
        add_workload(home, _workload("u/wide/sgd", {}, metrics))
    assert snapshot(home) == before


def test_a_store_without_a_recorded_schema_is_made_uniform(home: Path) -> None:
    """A store written before one schema per table was kept: the next add conforms it."""
    add_workload(home, _workload("u/old/sgd", {"max_steps": 3}, ("val/top5_error",)))
    store = (home / "store").resolve()
    meta = json.loads((store / "_store.json").read_text())
    del meta[TABLE_COLUMNS_KEY]
    (store / "_store.json").write_text(json.dumps(meta))
    # the release's files as an older curvekit left them: without the added columns
    for table in ("trials", "measurements"):
        for path in (store / table / "base_dir=mnist").rglob("*.parquet"):
            data = pq.read_table(path)
            keep = [c for c in data.column_names if c not in ("max_steps", "val/top5_error")]
            path.unlink()  # a new inode: the previous snapshot's records stay true
            pq.write_table(data.select(keep), path)
            rel = path.relative_to(store).as_posix()
            records = json.loads((store / FILES_FILE).read_text())
            records["files"][rel] = {"size": path.stat().st_size, "digest": file_digest(path)}
            (store / FILES_FILE).write_text(json.dumps(records))
    assert verify(Store.open(home)).ok
    add_workload(home, _workload("u/next/sgd", {"max_steps": 5}))
    one_schema(home)


# -- the invariant, over sequences of add, remove and fetch --force ------------------------

_OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["u/a/sgd", "u/b/sgd"]),
              st.sets(st.sampled_from(["val/x", "train/y", "val/classification_error"]),
                      min_size=1),
              st.dictionaries(st.sampled_from(["learning_rate", "cap", "flag"]),
                              st.one_of(st.integers(0, 5), st.floats(0, 1), st.booleans()),
                              max_size=2)),
    st.tuples(st.just("remove"), st.sampled_from(["u/a/sgd", "u/b/sgd"])),
    st.tuples(st.just("fetch")),
), min_size=1, max_size=4)


@settings(max_examples=12, deadline=None)
@given(ops=_OPS)
def test_every_sequence_of_updates_keeps_one_schema_per_table(
        small_release: Path, tmp_path_factory: pytest.TempPathFactory,
        ops: list[tuple[Any, ...]]) -> None:
    home = tmp_path_factory.mktemp("seq") / "home"
    shutil.copytree(small_release, home, symlinks=True)
    archive = write_archive(home.parent / "small.tar.bz2", small_members())
    for op in ops:
        before = snapshot(home)
        try:
            if op[0] == "add":
                add_workload(home, _workload(op[1], op[3], tuple(sorted(op[2]))), replace=True)
            elif op[0] == "remove":
                remove_workload(home, op[1])
            else:
                convert(archive, home)
        except StoreError:
            assert snapshot(home) == before  # refused: a type clash, or nothing to remove
        one_schema(home)
    assert set(partition_columns("trials")) <= set(
        pl.scan_parquet(f"{home}/store/trials/**/*.parquet", hive_partitioning=True)
        .collect().columns)


def test_a_damaged_file_is_carried_as_damage_not_rewritten(home: Path) -> None:
    """A new column does not launder a damaged file: it keeps its old digest and columns."""
    add_workload(home, _workload("u/hurt/sgd", {}))
    store = (home / "store").resolve()
    victim = next((store / "measurements" / "base_dir=u").rglob("*.parquet"))
    data = bytearray(victim.read_bytes())
    data[8] ^= 0x01  # in the first column chunk; the footer still reads
    victim.write_bytes(bytes(data))
    add_workload(home, _workload("u/more/sgd", {}, ("val/new_metric",)))
    rel = victim.relative_to(store).as_posix()
    new = (home / "store").resolve()
    assert "val/new_metric" not in pq.read_schema(new / rel).names
    problems = verify(Store.open(home)).problems
    assert any(p.startswith(rel) and "add u/hurt/sgd again" in p for p in problems), problems
    # every file that is not damaged has the one schema
    schemas = {pq.read_schema(p).remove_metadata()
               for p in (new / "measurements").rglob("*.parquet")
               if p.relative_to(new).as_posix() != rel}
    assert len(schemas) == 1
