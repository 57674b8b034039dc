"""One name, column, step and value rule for every door into the store, and no silent
misreading: each case is refused with a clear error that names the value (the store left as
it was), or it round-trips exactly -- never stored as something else.

The doors: the release archive (``fetch``, :func:`curvekit.store.build.convert`), the
release layout through ``add``, CSV logs and run manifests through ``add``, and the runner's
plan. Names are data in the store (values in its rows): where a test allows a refusal, a
name the one rule accepts must in fact round-trip exactly.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import math
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import curvekit
from curvekit import structured
from curvekit.cli import main
from curvekit.errors import ArchiveError, CurvekitError, IngestError, RunError, StoreError
from curvekit.ingest.add import add
from curvekit.records import StudyKey
from curvekit.release.archive import CsvRecord
from curvekit.release.csvparse import CsvBatcher
from curvekit.runner.plan import Sweep
from curvekit.store.build import convert
from curvekit.store.layout import fixed_schema
from curvekit.store.store import Store
from curvekit.store.wide import frame_names
from tests.conftest import ROOT, small_members, snapshot, write_archive
from tests.logfiles import write_plain

NAME = "mine/cnn/sgd"
RELEASE = "mnist/fc_1024/sgd"
METRIC = "val/classification_error"
Members = dict[str, bytes]
RESERVED = ("base_dir", "model", "optimizer", "batch_size", "trial_id", "status", "steps",
            "n_measurements", "step", "effective_learning_rate")
"""The names of the store's and answers' own columns, which were refused or renamed while
names were columns."""


def parameter_column(name: str) -> str:
    """The column of the metaparameter ``name`` in ``Store.trials``' wide frame."""
    return frame_names(fixed_schema("trials").names, [name], "metaparameter")[name]


# ---------------------------------------------------------------------- helpers
def _members(params: dict[str, Any] | None = None, csv_text: str | None = None,
             study: dict[str, Any] | None = None) -> Members:
    """The miniature release with every trial's parameters, measurements or study fields
    replaced."""
    members = small_members()
    for name in list(members):
        if params is not None and name.endswith("metadata.json"):
            record = json.loads(members[name])
            record["parameters"] = params
            members[name] = json.dumps(record).encode()
        if csv_text is not None and name.endswith("measurements.csv"):
            members[name] = csv_text.encode()
        if study is not None and name.endswith("study.json"):
            members[name] = json.dumps({**json.loads(members[name]), **study}).encode()
    return members


def _folder(root: Path, members: Members) -> Path:
    for name, data in members.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root / ROOT


def _doors(tmp: Path, members: Members) -> Iterator[tuple[str, Callable[[], Path], Path]]:
    """(door, import, home) for the archive's conversion and the release layout's ``add``."""
    tmp.mkdir(parents=True, exist_ok=True)
    archive = write_archive(tmp / "a.tar.bz2", members)
    folder = _folder(tmp / "layout", members)

    def fetched() -> Path:
        convert(archive, tmp / "fetched")
        return tmp / "fetched"

    def added() -> Path:
        add(folder, name=NAME, home=tmp / "added")
        return tmp / "added"

    yield "fetch", fetched, tmp / "fetched"
    yield "add", added, tmp / "added"


def _workload(door: str) -> str:
    return RELEASE if door == "fetch" else NAME


def _refused_or(call: Callable[[], Any], home: Path, names: list[str]) -> Any:
    """``call()``'s result, or None when it is refused with a CurvekitError that names one of
    ``names`` (repr) and leaves ``home`` as it was."""
    before = _state(home)
    try:
        return call()
    except CurvekitError as exc:
        assert any(repr(n) in str(exc) for n in names), str(exc)
        assert _state(home) == before
        assert not list(home.glob("stores/.staging-*"))
        return None


def _state(home: Path) -> dict[str, str]:
    """Every file of ``home`` and its store link (none for a home not made yet)."""
    return snapshot(home) if home.exists() else {"<link>": ""}


def _trials(home: Path, workload: str) -> dict[str, list[Any]]:
    return Store.open(home).trials(workload).sort("batch_size", "trial_id").to_dict(
        as_series=False)


# ---------------------------------------------------------------------- item: names
@pytest.mark.parametrize("params", [
    {"learning_rate": 0.1, "optimizer": 1.0, "param_optimizer": 2.0},
    {"learning_rate": 0.1, "Learning_Rate": 99.0},
], ids=["param_-prefix", "case"])
def test_metaparameters_that_shared_a_column_are_kept_apart_on_every_door(
        tmp_path: Path, params: dict[str, float]) -> None:
    """docs/security.md, names are data: two metaparameters that differ only in case, or
    ``optimizer`` beside ``param_optimizer``, are kept apart, each value as given, through the
    archive and the release layout."""
    for door, call, home in _doors(tmp_path, _members(params)):
        call()
        trials = _trials(home, _workload(door))  # names as data: every value as given
        for name, value in params.items():
            assert set(trials[parameter_column(name)]) == {value}, door


