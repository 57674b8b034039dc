"""The store stays plain Parquet after demo, add, run and fetch --force: the snippets that
README.md and docs/store.md show read every row and every column with DuckDB, polars and
pandas, the documented pivots give a workload's wide curves, and every file of a table has
the one fixed schema (docs/store.md, "One fixed schema: names are rows")."""

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
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.errors import StoreError
from curvekit.ingest.add import add
from curvekit.records import StudyKey, StudyRecord, TrialRecord
from curvekit.release.download import file_sha256
from curvekit.release.synthetic import tiny_archive
from curvekit.runner.demo import demo
from curvekit.store.build import convert
from curvekit.store.catalog import verify
from curvekit.store.fetch import fetch
from curvekit.store.layout import TABLES, fixed_schema, partition_columns
from curvekit.store.snapshots import check_files
from curvekit.store.store import Store
from curvekit.store.update import WorkloadData, add_workload, remove_workload
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


def one_schema(home: Path) -> None:
    """Assert every file of each table has exactly the table's fixed columns."""
    store = (home / "store").resolve()
    for table in TABLES:
        for path in (store / table).rglob("*.parquet"):
            schema = pq.read_schema(path).remove_metadata()
            assert schema.equals(fixed_schema(table)), (path, schema)


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
    """The release, the demo, a CSV workload with its own names and a run's output."""
    tmp = tmp_path_factory.mktemp("mixed")
    archive = tmp / "tiny.tar.bz2"
    manifest = tiny_archive(archive)
    home = tmp / "home"
    fetch(home=home, archive=archive, manifest=manifest, sha256=file_sha256(archive))
    demo(home)
    logs = _mine_logs(tmp / "logs")
    add(logs, name=MINE, manifest=logs / "runs.toml", home=home)
    add_workload(home, _run_output())
    return home


def _run_output() -> WorkloadData:
    """A workload as ``curvekit run`` saves it (its collect step's tables), with a metric
    and metaparameters of names no other workload has."""
    from curvekit.runner.collect import workload_data

    key = {"base_dir": "ran", "model": "fc_8", "optimizer": "sgd"}
    tables = {
        "studies": pa.Table.from_pylist([{**key, "batch_size": 8, "dataset": "digits",
                                          "train_steps": 20, "parameter_configs": "{}",
                                          "extra": "{}", "member": "plan.json"}]),
        "trials": pa.Table.from_pylist([{**key, "batch_size": 8, "trial_id": t,
                                         "status": "COMPLETE", "steps": 20,
                                         "parameters": json.dumps({"learning_rate": 0.1 * t,
                                                                   "Seed": t}),
                                         "member": f"t{t}"} for t in (1, 2)]),
        "measurements": pa.Table.from_pylist([{**key, "batch_size": 8, "trial_id": t,
                                               "step": s, "val/classification_error": 1 / (s + t),
                                               "gradient/NORM": float(s)}
                                              for t in (1, 2) for s in (0, 10, 20)]),
    }
    return workload_data(tables, {"format": "curvekit-run"})[0]


def _mine(frame: pd.DataFrame) -> pd.Series:
    return frame["base_dir"].astype(str) == "mine"


def test_every_file_of_a_table_has_the_fixed_schema(mixed: Path) -> None:
    one_schema(mixed)
    store = Store.open(mixed)
    assert store.metrics(MINE) == ["val/classification_error", "val/top5_error"]
    assert store.parameter_types(MINE) == {"learning_rate": "float64", "max_steps": "int64",
                                           "schedule": "string"}
    assert store.metrics("ran/fc_8/sgd") == ["gradient/NORM", "val/classification_error"]
    assert verify(store).ok


def test_readme_duckdb_snippet(mixed: Path) -> None:
    _, relation = run_snippet(block(readme_blocks(), "import duckdb"), README_HOME, mixed)
    got = relation.df()
    rows = truth(mixed, "measurements")
    rows = rows[(rows.base_dir == "cifar_10") & (rows.model == "resnet_8")
                & (rows.optimizer == "sgd") & (rows.metric == "val/classification_error")
                & (rows.value < 0.3)]
    want = rows.groupby(rows.batch_size.astype(int))["step"].min()
    assert len(want) > 0
    assert got["batch_size"].tolist() == want.index.tolist()
    assert got["steps"].tolist() == want.tolist()


