"""Names and paths are data, never SQL: hostile metaparameter, metric and workload names and
home paths are answered about or refused with a clear message, and nothing else happens."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import curvekit
from curvekit.cli import main
from curvekit.errors import CurvekitError, IngestError, RunError, StoreError
from curvekit.ingest.add import BATCH_SIZE_PARAMS, PARAM_ALIASES, add
from curvekit.names import MAX_BASE_DIR_PARTS, MAX_FOLDER_BYTES
from curvekit.records import Workload
from curvekit.release.synthetic import tiny_archive
from curvekit.runner.plan import Sweep
from curvekit.store.build import convert
from curvekit.store.catalog import info, verify
from curvekit.store.store import Store
from curvekit.store.wide import frame_names
from tests.conftest import ROOT, metadata_json, small_members
from tests.logfiles import write_plain

# The reviewed attack: a metaparameter name that closes the identifier curvekit used to
# paste it into, then runs a COPY that writes a file of the attacker's choice.
PAYLOAD = ('0") from (select 1 as "0"); COPY (select \'x\' as p) TO \'{target}\'; '
           'select 1 as "one" --')
NAME = "mine/cnn/sgd"


def _cli(*args: str | Path) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def _csv_logs(folder: Path) -> Path:
    """Two batch sizes, two runs each, release-style metric names."""
    for bs in (32, 64):
        for trial in range(2):
            write_plain(folder / f"bs{bs}_t{trial}.csv", bs, trial)
    return folder


def _manifest(folder: Path, parameter: str) -> Path:
    runs = [{"run": f"bs{bs}_t{t}.csv", "batch_size": bs,
             "parameters": {parameter: 0.5 + t, "learning_rate": 0.1 * (t + 1)}}
            for bs in (32, 64) for t in range(2)]
    path = folder / "runs.json"
    path.write_text(json.dumps({"runs": runs}))
    return path


def _queries_answer(home: Path, metric: str, goal: float, parameter: str, tmp: Path) -> None:
    """best, steps-to-result and report run and report ``parameter`` as a column."""
    for command in (["best", NAME, "--metric", metric],
                    ["steps-to-result", NAME, "--metric", metric, "--goal", str(goal)]):
        rows = json.loads(_cli(*command, "--format", "json", "--home", home))
        assert rows and all(parameter in row for row in rows)
    _cli("report", "--out", tmp / "site", "--no-figures", "--bootstrap", "0", "--quiet",
         "--workload", NAME, "--home", home)
    assert (tmp / "site" / "index.html").is_file()


def test_payload_in_a_run_manifest_is_a_column_name(tmp_path: Path) -> None:
    target = tmp_path / "written-by-sql.txt"
    payload = PAYLOAD.format(target=target)
    logs = _csv_logs(tmp_path / "logs")
    home = tmp_path / "home"
    _cli("add", logs, "--name", NAME, "--manifest", _manifest(logs, payload), "--home", home)
    _queries_answer(home, "val/classification_error", 0.3, payload, tmp_path)
    assert not target.exists()


def test_payload_in_a_release_metadata_json_is_a_column_name(tmp_path: Path) -> None:
    target = tmp_path / "written-by-sql.txt"
    payload = PAYLOAD.format(target=target)
    members = small_members()
    for bs in (8, 64):
        for t in (1, 2):
            record = json.loads(metadata_json(t))
            record["parameters"] = {"learning_rate": 0.1 * t, payload: 0.5}
            members[f"{ROOT}/mnist/fc_1024/sgd/{bs}/{t}/metadata.json"] = \
                json.dumps(record).encode()
    for name, data in members.items():
        (tmp_path / "rel" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "rel" / name).write_bytes(data)
    home = tmp_path / "home"
    _cli("add", tmp_path / "rel" / ROOT, "--name", NAME, "--home", home)
    _queries_answer(home, "val/classification_error", 0.3, payload, tmp_path)
    assert not target.exists()


def test_payload_in_an_mlflow_params_file_is_a_column_name(tmp_path: Path) -> None:
    target = tmp_path / "written-by-sql.txt"
    payload = PAYLOAD.format(target=target)
    experiment = tmp_path / "mlruns" / "1"
    experiment.mkdir(parents=True)
    (experiment / "meta.yaml").write_text("experiment_id: '1'\nname: sweep\n")
    for i, (bs, lr) in enumerate([(32, 0.1), (32, 0.2), (64, 0.1), (64, 0.2)]):
        run = experiment / f"run{i}"
        (run / "metrics").mkdir(parents=True)
        (run / "meta.yaml").write_text(f"run_id: run{i}\nlifecycle_stage: active\n")
        # MLflow keeps a key with '/' as nested folders: the payload's path makes several
        param = run / "params" / payload
        param.parent.mkdir(parents=True, exist_ok=True)
        param.write_text("0.5")
        (run / "params" / "batch_size").write_text(str(bs))
        (run / "params" / "learning_rate").write_text(str(lr))
        points = "".join(f"1700000000000 {1 / (1 + s * lr * bs / 3200)} {s}\n"
                         for s in range(0, 1001, 100))
        (run / "metrics" / "val_loss").write_text(points)
    home = tmp_path / "home"
    _cli("add", tmp_path / "mlruns", "--name", NAME, "--home", home)
    _queries_answer(home, "val/loss", 0.5, payload, tmp_path)
    assert not target.exists()


@pytest.mark.parametrize("folder", ["o'brien", 'say "hi"', "x'); drop table t; --",
                                    "glob [a]*?{b,c}", "ü 中文"])
def test_home_paths_with_quotes_work(tmp_path: Path, folder: str) -> None:
    home = tmp_path / folder
    convert(tmp_path / "a.tar.bz2", home, manifest=tiny_archive(tmp_path / "a.tar.bz2"))
    assert "48" in _cli("query", "select count(*) from trials", "--home", home)
    assert "lm1b/lstm/nesterov_momentum" in _cli("info", "--home", home)
    assert _cli("verify", "--home", home).startswith("OK")
    assert _cli("best", "lm1b/lstm/nesterov_momentum", "--metric", "val/cross_entropy_error",
                "--home", home)


def test_query_has_its_views_on_a_fresh_store(tmp_path: Path) -> None:
    convert(tmp_path / "a.tar.bz2", tmp_path, manifest=tiny_archive(tmp_path / "a.tar.bz2"))
    store = Store.open(tmp_path)
    assert store.query("select count(*) from trials where status = ?", ["COMPLETE"]).item() > 0
    # a table name inside a string is a value, not a use of the view
    assert Store.open(tmp_path).query("select 'trials' as t").item() == "trials"


@pytest.mark.parametrize("home, problem", [
    ("bad\0home", "NUL character"),
    ("bad\udcffhome", "not valid UTF-8"),
    ("data/step=7/curvekit", "folder named with '='"),
    ("x" * 300, "file systems allow"),
    ("/".join(["abc"] * 1100), "bytes long"),
])
def test_unreadable_home_paths_are_refused(tmp_path: Path, home: str, problem: str) -> None:
    with pytest.raises(StoreError, match=problem):
        Store.open(tmp_path / home)
    with pytest.raises(StoreError, match=problem):
        logs = _csv_logs(tmp_path / "logs")
        add(logs, name=NAME, manifest=_manifest(logs, "momentum"), home=tmp_path / home)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]
    if "\0" not in home:  # a command line cannot hold NUL
        result = CliRunner().invoke(main, ["info", "--home", str(tmp_path / home)])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
        assert result.output.startswith("Error: ") and problem in result.output


@pytest.mark.parametrize("name, problem", [
    ("a/b", "must be base_dir/model/optimizer"),
    ("a/b\nc/d", "control character (U+000A"),
    ("a/b\u2028/d", "control character (U+2028"),
    ("a/\udcff/d", "not valid UTF-8"),
    ("a/ b/d", "starts or ends with whitespace"),
    ("a/../d", "'..'"),
    ("a//b/c/d", "empty folder"),
    ("x" * 300 + "/m/o", f"more than the {MAX_FOLDER_BYTES} bytes"),
    ("中" * 29 + "/m/o", "-byte folder name"),
    ("/".join("a" * 200) + "/m/o", f"more than {MAX_BASE_DIR_PARTS}"),
])
def test_one_rule_for_every_source(tmp_path: Path, name: str, problem: str) -> None:
    """CSV logs, the release layout, the manifest, the runner and the store refuse alike."""
    problem = re.escape(problem)
    with pytest.raises(IngestError, match=problem):
        Workload.parse(name)
    logs = _csv_logs(tmp_path / "logs")
    manifest = _manifest(logs, "momentum")
    home = tmp_path / "home"
    with pytest.raises(IngestError, match=problem):
        add(logs, name=name, manifest=manifest, home=home)
    members = small_members()
    for member, data in members.items():
        (tmp_path / "rel" / member).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "rel" / member).write_bytes(data)
    with pytest.raises(IngestError, match=problem):
        add(tmp_path / "rel" / ROOT, name=name, home=home)
    (logs / "named.json").write_text(json.dumps({"workload": {"name": name}}))
    with pytest.raises(IngestError, match=r"named\.json: \[workload\]\.name: .*" + problem):
        add(logs, manifest=logs / "named.json", home=home)
    try:  # the runner names workloads <name>/<model>/<optimizer>: the same verdict
        Workload.parse(f"{name}/fc_8/sgd")
    except IngestError:
        with pytest.raises(RunError, match=problem):
            Sweep.create(name, dataset="digits", model="fc_8", optimizers=["sgd"],
                         batch_sizes=[8], trials=1, steps=10, eval_every=5)
    assert not home.exists()


def test_folder_names_are_measured_percent_encoded() -> None:
    """A CJK character costs 9 bytes in a partition folder: 27 fit in base_dir, 28 do not."""
    assert Workload.parse("中" * 27 + "/m/o")[0] == "中" * 27
    with pytest.raises(IngestError, match="base_dir makes a 261-byte folder name"):
        Workload.parse("中" * 28 + "/m/o")
    assert Workload.parse("a" * 246 + "/m/o")[0] == "a" * 246  # base_dir= + 246 = 255 bytes


@pytest.mark.parametrize("kind", ["metric", "metaparameter"])
@pytest.mark.parametrize("name, problem", [
    ("val\terror", "control character (U+0009"),
    ("lr\x00", "control character (U+0000"),
    ("a\udc80", "not valid UTF-8"),
    ("", "empty"),
    ("x" * 256, "256 characters long"),
])
def test_metric_and_parameter_names_follow_the_rule(tmp_path: Path, kind: str, name: str,
                                                    problem: str) -> None:
    logs = _csv_logs(tmp_path / "logs")
    home = tmp_path / "home"
    if kind == "metric":
        if not name:  # an empty new name drops the column: nothing to refuse
            return
        call = {"metric_map": {"val/classification_error": name}, "manifest": _manifest(logs, "m")}
    else:
        call = {"manifest": _manifest(logs, name)}
    with pytest.raises(IngestError, match=f"{kind} name .*{re.escape(problem)}"):
        add(logs, name=NAME, home=home, **call)  # type: ignore[arg-type]
    assert not home.exists()


# ---------------------------------------------------------------------- properties
@pytest.fixture(scope="module")
def logs() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp())
    _manifest(_csv_logs(folder / "logs"), "momentum")  # runs.json
    yield folder / "logs"
    shutil.rmtree(folder)


def _outside(root: Path, inside: Path) -> list[Path]:
    """Files under ``root`` that are not under ``inside`` (nor the test's own input)."""
    return [p for p in root.rglob("*") if p.is_file() and inside not in p.parents
            and p.name != "runs.json"]


PROPERTY = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
# text of every kind, lone surrogates included (non-UTF-8 bytes of a file name)
NAMES = st.text(st.characters(codec=None, exclude_categories=()), min_size=0, max_size=40)
# and the names that were refused or renamed while names were columns
COLUMN_NAMES = st.one_of(st.sampled_from(
    ["step", "Step", "batch_size", "trial_id", "value", "metric", "VAL/ERR", "optimizer",
     "param_optimizer", "effective_learning_rate", "Status", "n_measurements"]), NAMES)


@PROPERTY
@given(part=NAMES)
def test_any_workload_name_round_trips_or_is_refused(logs: Path, part: str) -> None:
    name = f"mine/{part}/sgd"
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        try:
            add(logs, name=name, manifest=logs / "runs.json", home=home)
        except CurvekitError as exc:
            assert repr(name) in str(exc) or "manifest" in str(exc)
            assert not home.exists() or not (home / "store").exists()
            return
        store = Store.open(home)
        assert name in store.workloads() and name in info(store)["workload"].to_list()
        assert curvekit.best(store, curvekit.Selection(
            name, "val/classification_error")).height == 2
        assert verify(store).ok and not _outside(Path(tmp), home)


@PROPERTY
@given(metric=COLUMN_NAMES, parameter=COLUMN_NAMES)
def test_any_metric_and_parameter_name_round_trips_or_is_refused(
        logs: Path, metric: str, parameter: str) -> None:
    # `--map OLD=step` names the step column (docs/adding-workloads.md): not a metric
    assume(metric.strip() != "step")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        manifest = _manifest(Path(tmp), parameter)
        try:
            add(logs, name=NAME, manifest=manifest, home=home,
                metric_map={"val/classification_error": metric})
        except CurvekitError as exc:
            assert not home.exists()
            assert "name" in str(exc) or "column" in str(exc), str(exc)
            return
        # a map's target is stripped; "1-NAME" stores 1 - value as NAME; "" drops the metric
        stored = metric.strip()
        stored = stored[2:].strip() if stored.startswith("1-") else stored
        store = Store.open(home)
        if stored:
            # names are data: stored exactly, in any case, and labelled by the one rule in
            # an answer that has a column of that name already
            assert stored in store.metrics(NAME)
            own = ("batch_size", "step", "trial_id", "effective_learning_rate")
            column = frame_names(own, [stored], "metric")[stored]
            label = frame_names((*own, column), [parameter], "metaparameter")[parameter]
            best = curvekit.best(store, curvekit.Selection(NAME, stored), explain=False)
            assert best.height == 2 and best[column].null_count() == 0
            if parameter not in ("learning_rate", *BATCH_SIZE_PARAMS, *PARAM_ALIASES):
                assert set(best[label].to_list()) <= {0.5, 1.5}
            curvekit.steps_to_result(store, curvekit.Selection(NAME, stored, 0.5))
        assert not _outside(Path(tmp), home)


@PROPERTY
@given(folders=st.lists(NAMES.filter(lambda s: "/" not in s and s not in (".", "..")),
                        min_size=1, max_size=3))
def test_any_home_path_works_or_is_refused(logs: Path, folders: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp).joinpath(*folders)
        try:
            add(logs, name=NAME, manifest=logs / "runs.json", home=home)
        except StoreError as exc:
            assert "the curvekit home" in str(exc) and not _outside(Path(tmp), home)
            return
        store = Store.open(home)
        assert store.query("select count(*) from trials").item() == 4
        assert info(store)["workload"].to_list() == [NAME] and verify(store).ok
        assert curvekit.best(store, curvekit.Selection(
            NAME, "val/classification_error")).height == 2
        assert not _outside(Path(tmp), home)