@pytest.mark.parametrize("extra", [{"step": 99.0}, {"effective_learning_rate": 9.0},
                                   {"Steps": 7.0, "STATUS": "x"}])
def test_metaparameters_named_like_query_columns_change_no_answer(
        tmp_path: Path, extra: dict[str, Any]) -> None:
    """docs/security.md, names: a metaparameter named like a column of a query's answer
    (``step``, ``effective_learning_rate``) never replaces that column: ``best`` reports the
    effective learning rate 0.1 and the step where it was measured, on every door."""
    for door, call, home in _doors(tmp_path, _members({"learning_rate": 0.1, **extra})):
        if _refused_or(call, home, list(extra)) is None:
            continue
        workload = _workload(door)
        best = curvekit.best(Store.open(home), curvekit.Selection(workload, METRIC))
        assert best["effective_learning_rate"].to_list() == [pytest.approx(0.1)] * 2, door
        assert best["step"].to_list() == [200, 200] and best[METRIC].to_list() == [0.25] * 2
        trials = _trials(home, workload)
        for name, value in extra.items():
            assert set(trials[parameter_column(name)]) == {value}, door


@pytest.mark.parametrize("metrics", [["batch_size"], ["model"], ["optimizer"], ["base_dir"],
                                     ["Step"], ["Trial_ID"], ["val/err", "VAL/ERR"]])
def test_metrics_named_like_columns_round_trip_on_every_door(tmp_path: Path,
                                                            metrics: list[str]) -> None:
    """docs/security.md, names are data: a metric named like a column of the store (any
    case) and two metrics differing only in case round-trip on every door, each answered
    apart -- when names were columns, fetch dropped ``batch_size`` silently, answered
    ``val/err`` with ``VAL/ERR`` and ``Store.measurements`` failed with a traceback."""
    header = ",".join(["step", METRIC, *metrics])
    rows = "".join(f"{s},{e},{','.join(str(i + 7) for i in range(len(metrics)))}\n"
                   for s, e in ((0, 0.9), (100, 0.5), (200, 0.25)))
    for door, call, home in _doors(tmp_path, _members(csv_text=f"{header}\n{rows}")):
        try:
            call()
        except CurvekitError as exc:  # only an importer's own naming rule may refuse
            assert "would both become" in str(exc) and door == "add", (door, str(exc))
            continue
        store = Store.open(home)
        table = store.measurements(_workload(door))
        own = ("batch_size", "step", "trial_id", "effective_learning_rate")
        for i, metric in enumerate(metrics):
            column = frame_names(("batch_size", "trial_id", "step"), [metric], "metric")[metric]
            assert table[column].to_list() == [float(i + 7)] * table.height
            best = curvekit.best(store, curvekit.Selection(_workload(door), metric))
            label = frame_names(own, [metric], "metric")[metric]
            assert best[label].to_list() == [float(i + 7)] * 2


