"""curvekit add at the edges of its input: exact int64 steps, names that used to clash when
they were columns (now kept apart, exactly), a byte-order mark, numbers too large for their
type, and headers of a million columns. Each case is refused with a message that names the
file and the value (and the store stays as it was), or imported exactly."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import curvekit
from curvekit.cli import main
from curvekit.errors import IngestError, StoreError
from curvekit.ingest import csvlogs
from curvekit.ingest.add import BATCH_SIZE_PARAMS, PARAM_ALIASES, add, build
from curvekit.ingest.runs import INT64_MAX, MAX_COLUMNS, IngestWarning
from curvekit.ingest.tensorboard import record
from curvekit.store.store import Store
from curvekit.store.update import WorkloadData, add_workload, validate
from tests.conftest import snapshot
from tests.logfiles import manifest_toml, write_plain

NAME = "my_data/edge/sgd"
BIG = 2**53 + 1  # the first integer a float64 cannot hold


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home that holds one workload, so that 'unchanged' means something; never written
    by a test that succeeds."""
    root = tmp_path_factory.mktemp("edge")
    logs = root / "other"
    for bs in (32, 64):
        write_plain(logs / f"bs{bs}.csv", bs, 0)
    (logs / "m.toml").write_text(manifest_toml([("bs32.csv", 32, {}), ("bs64.csv", 64, {})]))
    add(logs, name="other/mlp/sgd", manifest=logs / "m.toml", home=root / "home")
    return root / "home"