def test_readme_polars_snippet(mixed: Path) -> None:
    names, _ = run_snippet(block(readme_blocks(), "import polars"), README_HOME, mixed)
    assert_complete(names["trials"], mixed, "trials")
    assert_complete(names["parameters"], mixed, "parameters")
    mine = names["parameters"].filter(pl.col("base_dir") == "mine").sort("batch_size")
    assert mine.filter(pl.col("name") == "max_steps")["integer"].to_list() == [900, 1200]
    assert mine.filter(pl.col("name") == "schedule")["text"].to_list() == ["cosine", "cosine"]
    assert names["trials"].filter(pl.col("base_dir") == "demo/digits").height == 528


def test_readme_pandas_snippet(mixed: Path) -> None:
    names, _ = run_snippet(block(readme_blocks(), "import pandas"), README_HOME, mixed)
    assert_complete(names["trials"], mixed, "trials")
    parameters = names["parameters"]
    assert_complete(parameters, mixed, "parameters")
    mine = parameters[(parameters.base_dir == "mine") & (parameters.name == "max_steps")]
    assert sorted(mine["integer"].tolist()) == [900, 1200]


def test_store_page_duckdb_snippet(mixed: Path) -> None:
    names, _ = run_snippet(block(page_blocks(), "measurements = duckdb"), PAGE_HOME, mixed)
    assert_complete(names["measurements"], mixed, "measurements",
                    lambda f: (f.base_dir == "mnist_subsets/mnist_6875")
                    & (f.model == "simple_cnn_base"))


def test_store_page_polars_snippet(mixed: Path) -> None:
    names, _ = run_snippet(block(page_blocks(), "trials = pl.scan"), PAGE_HOME, mixed)
    assert_complete(names["trials"], mixed, "trials")
    assert_complete(names["parameters"], mixed, "parameters")


def test_store_page_pandas_and_pyarrow_snippet(mixed: Path) -> None:
    names, _ = run_snippet(block(page_blocks(), "import pyarrow.dataset"), PAGE_HOME, mixed)
    assert_complete(names["studies"], mixed, "studies")
    measurements = names["measurements"]
    assert_complete(measurements, mixed, "measurements")
    # the metric only the added workload has: every one of its values comes back
    mine = measurements.filter(pa.compute.equal(measurements["metric"], "val/top5_error"))
    assert mine.num_rows == 20 and set(mine["base_dir"].to_pylist()) == {"mine"}
    assert mine["value"].null_count == 0


WORKLOAD = "mnist_subsets/mnist_6875/simple_cnn_base/nesterov_momentum"


def _wide(store: Store) -> pd.DataFrame:
    frame = store.measurements(WORKLOAD)
    assert isinstance(frame, pl.DataFrame)
    return frame.to_pandas()


@pytest.mark.parametrize("needle", ["curves = duckdb", "curves = (pl.scan",
                                    "curves = (rows.groupby"])