@pytest.mark.parametrize("name", ["train\tloss", "val\x1fx", "val_loss\n", "loss\x00"])
def test_names_are_checked_before_any_renaming(tmp_path: Path, name: str) -> None:
    """docs/security.md, names: control characters are refused in the name as logged, before
    the split-word rename (``train\\tloss`` became ``train/cross_entropy_error``, ``val\\x1fx``
    became ``val/x``)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(
        [["step", name], *([s, v] for s, v in ((0, 0.9), (100, 0.5)))])
    (logs / "run.csv").write_text(out.getvalue())
    (logs / "runs.toml").write_text('[[runs]]\nrun = "run.csv"\nbatch_size = 8\n')
    home = tmp_path / "home"
    with pytest.raises(IngestError) as refused:
        add(logs, name=NAME, manifest=logs / "runs.toml", home=home)
    if "\n" not in name:  # a quoted line break ends the header line: refused unparsed
        assert repr(name) in str(refused.value)
    assert not home.exists()
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([["step", name], [0, 0.9]])
    folder = _folder(tmp_path / "rel", _members(csv_text=out.getvalue()))
    with pytest.raises(CurvekitError, match=r"control character|unreadable CSV header"):
        add(folder, name=NAME, home=home)
    assert not home.exists()


@pytest.mark.parametrize("steps", [[0, 2**53 + 1], [0, 2**63 - 1], [2**53, 2**53 + 1]])
def test_steps_are_exact_int64_on_every_door(tmp_path: Path, steps: list[int]) -> None:
    """docs/security.md, steps: steps are int64 end to end on every door -- the archive, the
    release layout and CSV logs (2**53 + 1 was stored as 2**53; 2**63 - 1 was a traceback)."""
    text = "step,val/classification_error\n" + "".join(f"{s},0.5\n" for s in steps)
    for door, call, home in _doors(tmp_path, _members(csv_text=text)):
        call()
        table = Store.open(home).measurements(_workload(door))
        assert set(table["step"].to_list()) == set(steps), door
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "run.csv").write_text(text)
    (logs / "runs.toml").write_text('[[runs]]\nrun = "run.csv"\nbatch_size = 8\n')
    add(logs, name=NAME, manifest=logs / "runs.toml", home=tmp_path / "csv")
    assert Store.open(tmp_path / "csv").measurements(NAME)["step"].to_list() == steps


@pytest.mark.parametrize("step", ["-5", "9223372036854775808", "1e400", "1.5", "nan"])
def test_steps_outside_int64_are_refused_on_every_door(tmp_path: Path, step: str) -> None:
    """docs/security.md, steps: a step that is negative, fractional, not finite or beyond
    2**63 - 1 is refused naming the file and the value, on every door."""
    text = f"step,val/classification_error\n0,0.9\n{step},0.5\n"
    for _, call, home in _doors(tmp_path, _members(csv_text=text)):
        with pytest.raises(CurvekitError, match="step") as refused:
            call()
        assert "measurements.csv" in str(refused.value) and step in str(refused.value)
        assert not (home / "store").exists()


def test_the_writer_refuses_what_no_door_checked(tmp_path: Path) -> None:
    """docs/security.md, names: the store's writer applies the rules itself, whatever built
    the records (here records made by hand, as a plug-in door would)."""
    from curvekit.records import StudyRecord, TrialRecord
    from curvekit.store.update import WorkloadData, add_workload

    key = StudyKey("mine", "cnn", "sgd", 8)
    study = StudyRecord(key, "d", False, 10, {}, {}, "s.json")

    def data(params: dict[str, Any], table: pa.Table) -> WorkloadData:
        return WorkloadData([study], [TrialRecord(key, 1, "COMPLETE", 10, params, "t.json")],
                            {(key, 1): table})

    good = pa.table({"step": [0, 10], "loss": [1.0, 0.5]})
    for params, table, needle in [
            ({"lr": float("nan")}, good, "'lr' = nan is not a finite number"),
            ({}, pa.table({"step": [-1, 10], "loss": [1.0, 0.5]}), "negative"),
            ({"a\ufeffb": 1.0}, good, "byte-order mark"),
            ({"lr": "x"}, pa.table({"step": [0.0, 10.0], "loss": [1.0, 0.5]}), "integers")]:
        with pytest.raises(StoreError, match=needle):
            add_workload(tmp_path / "home", data(params, table))
    assert not (tmp_path / "home" / "store").exists()
    # names are data: what was refused while names were columns is stored as given
    kept = {"Momentum": 0.9, "momentum": 0.8, "optimizer": "a", "param_optimizer": "b",
            "loss": 1.0, "É": 1.0, "é": 2.0}
    add_workload(tmp_path / "home", data(kept, pa.table({"step": [0, 10], "loss": [1.0, 0.5],
                                                         "Batch_Size": [1.0, 0.5]})))
    store = Store.open(tmp_path / "home")
    assert store.trial_parameters("mine/cnn/sgd", 8, 1) == kept
    assert store.metrics("mine/cnn/sgd") == ["Batch_Size", "loss"]


def test_names_of_two_workloads_of_one_store_are_kept_apart(tmp_path: Path) -> None:
    """docs/security.md, names are data: a metric of an added workload that differs only in
    case from one the store holds (another workload's) is its own, in its own workload."""
    text = f"step,{METRIC},grad_norm\n0,0.9,1\n100,0.5,2\n"
    archive = write_archive(tmp_path / "a.tar.bz2", _members(csv_text=text))
    convert(archive, tmp_path / "home")
    folder = _folder(tmp_path / "rel", _members(csv_text=text.replace("grad_norm", "Grad_Norm")))
    add(folder, name=NAME, home=tmp_path / "home")
    store = Store.open(tmp_path / "home")
    assert "grad_norm" in store.metrics(RELEASE) and "Grad_Norm" in store.metrics(NAME)


def test_an_archive_name_too_long_for_a_folder_is_refused_not_a_traceback(
        tmp_path: Path) -> None:
    """docs/security.md, archives: a member name whose workload part exceeds the file
    system's 255 bytes per folder is refused with an Error: line (it was ENAMETOOLONG)."""
    members = {k.replace("/fc_1024/", "/" + "m" * 300 + "/"): v
               for k, v in small_members().items()}
    archive = write_archive(tmp_path / "long.tar.bz2", members)
    with pytest.raises(ArchiveError, match=r"more than the 255 bytes file systems allow"):
        convert(archive, tmp_path / "home")
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    result = CliRunner().invoke(main, ["fetch", "--archive", str(archive), "--sha256", sha,
                                       "--quiet", "--home", str(tmp_path / "home")])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("Error: ") and "255 bytes" in result.output
    assert not (tmp_path / "home" / "store").exists()


def test_any_os_error_while_converting_is_an_error_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/security.md, the store: any OSError while the store changes (here EIO writing a
    file) is a StoreError naming the file, and the store is left as it was."""
    import curvekit.store.writer as writer

    archive = write_archive(tmp_path / "a.tar.bz2", small_members())
    convert(archive, tmp_path / "home")
    before = snapshot(tmp_path / "home")

    def broken(table: Any, path: Path, **_: Any) -> None:
        raise OSError(errno.EIO, "Input/output error", str(path))

    monkeypatch.setattr(writer.pq, "write_table", broken)
    with pytest.raises(StoreError, match=r"converting a\.tar\.bz2 failed: Input/output error "
                       r"\('.*part-0\.parquet'\); the current store was left as it was"):
        convert(archive, tmp_path / "home")
    assert snapshot(tmp_path / "home") == before


# ---------------------------------------------------------------------- item: misreadings
def _csv_logs(folder: Path, manifest: str, suffix: str = ".toml") -> Path:
    write_plain(folder / "a.csv", 8, 0)
    write_plain(folder / "b.csv", 16, 0)
    (folder / f"runs{suffix}").write_text(manifest)
    return folder / f"runs{suffix}"


RUNS_TOML = '[[runs]]\nrun = "a.csv"\nbatch_size = 8\n[[runs]]\nrun = "b.csv"\nbatch_size = 16\n'


@pytest.mark.parametrize("value", ['"false"', '"true"', "0", "1"])
def test_early_stopping_is_true_or_false(tmp_path: Path, value: str) -> None:
    """docs/security.md, misreadings: ``early_stopping = "false"`` was stored as true; a flag
    that is not true or false is refused, in a run manifest and in the archive's study.json."""
    path = _csv_logs(tmp_path / "logs", f"[workload]\nearly_stopping = {value}\n" + RUNS_TOML)
    with pytest.raises(IngestError, match=r"\[workload\]\.early_stopping: .* not true or false"):
        add(path.parent, name=NAME, manifest=path, home=tmp_path / "home")
    members = _members(study={"early_stopping": json.loads(value)})
    for _, call, home in _doors(tmp_path / "archive", members):
        with pytest.raises(CurvekitError, match=r"early_stopping.* not true or false"):
            call()
        assert not (home / "store").exists()
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_metaparameters_are_refused_on_every_path(tmp_path: Path,
                                                            value: str) -> None:
    """docs/security.md, misreadings: NaN and infinite metaparameters are refused from run
    manifests (TOML, JSON), MLflow params, Hugging Face trial_params and the archive alike."""
    needle = rf"= {'-' if value == '-inf' else ''}{value.strip('-')} is not a finite number"
    home = tmp_path / "home"
    toml = _csv_logs(tmp_path / "toml", RUNS_TOML.replace(
        "batch_size = 8\n", f"batch_size = 8\nparameters = {{ lr = {value} }}\n"))
    js = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[value]
    runs = json.dumps({"runs": [{"run": "a.csv", "batch_size": 8, "parameters": {"lr": 1}},
                                {"run": "b.csv", "batch_size": 16}]}).replace(": 1}", f": {js}}}")
    jsn = _csv_logs(tmp_path / "json", runs, ".json")
    for manifest in (toml, jsn):
        with pytest.raises(IngestError, match=needle):
            add(manifest.parent, name=NAME, manifest=manifest, home=home)
    run = tmp_path / "mlruns" / "1" / "r1"
    (run / "metrics").mkdir(parents=True)
    (run.parent / "meta.yaml").write_text("experiment_id: '1'\nname: x\n")
    (run / "meta.yaml").write_text("run_id: r1\nlifecycle_stage: active\n")
    (run / "params").mkdir()
    (run / "params" / "batch_size").write_text("8")
    (run / "params" / "lr").write_text(value)
    (run / "metrics" / "val_loss").write_text("1 2.0 0\n2 1.0 10\n")
    with pytest.raises(IngestError, match=needle):
        add(tmp_path / "mlruns", name=NAME, home=home)
    out = tmp_path / "hf" / "bs8"
    out.mkdir(parents=True)
    (out / "trainer_state.json").write_text(
        '{"global_step": 10, "max_steps": 10, "train_batch_size": 8, "trial_params": '
        f'{{"lr": {js}}}, "log_history": [{{"step": 10, "eval_loss": 1.0}}]}}')
    with pytest.raises(IngestError, match=needle):
        add(tmp_path / "hf", name=NAME, home=home)
    for _, call, door_home in _doors(tmp_path / "archive", _members({"lr": float(value)})):
        with pytest.raises(CurvekitError, match=needle):
            call()
        assert not (door_home / "store").exists()
    assert not home.exists()


def test_a_header_only_measurements_file_reads_alike_whatever_its_batch(tmp_path: Path) -> None:
    """docs/security.md, archives: a header-only measurements.csv is a trial without rows,
    also when another file of its batch holds a quote (it was refused then: 'Empty CSV')."""
    key = StudyKey("mnist", "fc_1024", "sgd", 8)
    for quoted in (False, True):
        out: list[pa.Table] = []
        batcher = CsvBatcher(lambda _, table, out=out: out.append(table))  # type: ignore[misc]
        cell = '"0.5"' if quoted else "0.5"
        batcher.add(CsvRecord(key, 1, f"step,{METRIC}\n0,{cell}\n".encode(), "1.csv"))
        batcher.add(CsvRecord(key, 2, f"step,{METRIC}\n".encode(), "2.csv"))
        batcher.close()
        assert batcher.rows == {(key, 1): 1, (key, 2): 0}, quoted
        assert sum(t.num_rows for t in out) == 1
    members = small_members()
    members[f"{ROOT}/{RELEASE}/8/1/measurements.csv"] = f'step,{METRIC}\n0,"0.9"\n'.encode()
    members[f"{ROOT}/{RELEASE}/8/2/measurements.csv"] = f"step,{METRIC}\n".encode()
    convert(write_archive(tmp_path / "a.tar.bz2", members), tmp_path / "home")
    counts = Store.open(tmp_path / "home").trials(RELEASE, batch_size=8)["n_measurements"]
    assert counts.to_list() == [1, 0]


def test_json_output_writes_null_for_nan_and_infinity(tmp_path: Path) -> None:
    """docs/security.md, output: ``--format json`` (best, query) and the library's export
    write null where a value is NaN or infinite: ``NaN`` and ``Infinity`` are not JSON."""
    members = small_members()
    members[f"{ROOT}/{RELEASE}/8/1/measurements.csv"] = \
        f"step,{METRIC},loss\n0,0.9,nan\n100,0.5,inf\n200,0.25,-inf\n".encode()
    convert(write_archive(tmp_path / "a.tar.bz2", members), tmp_path / "home")

    def strict(text: str) -> Any:
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))

    runner = CliRunner()
    # (best never answers with a value that is not finite: only finite values are results)
    for args in (["query", "select step, value as loss from measurements where metric = 'loss' "
                  "and value is not null order by step"],):
        result = runner.invoke(main, [*args, "--format", "json", "--home",
                                      str(tmp_path / "home")])
        assert result.exit_code == 0, result.output
        rows = strict(result.stdout)
        assert rows and any(r["loss"] is None for r in rows)
    out = io.BytesIO()
    from curvekit.store.export import export
    export(Store.open(tmp_path / "home"), "select 'NaN'::double as x, [1.0, 'inf'::double] "
           "as y", out, "json")
    assert strict(out.getvalue().decode()) == [{"x": None, "y": [1.0, None]}]