def _logs(folder: Path, text: str | bytes, *, params: str = "", name: str = "run.csv",
          batch_size: int = 32) -> Path:
    """One CSV run and a manifest giving its batch size (and ``params``, TOML inline)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(text.encode() if isinstance(text, str) else text)
    (folder / "runs.toml").write_text(
        f'[[runs]]\nrun = "{name}"\nbatch_size = {batch_size}\n'
        + (f"parameters = {{ {params} }}\n" if params else ""))
    return folder


def _build(folder: Path, **kwargs: object) -> WorkloadData:
    return build(folder, name=NAME, manifest=folder / "runs.toml", **kwargs)  # type: ignore[arg-type]


def _refused(folder: Path, home: Path, match: str, **kwargs: object) -> str:
    """Import ``folder`` into ``home``, expect an IngestError matching ``match``, and check
    that the store did not change; returns the message."""
    before = snapshot(home)
    with pytest.raises(IngestError, match=match) as info:
        add(folder, name=NAME, manifest=folder / "runs.toml", home=home, **kwargs)  # type: ignore[arg-type]
    assert snapshot(home) == before
    return str(info.value)


def _steps(data: WorkloadData) -> list[int]:
    (table,) = data.measurements.values()
    return [int(s) for s in table.column("step").to_pylist()]


# ---------------------------------------------------------------------- wide headers
def test_a_million_columns_are_refused_from_the_header_alone(tmp_path: Path,
                                                             home: Path) -> None:
    n = 10**6
    header = "step," + ",".join(f"m{i}" for i in range(n))
    logs = _logs(tmp_path / "logs", header + "\n0," + ",".join("1" for _ in range(n)) + "\n")
    # CPU time, not the clock: other work on a busy machine does not lengthen it.
    start = time.process_time()
    message = _refused(logs, home, r"run\.csv, line 1: the header has at least 5\d\d,\d{3} "
                       r"columns; curvekit reads at most 10,000 per log")
    assert time.process_time() - start < 2.0, message


def test_the_column_limit_is_exact_and_headers_parse_in_linear_time(tmp_path: Path) -> None:
    names = [f"val/metric_{i}" for i in range(MAX_COLUMNS)]
    # CPU time, not the clock: other work on a busy machine does not lengthen it.
    start = time.process_time()
    assert csvlogs._header(",".join(names).encode(), "x.csv") == names
    assert time.process_time() - start < 1.0  # 100 s when repeats were counted per name
    with pytest.raises(IngestError, match=r"x\.csv, line 1: the header has 10,001 columns"):
        csvlogs._header(",".join([*names, "one_more"]).encode(), "x.csv")
    with pytest.raises(IngestError, match=r"repeated column names \['a'\]"):
        csvlogs._header(b"step,a,b,a", "x.csv")


def test_a_wide_log_imports(tmp_path: Path) -> None:
    names = [f"val/metric_{i}" for i in range(2000)]
    logs = _logs(tmp_path / "logs", "step," + ",".join(names) + "\n0,"
                 + ",".join(str(i) for i in range(2000)) + "\n")
    result = add(logs, name=NAME, manifest=logs / "runs.toml", home=tmp_path / "home")
    assert result.measurements == 1
    assert set(names) <= set(Store.open(tmp_path / "home").metrics(NAME))


def test_a_wide_parquet_history_is_refused_from_its_footer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("curvekit.ingest.wandb.MAX_COLUMNS", 50)  # 10,000 is slow to write
    monkeypatch.setattr(pq, "read_table", None)  # the footer alone decides
    folder = tmp_path / "wandb"
    folder.mkdir()
    table = pa.table({"_step": [0], **{f"m{i}": [1.0] for i in range(51)}})
    pq.write_table(table, folder / "run.parquet")
    with pytest.raises(IngestError, match=r"run\.parquet: the history has 52 columns; curvekit "
                       r"reads at most 50 per log"):
        build(folder, name=NAME, format="wandb")


# ---------------------------------------------------------------------- exact steps
def test_steps_beyond_float_precision_are_stored_exactly(tmp_path: Path) -> None:
    steps = [0, BIG, 2**62 + 1, INT64_MAX]
    logs = _logs(tmp_path / "logs", "step,val/error\n" + "".join(f"{s},0.5\n" for s in steps))
    add(logs, name=NAME, manifest=logs / "runs.toml", home=tmp_path / "home")
    store = Store.open(tmp_path / "home")
    rows = store.sql("select step from measurements where model = 'edge' order by step").rows()
    assert [r[0] for r in rows] == steps
    trials = store.sql("select steps from trials where model = 'edge'").rows()
    assert trials == [(INT64_MAX,)]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, INT64_MAX), min_size=1, max_size=8, unique=True))
def test_any_int64_step_is_kept_exactly(tmp_path: Path, steps: list[int]) -> None:
    steps.sort()
    logs = _logs(tmp_path / f"logs{steps[-1]}",
                 "step,val/error\n" + "".join(f"{s},0.25\n" for s in steps))
    data = _build(logs)
    assert _steps(data) == steps
    (rows,) = validate(data).values()  # the evaluations the store writes
    assert rows.step.type == pa.int64()
    assert rows.step.to_pylist() == steps


def test_integral_spellings_of_steps_are_accepted(tmp_path: Path) -> None:
    logs = _logs(tmp_path / "logs", "step,val/error\n1.0,0.5\n2e3,0.4\n 3000 ,0.3\n")
    assert _steps(_build(logs)) == [1, 2000, 3000]


@pytest.mark.parametrize(("cell", "problem"), [
    ("1.5", "step 1.5 is not a non-negative integer"),
    ("nan", "step nan is not a non-negative integer"),
    ("inf", "step inf is not a non-negative integer"),
    ("1e400", r"step 1e400 is beyond 2\*\*63 - 1 = 9223372036854775807"),
    ("9223372036854775808", r"step 9223372036854775808 is beyond 2\*\*63 - 1"),
    ("-5", "step -5 is not a non-negative integer"),
    ("ten", "step 'ten' is not a non-negative integer"),
])
def test_a_step_that_is_no_int64_is_refused(tmp_path: Path, home: Path, cell: str,
                                            problem: str) -> None:
    logs = _logs(tmp_path / "logs", f"step,val/error\n0,0.5\n{cell},0.4\n")
    _refused(logs, home, rf"run\.csv, line 3: {problem}")


def test_epochs_that_overflow_int64_as_steps_are_refused(tmp_path: Path) -> None:
    logs = _logs(tmp_path / "logs", f"epoch,val_loss\n0,2.0\n{2**62},1.0\n")
    (logs / "runs.toml").write_text('[workload]\nsteps_per_epoch = 4\n[[runs]]\n'
                                    'run = "run.csv"\nbatch_size = 32\n')
    with pytest.raises(IngestError, match=r"run\.csv: epoch 4611686018427387904 times 4 steps "
                       r"per epoch is beyond 2\*\*63 - 1"):
        _build(logs)


def test_mlflow_steps_are_exact_and_checked(tmp_path: Path) -> None:
    run = tmp_path / "mlruns" / "1" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run / "params").mkdir()
    (run.parent / "meta.yaml").write_text("experiment_id: '1'\nname: x\n")
    (run / "meta.yaml").write_text("run_id: abc\nlifecycle_stage: active\n")
    (run / "params" / "batch_size").write_text("64")
    metric = run / "metrics" / "val_loss"
    metric.write_text(f"1700000000000 2.3 0\n1700000000100 1.9 {BIG}\n"
                      f"1700000000200 1.7 {INT64_MAX}\n")
    assert _steps(build(tmp_path / "mlruns", name=NAME)) == [0, BIG, INT64_MAX]
    metric.write_text("1700000000000 2.3 0\n1700000000100 1.9 1e400\n")
    with pytest.raises(IngestError, match=r"val_loss, line 2: step 1e400 is beyond 2\*\*63 - 1"):
        build(tmp_path / "mlruns", name=NAME)


def _varint(n: int) -> bytes:
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        out += bytes([low | (0x80 if n else 0)])
        if not n:
            return out


def _tb_event(step: int, tag: str, value: float) -> bytes:
    value_msg = b"\x0a" + _varint(len(tag)) + tag.encode() + b"\x15" + struct.pack("<f", value)
    summary = b"\x0a" + _varint(len(value_msg)) + value_msg
    return (b"\x09" + struct.pack("<d", 1.7e9) + b"\x10" + _varint(step)
            + b"\x2a" + _varint(len(summary)) + summary)


def test_tensorboard_steps_are_exact(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "run"
    run.mkdir(parents=True)
    steps = [0, BIG, INT64_MAX]
    (run / "events.out.tfevents.1.host").write_bytes(
        b"".join(record(_tb_event(s, "val_loss", 0.5)) for s in steps))
    (tmp_path / "logs" / "runs.toml").write_text('[[runs]]\nrun = "run"\nbatch_size = 8\n')
    data = build(tmp_path / "logs", name=NAME, manifest=tmp_path / "logs" / "runs.toml")
    assert _steps(data) == steps


def test_wandb_parquet_steps_are_exact(tmp_path: Path) -> None:
    folder = tmp_path / "wandb"
    folder.mkdir()
    pq.write_table(pa.table({"_step": pa.array([0, BIG, INT64_MAX], pa.int64()),
                             "trainer/global_step": pa.array([1, BIG, INT64_MAX], pa.int64()),
                             "val_loss": [2.0, 1.0, 0.5]}),
                   folder / "run.parquet")
    (folder / "runs.toml").write_text('[[runs]]\nrun = "run"\nbatch_size = 16\n')
    assert _steps(build(folder, name=NAME, manifest=folder / "runs.toml")) == \
        [1, BIG, INT64_MAX]


# ---------------------------------------------------------------------- numbers too large
def test_a_metaparameter_beyond_int64_is_refused(tmp_path: Path, home: Path) -> None:
    logs = _logs(tmp_path / "logs", "step,val/error\n0,0.5\n", params=f"seed = {2**70}")
    _refused(logs, home, r"runs\.toml: runs\[0\]\.parameters: 'seed' "
             r"= 1180591620717411303424 does not fit in a 64-bit integer .* as a float "
             r"\(1\.18059e\+21\) or as a string")


def test_a_metaparameter_in_hparams_yaml_beyond_int64_is_refused(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "version_0").mkdir(parents=True)
    (logs / "version_0" / "metrics.csv").write_text("step,val_loss\n0,2.0\n")
    (logs / "version_0" / "hparams.yaml").write_text(f"batch_size: 32\nseed: {2**64}\n")
    with pytest.raises(IngestError, match=r"metrics\.csv: run 'version_0/metrics\.csv': "
                       r"metaparameter 'seed' = 18446744073709551616"):
        build(logs, name=NAME)


def test_the_store_refuses_an_integer_parameter_beyond_int64(tmp_path: Path) -> None:
    logs = _logs(tmp_path / "logs", "step,val/error\n0,0.5\n")
    data = _build(logs)
    (trial,) = data.trials
    trial.parameters["seed"] = -(2**63) - 1
    with pytest.raises(StoreError, match=r"metaparameter 'seed' = -9223372036854775809 "
                       r"does not fit in a 64-bit integer"):
        add_workload(tmp_path / "home", data)
    assert not (tmp_path / "home" / "store").exists()


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", str(2**70)])
def test_a_step_budget_that_is_no_count_is_refused(tmp_path: Path, value: str) -> None:
    logs = _logs(tmp_path / "logs", "step,val/error\n0,0.5\n")
    manifest = f"[workload]\ntrain_steps = {value}\n[[runs]]\nrun = \"run.csv\"\nbatch_size = 8\n"
    (logs / "runs.toml").write_text(manifest)
    with pytest.raises(IngestError, match=r"runs\.toml: \[workload\]\.train_steps: .* is not an "
                       r"integer >= 0 \(and at most 2\*\*63 - 1\)"):
        _build(logs)
    (logs / "version_0").mkdir()
    (logs / "version_0" / "metrics.csv").write_text("step,val_loss\n0,2.0\n")
    yaml = {"nan": ".nan", "inf": ".inf", "1e400": "1.0e+400"}.get(value, value)
    (logs / "version_0" / "hparams.yaml").write_text(f"batch_size: 32\nmax_steps: {yaml}\n")
    (logs / "run.csv").unlink()
    (logs / "runs.toml").unlink()
    with pytest.raises(IngestError, match=r"run 'version_0/metrics\.csv': (its max_steps "
                       r"parameter .* is not a step count|metaparameter 'max_steps' "
                       r"(= 1180591620717411303424 does not fit|= (nan|inf) is not a finite))"):
        build(logs, name=NAME)


def test_a_metric_overflowing_to_infinity_warns_once_per_file(tmp_path: Path) -> None:
    text = "step,val_loss,val/error\n0,1e400,inf\n1,2e999,0.5\n2,-1e500,-inf\n"
    logs = _logs(tmp_path / "logs", text)
    with pytest.warns(IngestWarning) as caught:
        data = _build(logs)
    assert len(caught) == 1
    assert str(caught[0].message).endswith(
        "run.csv: values too large for a 64-bit float were stored as infinity: 3 in column "
        "'val_loss' (e.g. '1e400'); check the log")
    (table,) = data.measurements.values()
    assert table.column("val/loss").to_pylist() == [
        float("inf"), float("inf"), float("-inf")]
    result = CliRunner().invoke(main, ["add", str(logs), "--name", NAME, "--manifest",
                                       str(logs / "runs.toml"), "--home",
                                       str(tmp_path / "home")])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("Warning: ") == 1
    assert "3 in column 'val_loss'" in result.stderr


def test_literal_infinity_is_a_value_and_no_warning(tmp_path: Path) -> None:
    import warnings

    logs = _logs(tmp_path / "logs", "step,val_loss\n0,inf\n1,-Infinity\n2,nan\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", IngestWarning)
        _build(logs)


# ---------------------------------------------------------------------- names are data
@pytest.mark.parametrize("metric", ["batch_size", "model", "optimizer", "base_dir",
                                    "STATUS", "effective_learning_rate", "N_Measurements",
                                    "trial_id", "steps", "value", "metric"])
def test_a_metric_named_like_a_store_column_is_kept(tmp_path: Path, metric: str) -> None:
    """Names are values in the store: a metric named like a column of the store or of an
    answer is stored as written and answered about (its column in the answer is labelled
    ``<name> (metric)`` where the answer has a column of that name already)."""
    logs = _logs(tmp_path / "logs", f"step,{metric}\n0,1.0\n10,0.5\n")
    add(logs, name=NAME, manifest=logs / "runs.toml", home=tmp_path / "home")
    store = Store.open(tmp_path / "home")
    assert store.metrics(NAME) == [metric]
    best = curvekit.best(store, curvekit.Selection(NAME, metric), explain=False)
    label = metric if metric not in ("batch_size", "trial_id", "effective_learning_rate") \
        else f"{metric} (metric)"
    assert best.select("batch_size", "step", label).rows() == [(32, 10, 0.5)]


def test_metrics_differing_only_in_case_are_kept_apart(tmp_path: Path) -> None:
    logs = _logs(tmp_path / "logs", "step,val/Top5,val/top5\n0,0.5,0.6\n")
    add(logs, name=NAME, manifest=logs / "runs.toml", home=tmp_path / "home")
    store = Store.open(tmp_path / "home")
    assert store.metrics(NAME) == ["val/Top5", "val/top5"]
    for metric, value in (("val/Top5", 0.5), ("val/top5", 0.6)):
        best = curvekit.best(store, curvekit.Selection(NAME, metric), explain=False)
        assert best[metric].to_list() == [value]


def test_metrics_differing_in_case_across_runs_are_kept_apart(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_plain(logs / "a.csv", 32, 0, extra=",Top5")
    write_plain(logs / "b.csv", 64, 0, extra=",top5")
    (logs / "runs.toml").write_text(manifest_toml([("a.csv", 32, {}), ("b.csv", 64, {})]))
    data = _build(logs)
    names = {n for t in data.measurements.values() for n in t.column_names}
    assert {"Top5", "top5"} <= names


def test_a_byte_order_mark_starts_a_header_but_nowhere_else(tmp_path: Path, home: Path) -> None:
    logs = _logs(tmp_path / "logs", b"\xef\xbb\xbfstep,val_loss\n0,2.0\n10,1.5\n")
    data = _build(logs)
    assert _steps(data) == [0, 10]
    (table,) = data.measurements.values()
    assert table.column_names == ["step", "val/loss"]
    logs = _logs(tmp_path / "bom", "step,\ufeffval/top5\n0,2.0\n")
    _refused(logs, home, r"run\.csv: metric '\\ufeffval/top5' has a byte-order mark \(U\+FEFF\) "
             r"in its name")


def test_a_parameter_beside_its_prefixed_name_is_kept(tmp_path: Path) -> None:
    logs = _logs(tmp_path / "logs", "step,val/error\n0,0.5\n",
                 params='optimizer = "adam", param_optimizer = "sgd"')
    (trial,) = _build(logs).trials
    assert trial.parameters == {"optimizer": "adam", "param_optimizer": "sgd"}


def test_parameters_differing_only_in_case_are_kept_apart(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_plain(logs / "a.csv", 32, 0)
    write_plain(logs / "b.csv", 64, 0)
    (logs / "runs.toml").write_text(manifest_toml([("a.csv", 32, {"Momentum": 0.9}),
                                                   ("b.csv", 64, {"momentum": 0.8})]))
    assert [t.parameters for t in _build(logs).trials] == [{"Momentum": 0.9},
                                                           {"momentum": 0.8}]
    (logs / "runs.toml").write_text(
        '[[runs]]\nrun = "a.csv"\nbatch_size = 32\n'
        'parameters = { "val/classification_error" = 1.0 }\n'
        '[[runs]]\nrun = "b.csv"\nbatch_size = 64\n')
    add(logs, name=NAME, manifest=logs / "runs.toml", home=tmp_path / "home")
    store = Store.open(tmp_path / "home")
    best = curvekit.best(store, curvekit.Selection(NAME, "val/classification_error"))
    assert best.columns[3:5] == ["val/classification_error",
                                 "val/classification_error (metaparameter)"]
    assert best["val/classification_error (metaparameter)"].to_list() == [1.0, None]


def test_parameters_named_like_computed_columns_keep_their_names(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_plain(logs / "a.csv", 32, 0)
    write_plain(logs / "b.csv", 64, 0)
    params = {"step": 3, "effective_learning_rate": 0.5, "Status": 1, "learning_rate": 0.1}
    (logs / "runs.toml").write_text(manifest_toml([("a.csv", 32, params),
                                                   ("b.csv", 64, params)]))
    add(logs, name=NAME, manifest=logs / "runs.toml", home=tmp_path / "home")
    store = Store.open(tmp_path / "home")
    assert {"step", "effective_learning_rate", "Status"} <= set(store.parameter_columns(NAME))
    best = curvekit.best(store, curvekit.Selection(NAME, "val/classification_error"))
    assert best.get_column("step (metaparameter)").to_list() == [3, 3]
    assert best.get_column("Status").to_list() == [1, 1]
    assert best.get_column("effective_learning_rate (metaparameter)").to_list() == [0.5, 0.5]
    assert best.get_column("effective_learning_rate").to_list() == [pytest.approx(0.1)] * 2


_NAME_CHARS = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_/")
# names that are not metrics or metaparameters: the time axis, clocks, batch sizes, aliases
_SKIP = {n.casefold() for n in (*csvlogs.AXIS_COLUMNS, *csvlogs.TIME_COLUMNS,
                                *BATCH_SIZE_PARAMS, *PARAM_ALIASES)}


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(_NAME_CHARS, min_size=1, max_size=12), flips=st.lists(st.booleans()),
       as_parameters=st.booleans())
def test_any_two_names_that_differ_in_case_are_kept_apart(
        tmp_path: Path, name: str, flips: list[bool], as_parameters: bool) -> None:
    other = "".join(c.swapcase() if i < len(flips) and flips[i] else c
                    for i, c in enumerate(name))
    assume(other != name and name.casefold() not in _SKIP)
    assume(not name.startswith("_"))  # W&B's bookkeeping columns are left out
    folder = tmp_path / f"logs-{abs(hash((name, other, as_parameters)))}"
    if as_parameters:
        logs = _logs(folder, "step,val/error\n0,0.5\n", params=f'"{name}" = 1, "{other}" = 2')
        (trial,) = _build(logs).trials
        assert trial.parameters == {name: 1, other: 2}
    else:
        logs = _logs(folder, f"step,{name},{other}\n0,0.5,0.25\n")
        (table,) = _build(logs).measurements.values()
        # the metrics' own names may be mapped (``acc`` is a classification error) but
        # two names never become one
        assert table.num_columns == 3