def test_store_page_pivots_give_the_wide_curves(mixed: Path, needle: str) -> None:
    """docs/store.md: one pivot per library gives a workload's wide per-trial curves, the
    frame ``store.measurements`` returns."""
    names, _ = run_snippet(block(page_blocks(), needle), PAGE_HOME, mixed)
    got = names["curves"]
    if not isinstance(got, (pd.DataFrame, pl.DataFrame)):
        got = got.df()
    if isinstance(got, pl.DataFrame):
        got = got.to_pandas()
    want = _wide(Store.open(mixed))
    got = got.copy()
    got.columns = [str(c) for c in got.columns]
    got["batch_size"] = got["batch_size"].astype("int64")
    got = got[list(want.columns)].sort_values(["batch_size", "trial_id", "step"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)


def test_store_page_parameters_pivot(mixed: Path) -> None:
    names, _ = run_snippet(block(page_blocks(), "params = (pl.scan"), PAGE_HOME, mixed)
    want = Store.open(mixed).parameters(WORKLOAD)
    got = names["params"].sort("batch_size", "trial_id").select(want.columns)
    assert got.equals(want)


def test_fetch_force_keeps_the_added_workloads(mixed: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(mixed, home, symlinks=True)
    before = {w: Store.open(home).measurements(w) for w in (MINE, "ran/fc_8/sgd")}
    files = {k: v for k, v in _data_files((home / "store").resolve()).items()
             if "base_dir=mine/" in k or "base_dir=ran/" in k}
    archive = tmp_path / "tiny.tar.bz2"
    manifest = tiny_archive(archive)
    fetch(home=home, archive=archive, manifest=manifest, sha256=file_sha256(archive),
          force=True)
    one_schema(home)
    store = Store.open(home)
    assert verify(store).ok
    for workload, frame in before.items():
        assert store.measurements(workload).equals(frame)  # type: ignore[union-attr]
    # docs/store.md, "Cost": the added workloads' files are hard-linked as they are
    assert {k: v for k, v in _data_files(store.path).items() if k in files} == files
    names, _ = run_snippet(block(readme_blocks(), "import pandas"), README_HOME, home)
    assert_complete(names["trials"], home, "trials")


# -- names and types are data: an add rewrites nothing -------------------------------------

def _workload(name: str, params: dict[str, Any], metrics: tuple[str, ...] = ("val/error",),
              batch_size: int = 16) -> WorkloadData:
    base_dir, model, optimizer = name.rsplit("/", 2)
    key = StudyKey(base_dir, model, optimizer, batch_size)
    study = StudyRecord(key, base_dir, False, 3, {}, {}, "runs.toml")
    trial = TrialRecord(key, 0, "COMPLETE", 3, params, "run0.csv")
    return WorkloadData([study], [trial], {(key, 0): pa.table(_long(metrics))},
                        {"format": "test"})


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


def _data_files(snapshot: Path) -> dict[str, tuple[int, int]]:
    """Every Parquet file of a snapshot: relative path -> (device, inode)."""
    return {p.relative_to(snapshot).as_posix(): (p.stat().st_dev, p.stat().st_ino)
            for p in snapshot.rglob("*.parquet")}


def _folder(workload: str) -> str:
    from curvekit.store.layout import workload_dir

    return workload_dir("trials", *workload.rsplit("/", 2)).split("/", 1)[1]


def assert_only_its_own_files(old: dict[str, tuple[int, int]], home: Path,
                              workload: str) -> None:
    """Every data file ``old`` lists (see :func:`_data_files`) outside ``workload`` is in the
    current snapshot of ``home`` as a hard link (the same inode), and that snapshot has no
    other file outside it: nothing was rewritten."""
    new = _data_files((home / "store").resolve())
    mine = f"/{_folder(workload)}/"
    assert {k: v for k, v in new.items() if mine not in f"/{k}"} == \
        {k: v for k, v in old.items() if mine not in f"/{k}"}


def test_an_add_rewrites_no_existing_file_whatever_names_it_brings(home: Path) -> None:
    """docs/store.md, "Cost": add, remove and the runner's add write the workload's own
    files and hard-link every other one, with new metric and metaparameter names too."""
    with Store.open(home) as reader:  # a reader holds the snapshot while it is replaced
        files = _data_files(reader.path)
        add_workload(home, _workload("u/new/sgd", {"learning_rate": "fast", "Step": 3},
                                     ("val/top5_error", "step", "VAL/ERROR")))
        assert_only_its_own_files(files, home, "u/new/sgd")
        assert check_files(reader.path).damaged == []
    files = _data_files((home / "store").resolve())
    add_workload(home, _workload("u/other/sgd", {"learning_rate": True}, ("b/c",)))
    assert_only_its_own_files(files, home, "u/other/sgd")
    files = _data_files((home / "store").resolve())
    remove_workload(home, "u/new/sgd")
    assert_only_its_own_files(files, home, "u/new/sgd")
    one_schema(home)
    assert verify(Store.open(home)).ok


def test_each_workload_keeps_its_own_types(home: Path) -> None:
    """A metaparameter's values keep their own types in every workload: a string here, a
    float there, an integer beyond 2**53 exactly; nothing is widened or refused."""
    add_workload(home, _workload("u/text/sgd", {"learning_rate": "fast"}))
    add_workload(home, _workload("u/ints/sgd", {"learning_rate": 1, "seed": 2**53 + 1}))
    add_workload(home, _workload("u/flag/sgd", {"learning_rate": True, "seed": 0.5,
                                                "decay": None}))
    store = Store.open(home)
    assert store.parameter_types("mnist/fc_1024/sgd") == {"learning_rate": "float64"}
    assert store.parameter_types("u/text/sgd") == {"learning_rate": "string"}
    assert store.parameter_types("u/ints/sgd") == {"learning_rate": "int64", "seed": "int64"}
    assert store.parameter_types("u/flag/sgd") == {"decay": "null", "learning_rate": "bool",
                                                   "seed": "float64"}
    assert store.trials("u/text/sgd")["learning_rate"].to_list() == ["fast"]
    assert store.trials("u/ints/sgd")["seed"].to_list() == [2**53 + 1]
    assert store.trials("u/flag/sgd")["learning_rate"].to_list() == [True]
    assert store.parameter_columns("u/flag/sgd") == ["learning_rate", "seed"]
    rows = pl.read_parquet(f"{home}/store/parameters/**/*.parquet", hive_partitioning=True)
    seeds = rows.filter(pl.col("name") == "seed").sort("model")
    assert seeds.select("model", "type", "integer", "number").rows() == [
        ("flag", "float64", None, 0.5), ("ints", "int64", 2**53 + 1, float(2**53 + 1))]
    one_schema(home)


def test_an_integer_beyond_int64_is_refused_and_the_store_is_unchanged(home: Path) -> None:
    before = snapshot(home)
    with pytest.raises(StoreError, match=r"does not fit in a 64-bit integer"):
        add_workload(home, _workload("u/huge/sgd", {"learning_rate": 2**70}))
    assert snapshot(home) == before


# -- the invariant, over sequences of add, remove and fetch --force ------------------------

_OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["u/a/sgd", "u/b/sgd"]),
              st.sets(st.sampled_from(["val/x", "train/y", "val/classification_error",
                                       "step", "Step", "VAL/X"]), min_size=1),
              st.dictionaries(st.sampled_from(["learning_rate", "cap", "flag", "trial_id"]),
                              st.one_of(st.integers(0, 5), st.floats(0, 1), st.booleans(),
                                        st.text(max_size=3)),
                              max_size=2)),
    st.tuples(st.just("remove"), st.sampled_from(["u/a/sgd", "u/b/sgd"])),
    st.tuples(st.just("fetch")),
), min_size=1, max_size=4)