def test_every_json_curvekit_writes_goes_through_one_writer() -> None:
    """docs/security.md, output: one JSON writer (``curvekit.structured.dumps``); no module
    calls ``json.dumps`` or ``json.dump`` itself."""
    import ast

    package = Path(curvekit.__file__).parent
    found = []
    for path in package.rglob("*.py"):
        if path.name == "structured.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("dumps", "dump") and \
                    isinstance(node.value, ast.Name) and node.value.id == "json":
                found.append(f"{path.relative_to(package)}:{node.lineno}")
    assert found == []
    assert structured.dumps([math.nan, {"a": -math.inf}, 1.5]) == '[null, {"a": null}, 1.5]'


# ---------------------------------------------------------------------- item: run options
@pytest.mark.parametrize(("option", "value"), [
    ("steps", 2**63), ("steps", 10**9 + 1), ("steps", 0), ("trials", 10**6),
    ("eval_every", 2**63), ("seed", -1), ("seed", 2**64), ("batch_sizes", [2**63]),
    ("batch_sizes", [8.5]), ("steps", {8: 2**63}), ("noise_micro_batches", 2**40)])
def test_every_integer_option_of_a_sweep_is_bounded(option: str, value: Any) -> None:
    """docs/security.md, runner: steps and every integer option are bounded (``--steps 2**63``
    was accepted and trained until killed)."""
    options: dict[str, Any] = {"batch_sizes": [8], "trials": 1, "steps": 10, "eval_every": 5}
    options[option] = value
    with pytest.raises(RunError, match=r"give a whole number from"):
        Sweep.create("mine", dataset="digits", model="fc_8", optimizers=["sgd"], **options)


@pytest.mark.parametrize(("n", "seed"), [(10**6, 0), (0, 0), (10, -1), (10, 2**64)])
def test_bootstrap_resamples_and_seed_are_bounded(n: int, seed: int) -> None:
    """docs/security.md, runner: fit's bootstrap takes 1 ... 100,000 resamples and a seed from
    0 to 2**63 - 1 (a negative seed was a numpy traceback)."""
    from curvekit.errors import FitError
    from curvekit.scaling import bootstrap

    with pytest.raises(FitError, match=r"give a whole number from"):
        bootstrap({8: [100.0], 16: [60.0], 32: [40.0]}, n=n, seed=seed)


def test_run_refuses_unbounded_options_before_anything_trains(tmp_path: Path) -> None:
    """docs/security.md, runner: ``curvekit run --steps 2**63`` is an Error: line, and no
    work folder is made; the CLI's integer options carry the same bounds."""
    pytest.importorskip("torch")
    runner = CliRunner()
    home = tmp_path / "home"
    result = runner.invoke(main, ["run", "mine", "--steps", str(2**63), "--home", str(home),
                                  "--quiet", "--device", "cpu"])
    assert result.exit_code == 1 and result.output.startswith("Error: steps "), result.output
    for args in (["--seed", "-1"], ["--trials-per-study", str(10**6)],
                 ["--eval-every", str(2**63)], ["--workers", "100000"]):
        result = runner.invoke(main, ["run", "mine", *args, "--home", str(home)])
        assert result.exit_code == 2 and "range" in result.output, (args, result.output)
    assert not home.exists()
    with pytest.raises(RunError, match="workers 100000 is more than 1024"):
        curvekit.run("mine", workers=100_000, home=home, device="cpu")
    assert not (home / "runs").exists()