def _long(metrics: tuple[str, ...]) -> dict[str, list[Any]]:
    return {"step": [s for _ in metrics for s in (1, 2, 3)],
            "metric": [m for m in metrics for _ in range(3)],
            "value": [0.5, 0.3, 0.2] * len(metrics)}


@settings(max_examples=12, deadline=None)
@given(ops=_OPS)
def test_every_sequence_of_updates_keeps_the_schema_and_rewrites_nothing(
        small_release: Path, tmp_path_factory: pytest.TempPathFactory,
        ops: list[tuple[Any, ...]]) -> None:
    home = tmp_path_factory.mktemp("seq") / "home"
    shutil.copytree(small_release, home, symlinks=True)
    archive = write_archive(home.parent / "small.tar.bz2", small_members())
    for op in ops:
        before = snapshot(home)
        files = _data_files((home / "store").resolve())
        try:
            if op[0] == "add":
                add_workload(home, _workload(op[1], op[3], tuple(sorted(op[2]))),
                             replace=True)
            elif op[0] == "remove":
                remove_workload(home, op[1])
            else:
                convert(archive, home)
        except StoreError:
            assert snapshot(home) == before  # refused: nothing to remove
        if op[0] in ("add", "remove"):
            assert_only_its_own_files(files, home, op[1])
        if op[0] == "add":
            assert Store.open(home).metrics(op[1]) == sorted(op[2])
        one_schema(home)
    assert set(partition_columns("trials")) <= set(
        pl.scan_parquet(f"{home}/store/trials/**/*.parquet", hive_partitioning=True)
        .collect().columns)


def test_a_damaged_file_is_carried_as_damage(home: Path) -> None:
    """A later add hard-links a damaged file as it is: it keeps its recorded digest, and
    `curvekit verify` still names it."""
    add_workload(home, _workload("u/hurt/sgd", {}))
    store = (home / "store").resolve()
    victim = next((store / "measurements" / "base_dir=u").rglob("*.parquet"))
    data = bytearray(victim.read_bytes())
    data[8] ^= 0x01  # in the first column chunk; the footer still reads
    victim.write_bytes(bytes(data))
    inode = victim.stat().st_ino
    add_workload(home, _workload("u/more/sgd", {}, ("val/new_metric",)))
    rel = victim.relative_to(store).as_posix()
    new = (home / "store").resolve()
    assert (new / rel).stat().st_ino == inode
    problems = verify(Store.open(home)).problems
    assert any(p.startswith(rel) and "add u/hurt/sgd again" in p for p in problems), problems