# ---------------------------------------------------------------------- item: structured files
DEEP = 100_000


@pytest.mark.parametrize("suffix, text", [
    (".json", '{"runs": ' + "[" * DEEP + "]" * DEEP + "}"),
    (".toml", "x = " + "[" * DEEP + "]" * DEEP + "\n"),
    (".yaml", "x: " + "[" * DEEP + "]" * DEEP + "\n"),
    (".json", '{"a": ' + "[" * 65 + "]" * 65 + "}"),
])
def test_deeply_nested_run_manifests_are_refused(tmp_path: Path, suffix: str,
                                                 text: str) -> None:
    """docs/security.md, structured files: a run manifest nested deeper than 64 levels (here
    100,000: a RecursionError traceback before) is an Error: line."""
    path = tmp_path / f"runs{suffix}"
    path.write_text(text)
    with pytest.raises(IngestError, match="nested too deeply"):
        add(tmp_path, name=NAME, manifest=path, home=tmp_path / "home")
    result = CliRunner().invoke(main, ["add", str(tmp_path), "--name", NAME, "--run-manifest",
                                       str(path), "--home", str(tmp_path / "home")])
    assert result.exit_code == 1 and "nested too deeply" in result.output, result.output
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("where", ["parameters", "parameter_configs"])
@pytest.mark.parametrize("value", ["1979-05-27", "1979-05-27T07:32:00Z", "07:32:00"])
def test_toml_dates_in_a_run_manifest_are_refused(tmp_path: Path, where: str,
                                                  value: str) -> None:
    """docs/security.md, structured files: a TOML date or time (which JSON cannot hold) in a
    run manifest's parameters or [parameter_configs] is an Error: line, not a traceback."""
    text = RUNS_TOML.replace("batch_size = 8\n", f"batch_size = 8\nparameters = {{ when = "
                             f"{value} }}\n") if where == "parameters" else \
        f"[parameter_configs.when]\nmin_value = {value}\n" + RUNS_TOML
    path = _csv_logs(tmp_path / "logs", text)
    result = CliRunner().invoke(main, ["add", str(path.parent), "--name", NAME,
                                       "--run-manifest", str(path),
                                       "--home", str(tmp_path / "home")])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("Error: ") and "date or time" in result.output
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("text, needle", [
    ("[" * DEEP + "]" * DEEP, "nested too deeply"),
    ('[{"learning_rate": {}}]', "expected a table"),
    ("3", "expected a table"),
    ('"learning_rate"', "expected a table"),
])
def test_a_space_or_plan_of_the_wrong_shape_is_an_error_line(tmp_path: Path, text: str,
                                                            needle: str) -> None:
    """docs/security.md, structured files: ``--space`` and a work folder's ``plan.json``
    nested 100,000 deep or holding a list (any top level but an object) are Error: lines."""
    pytest.importorskip("torch")
    space = tmp_path / "space.json"
    space.write_text(text)
    runner = CliRunner()
    result = runner.invoke(main, ["run", "mine", "--space", str(space),
                                  "--home", str(tmp_path / "home"), "--quiet"])
    assert result.exit_code == 1 and result.output.startswith("Error: "), result.output
    assert needle in result.output
    work = tmp_path / "work"
    work.mkdir()
    (work / "plan.json").write_text(text)
    result = runner.invoke(main, ["run", "mine", "--work-dir", str(work), "--trials-per-study",
                                  "1", "--steps", "2", "--batch-sizes", "8", "--device", "cpu",
                                  "--home", str(tmp_path / "home"), "--quiet"])
    assert result.exit_code == 1 and result.output.startswith("Error: "), result.output
    assert needle in result.output or "not a curvekit sweep plan" in result.output
    with pytest.raises(RunError, match="a search space is a mapping"):
        Sweep.create("mine", dataset="digits", model="fc_8", optimizers=["sgd"],
                     batch_sizes=[8], trials=1, steps=10, eval_every=5,
                     space=[{"learning_rate": {}}])  # type: ignore[arg-type]


def test_the_one_loader_refuses_what_json_cannot_hold() -> None:
    """docs/security.md, structured files: the one loader refuses nesting, dates, bytes and a
    wrong top level for every kind of file, naming where."""
    def fail(message: str, line: int | None) -> IngestError:
        return IngestError(message, line=line)

    for text, kind, needle in [
            ("a: !!binary aGVsbG8=\n", "yaml", "a is bytes"),
            ("a: 2001-12-14\n", "yaml", "date or time"),
            ("a = 1979-05-27\n", "toml", "date or time"),
            ("- 1\n", "yaml", "expected a table"),
            ("{1.5: x}", "yaml", "the key 1.5"),
            ("a: !!set {x: null}\n", "yaml", "a is set"),
            ('{"a": 1', "json", "malformed JSON")]:
        with pytest.raises(IngestError, match=needle):
            structured.loads(text, kind, where="f", error=fail)


@pytest.mark.parametrize("text, needle", [
    ("[" * DEEP + "]" * DEEP, "nested too deeply"), ("[1, 2]", "expected a table")])
def test_every_structured_file_goes_through_the_one_loader(tmp_path: Path, text: str,
                                                           needle: str) -> None:
    """docs/security.md, structured files: a data manifest (``fetch --manifest``), AlgoPerf's
    hparams.json, a Trainer's trainer_state.json and Lightning's hparams.yaml nested 100,000
    deep or of the wrong top-level type are refused by the one loader, naming the file."""
    from curvekit.errors import ManifestError
    from curvekit.ingest import algoperf, hf
    from curvekit.ingest.files import SourceFiles
    from curvekit.ingest.yamlish import read_flat_yaml
    from curvekit.release.manifest import Manifest

    path = tmp_path / "file.json"
    path.write_text(text)
    with pytest.raises(ManifestError, match=needle):
        Manifest.from_file(path)
    files = SourceFiles.of(tmp_path)
    for read in (lambda p: algoperf._hparams(p, files), lambda p: hf._load(p, files),
                 lambda p: read_flat_yaml(p, files=files)):
        with pytest.raises(IngestError, match=needle) as refused:
            read(path)
        assert str(path) in str(refused.value)
    result = CliRunner().invoke(main, ["fetch", "--archive", str(tmp_path / "a.tar.bz2"),
                                       "--manifest", str(path), "--home", str(tmp_path / "h")])
    assert result.exit_code == 1 and result.output.startswith("Error: "), result.output
    assert needle in result.output


# ---------------------------------------------------------------------- properties
PROPERTY = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
TEXT = st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=16)
# names of every kind, the store's own columns in any case, and param_ beside plain names
SPECIAL = [*sorted(RESERVED), "param_x", "x", "param_step", "learning_rate", "LEARNING_RATE",
           "momentum", "val/err", "VAL/ERR", "epoch", "_step", "1-x"]
NAMES = st.one_of(
    st.sampled_from(SPECIAL),
    st.sampled_from(SPECIAL).map(lambda n: "".join(
        c.upper() if i % 2 else c for i, c in enumerate(n))),
    st.sampled_from(SPECIAL).map(lambda n: "param_" + n),
    TEXT)


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp())
    yield folder
    shutil.rmtree(folder)


def _fresh(root: Path) -> Path:
    folder = Path(tempfile.mkdtemp(dir=root))
    return folder


@pytest.mark.slow
@PROPERTY
@given(a=NAMES, b=NAMES)
def test_any_metaparameter_names_round_trip_or_are_refused(scratch: Path, a: str,
                                                          b: str) -> None:
    """Property: through the release layout (add) and the archive (fetch), any two
    metaparameter names -- any case, the store's own column names, param_x beside x -- are
    stored exactly (under their column) with ``best`` unchanged, or refused naming one."""
    params = {a: 1.5, b: 2.5, "learning_rate": 0.1}
    tmp = _fresh(scratch)
    try:
        for door, call, home in _doors(tmp, _members(params)):
            if _refused_or(call, home, list(params)) is None:
                continue
            workload = _workload(door)
            trials = _trials(home, workload)
            for name, value in params.items():
                assert set(trials[parameter_column(name)]) == {value}, (door, name)
            best = curvekit.best(Store.open(home), curvekit.Selection(workload, METRIC))
            effective = 0.1 / (1 - params.get("momentum", 0))  # the paper's definition
            assert best["effective_learning_rate"].to_list() == [pytest.approx(effective)] * 2
            assert best["step"].to_list() == [200, 200]
    finally:
        shutil.rmtree(tmp)


def _plain_name(name: str) -> bool:
    """A name a CSV file can hold: UTF-8 has no lone surrogate, so no file spells one."""
    return (name == name.strip() and not name.startswith("1-") and name != "step"
            and not any("\ud800" <= c <= "\udfff" for c in name))


@PROPERTY
@given(metric=NAMES.filter(_plain_name))
def test_any_metric_name_of_a_csv_log_round_trips_or_is_refused(scratch: Path,
                                                               metric: str) -> None:
    """Property: a CSV log's metric column, mapped to itself (``--map NAME=NAME``), is stored
    under exactly its name, or the import is refused naming it -- never dropped or renamed."""
    tmp = _fresh(scratch)
    try:
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(
            [["step", metric], [0, 0.75], [100, 0.5]])
        (tmp / "run.csv").write_text(out.getvalue())
        (tmp / "runs.toml").write_text('[[runs]]\nrun = "run.csv"\nbatch_size = 8\n')
        home = tmp / "home"
        result = _refused_or(lambda: add(tmp, name=NAME, manifest=tmp / "runs.toml",
                                         home=home, metric_map={metric: metric}),
                             home, [metric] if "\n" not in metric and "\r" not in metric
                             else [metric, "line 1", "header"])
        if result is None:
            return
        table = Store.open(home).measurements(NAME)
        assert table.columns[:3] == ["batch_size", "trial_id", "step"]
        column = frame_names(table.columns[:3], [metric], "metric")[metric]
        assert table[column].to_list() == [0.75, 0.5]
    finally:
        shutil.rmtree(tmp)


@pytest.mark.slow
@PROPERTY
@given(parameter=NAMES)
def test_any_manifest_parameter_name_round_trips_or_is_refused(scratch: Path,
                                                               parameter: str) -> None:
    """Property: a run manifest's metaparameter name is stored exactly (under its column) or
    refused naming it; ``best`` keeps its own columns."""
    tmp = _fresh(scratch)
    try:
        write_plain(tmp / "a.csv", 8, 0)
        (tmp / "runs.json").write_text(json.dumps({"runs": [
            {"run": "a.csv", "batch_size": 8, "parameters": {parameter: 3, "learning_rate": 0.1}}
        ]}))
        home = tmp / "home"
        if _refused_or(lambda: add(tmp, name=NAME, manifest=tmp / "runs.json", home=home),
                       home, [parameter]) is None:
            return
        trials = _trials(home, NAME)
        expected = 0.1 if parameter == "learning_rate" else 3
        column = parameter_column("learning_rate" if parameter == "lr" else parameter)
        assert trials[column] == [expected]
        best = curvekit.best(Store.open(home), curvekit.Selection(NAME, METRIC))
        effective = 0.1 / (1 - 3) if parameter == "momentum" else 0.1  # lr / (1 - momentum)
        assert best["effective_learning_rate"].to_list() == [pytest.approx(effective)]
    finally:
        shutil.rmtree(tmp)


@PROPERTY
@given(name=NAMES)
def test_any_search_space_name_is_known_or_refused(name: str) -> None:
    """Property: the runner's plan takes a metaparameter name it knows, or refuses naming it."""
    space = {"learning_rate": {"type": "DOUBLE", "min_value": 0.01, "max_value": 1.0,
                               "scale": "LOG_SCALE"},
             name: {"type": "DISCRETE", "feasible_points": [1], "scale": ""}}
    try:
        sweep = Sweep.create("mine", dataset="digits", model="fc_8", optimizers=["sgd"],
                             batch_sizes=[8], trials=1, steps=10, eval_every=5, space=space)
    except RunError as exc:
        assert repr(name) in str(exc) or name == "momentum", str(exc)
        return
    assert set(sweep.spaces["sgd"][8]) == set(space)


STEPS = st.one_of(st.integers(-(2**64), 2**64), st.integers(2**53 - 2, 2**53 + 2),
                  st.integers(2**63 - 3, 2**63 + 2), st.integers(-2, 2))


@pytest.mark.slow
@PROPERTY
@given(steps=st.lists(STEPS, min_size=1, max_size=3, unique=True).map(sorted))
def test_any_step_is_exact_int64_or_refused(scratch: Path, steps: list[int]) -> None:
    """Property: steps from 0 to 2**63 - 1 are stored exactly on every door (archive,
    release layout, CSV log); anything else is refused naming the step."""
    text = "step,val/classification_error\n" + "".join(f"{s},0.5\n" for s in steps)
    ok = all(0 <= s <= 2**63 - 1 for s in steps)
    tmp = _fresh(scratch)
    try:
        (tmp / "logs").mkdir()
        (tmp / "logs" / "run.csv").write_text(text)
        (tmp / "logs" / "runs.toml").write_text('[[runs]]\nrun = "run.csv"\nbatch_size = 8\n')
        doors = [*_doors(tmp, _members(csv_text=text)),
                 ("csv", lambda: add(tmp / "logs", name=NAME, manifest=tmp / "logs/runs.toml",
                                     home=tmp / "csv"), tmp / "csv")]
        for door, call, home in doors:
            bad = [str(s) for s in steps if not 0 <= s <= 2**63 - 1]
            try:
                call()
            except CurvekitError as exc:
                assert not ok and any(b in str(exc) for b in bad), (door, str(exc))
                assert not (home / "store").exists()
                continue
            assert ok, door
            table = Store.open(home).measurements(NAME if door == "csv" else _workload(door))
            assert set(table["step"].to_list()) == set(steps), door
            assert table.schema["step"] == pl.Int64
    finally:
        shutil.rmtree(tmp)


def test_study_json_fields_follow_the_one_value_rule(tmp_path: Path) -> None:
    """docs/security.md, archives: study.json's parameter_configs follow the value rule of
    every door (a NaN bound is refused on the archive and the release layout alike)."""
    members = small_members()
    for name in members:
        if name.endswith("study.json"):
            study = json.loads(members[name])
            study["parameter_configs"]["learning_rate"]["min_value"] = float("nan")
            members[name] = json.dumps(study).encode()
    for _, call, home in _doors(tmp_path, members):
        with pytest.raises(CurvekitError, match=r"'parameter_configs\.learning_rate\.min_value' "
                           r"= nan is not a finite number"):
            call()
        assert not (home / "store").exists()

