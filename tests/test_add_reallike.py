"""curvekit add on look-alikes of logs found in the wild: W&B UI exports (quoted cells, chart
exports of several runs, runs tables), pandas' index column, text columns dropped with --map,
empty sibling files, --include/--exclude, AlgoPerf trial folders, and by-product formats.

Each rule is tested on files generated here, so that it holds where the corpus of real logs
(tests/test_reallogs.py) is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.cli import main
from curvekit.errors import IngestError
from curvekit.ingest.add import add, build, detect_format
from curvekit.ingest.runs import IngestWarning
from curvekit.ingest.select import FileFilter
from curvekit.ingest.tensorboard import record
from tests.conftest import snapshot
from tests.test_add_formats import _event

NAME = "my_data/gpt/adam"


def _q(*cells: object) -> str:
    """One line as the W&B UI writes it: every cell quoted."""
    return ",".join(f'"{c}"' for c in cells) + "\n"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home holding one workload, so that 'unchanged' means something."""
    logs = tmp_path / "first"
    logs.mkdir()
    (logs / "run.csv").write_text("step,loss\n0,2.0\n10,1.0\n")
    add(logs, name="other/mlp/sgd", metric_map={}, home=tmp_path / "home",
        manifest=_manifest(logs, 8))
    return tmp_path / "home"


def _manifest(folder: Path, batch_size: int, pattern: str = "*", **workload: object) -> Path:
    lines = ["[workload]"] + [f"{k} = {json.dumps(v)}" for k, v in workload.items()]
    lines += ["[[runs]]", f'run = "{pattern}"', f"batch_size = {batch_size}"]
    path = folder.parent / f"{folder.name}-runs.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _refused_unchanged(home: Path, args: list[str], *fragments: str) -> str:
    """Run ``curvekit add`` expecting a refusal; the store must be exactly as it was."""
    before = snapshot(home)
    result = CliRunner().invoke(main, ["add", *args, "--home", str(home)])
    assert result.exit_code != 0, result.output
    assert result.output.startswith("Error: ") or "\nError: " in result.output, result.output
    for fragment in fragments:
        assert fragment in result.output, result.output
    assert snapshot(home) == before
    return result.output


# ---------------------------------------------------------------------- 1. --map COL= drops text
def test_map_drops_a_text_column_before_it_is_parsed(tmp_path: Path, home: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "run.csv").write_text("step,note,loss\n0,warmup,2.0\n10,cosine,1.5\n")
    out = _refused_unchanged(home, [str(logs), "--name", NAME, "--manifest",
                                    str(_manifest(logs, 32))],
                             "value 'warmup' in column 'note' is not a number", "line 2",
                             "--map 'note='")
    assert "note = \"\"" in out  # the manifest's spelling of the same fix
    result = CliRunner().invoke(main, ["add", str(logs), "--name", NAME, "--manifest",
                                       str(_manifest(logs, 32)), "--map", "note=",
                                       "--home", str(home)])
    assert result.exit_code == 0, result.output
    manifest = _manifest(logs, 32)
    manifest.write_text(manifest.read_text() + '[metrics]\nnote = ""\n')
    data = build(logs, name=NAME, manifest=manifest)
    table = next(iter(data.measurements.values()))
    assert table.column_names == ["step", "train/loss"]


# ---------------------------------------------------------------------- 2. quoted cells
def test_quoted_empty_cells_are_missing_values(tmp_path: Path) -> None:
    path = tmp_path / "history.csv"
    path.write_text(_q("Step", "train/loss", "val/loss") + _q(0, 2.5, "") + _q(10, 2.0, 2.2)
                    + _q(20, "", ""))
    data = build(path, name=NAME, manifest=_manifest(tmp_path, 16))
    table = next(iter(data.measurements.values()))
    assert table.to_pylist() == [
        {"step": 0, "train/loss": 2.5, "val/loss": None},
        {"step": 10, "train/loss": 2.0, "val/loss": 2.2}]


@pytest.mark.parametrize(("text", "fragments"), [
    (_q("Step", "loss") + _q(0, "1.0") + _q(1, "n/a"),
     ("line 3", "value 'n/a' in column 'loss' is not a number", "--map 'loss='")),
    ("step,loss\n0,1.0\n1,2.0,3.0\n", ("line 3", "3 fields where the header has 2 columns")),
    ('step,loss\n0,1.0\n1,"2.0\n', ("line 3", "column 'loss'", "quote left open")),
])
def test_csv_parse_errors_name_line_column_and_fix(tmp_path: Path, text: str,
                                                   fragments: tuple[str, ...]) -> None:
    path = tmp_path / "run.csv"
    path.write_text(text)
    with pytest.raises(IngestError) as info:
        build(path, name=NAME, manifest=_manifest(tmp_path, 16))
    message = str(info.value)
    assert message.startswith(str(path))
    assert "ArrowInvalid" not in message and "CSV conversion error" not in message
    for fragment in fragments:
        assert fragment in message


# ---------------------------------------------------------------------- 3. W&B UI exports
def _chart(path: Path, runs: dict[str, dict[int, float]], metric: str = "train/loss") -> None:
    """A chart's 'Export as CSV': Step, then '<run> - <metric>' with __MIN and __MAX."""
    header = ["Step"] + [f"{r} - {m}" for r in runs for m in (metric, f"{metric}__MIN",
                                                                  f"{metric}__MAX")]
    steps = sorted({s for points in runs.values() for s in points})
    lines = [_q(*header)]
    for s in steps:
        cells: list[object] = [s]
        for points in runs.values():
            v = points.get(s, "")
            cells += [v, v, v]
        lines.append(_q(*cells))
    path.write_text("".join(lines))


def test_wandb_chart_export_is_one_trial_per_run(tmp_path: Path) -> None:
    logs = tmp_path / "exports"
    logs.mkdir()
    runs = {"gpt2 - char level 1729642919.4": {0: 3.0, 50: 2.0, 100: 1.5},
            "bright-sun-7": {0: 3.1, 50: 2.4}}
    _chart(logs / "wandb_export.csv", runs)
    assert detect_format(logs) == "wandb"
    data = build(logs, name=NAME, manifest=_manifest(logs, 12))
    assert sorted(data.origin["runs"].values()) == sorted(runs)  # run names from the prefix
    tables = {data.origin["runs"][f"12/{k[1]}"]: t for k, t in data.measurements.items()}
    for run, points in runs.items():
        assert tables[run].column_names == ["step", "train/loss"]  # no MIN/MAX
        assert dict(zip(tables[run].column("step").to_pylist(),
                        tables[run].column("train/loss").to_pylist(),
                        strict=True)) == points
    statuses = {data.origin["runs"][f"12/{t.trial_id}"]: t.status for t in data.trials}
    assert statuses == {"gpt2 - char level 1729642919.4": "COMPLETE",
                        "bright-sun-7": "INCOMPLETE"}


def test_chart_exports_of_one_project_are_joined_by_run(tmp_path: Path) -> None:
    logs = tmp_path / "exports"
    logs.mkdir()
    _chart(logs / "loss.csv", {"a": {0: 2.0, 10: 1.0}, "b": {0: 2.2, 10: 1.4}})
    _chart(logs / "acc.csv", {"a": {0: 0.1, 10: 0.6}, "b": {10: 0.5}}, metric="val/accuracy")
    data = build(logs, name=NAME, manifest=_manifest(logs, 4),
                 metric_map=["val/accuracy=val/accuracy"])
    assert len(data.trials) == 2
    by_run = {data.origin["runs"][f"4/{k[1]}"]: t.to_pylist()
              for k, t in data.measurements.items()}
    assert by_run["b"] == [{"step": 0, "train/loss": 2.2, "val/accuracy": None},
                           {"step": 10, "train/loss": 1.4, "val/accuracy": 0.5}]
    # one run with two different values at one step across the files is refused
    _chart(logs / "loss2.csv", {"a": {10: 9.0}})
    with pytest.raises(IngestError, match=r"step 10 appears twice with different"):
        build(logs, name=NAME, manifest=_manifest(logs, 4))


def test_chart_export_read_as_plain_csv_says_what_it_is(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "wandb_export.csv"
    _chart(path, {"a": {0: 1.0}, "b": {0: 2.0}})
    _refused_unchanged(home, [str(path), "--format", "csv", "--name", NAME, "--manifest",
                              str(_manifest(tmp_path, 4))],
                       "W&B chart export holding 2 run(s)", "--log-format wandb")


def test_wandb_runs_table_is_not_a_history(tmp_path: Path, home: Path) -> None:
    logs = tmp_path / "wandb"
    logs.mkdir()
    (logs / "wandb_export_2026-03-02.csv").write_text(
        _q("Name", "State", "Notes", "Created", "Runtime", "batch_size", "iter", "train/loss")
        + _q("baseline", "finished", "-", "2026-05-25T14:08:33.000Z", 732, 64, 5000, 0.63)
        + _q("ablation", "running", "a\nnote", "2026-05-25T15:00:00.000Z", 12, 64, 100, 1.2))
    for fmt in ("auto", "wandb", "csv"):
        _refused_unchanged(home, [str(logs), "--format", fmt, "--name", NAME,
                                  "--map", "Name=", "--manifest", str(_manifest(logs, 64))],
                           "W&B runs table", "not a training history", "scan_history",
                           "--exclude 'wandb_export_2026-03-02.csv'")


# ---------------------------------------------------------------------- 6. pandas' index
def test_pandas_index_column_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "wandb_history.csv"
    path.write_text(",_step,_runtime,train/loss,eval/loss\n0,0,7.3,,\n1,1,68.5,0.17,\n"
                    "2,2,103.2,0.16,0.5\n")
    assert detect_format(path) == "wandb"
    for fmt in ("wandb", "csv"):
        data = build(path, name=NAME, format=fmt, manifest=_manifest(tmp_path, 4))
        table = next(iter(data.measurements.values()))
        assert table.column_names == ["step", "train/loss",
                                      "val/loss"]
        assert table.column("step").to_pylist() == [1, 2]


def test_nameless_column_that_is_no_index_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    path.write_text(",step,loss\na,0,1.0\n")
    with pytest.raises(IngestError, match=r"line 2: nameless first column .* 'a' is not"):
        build(path, name=NAME, manifest=_manifest(tmp_path, 4))
    path.write_text("step,,loss\n0,1,1.0\n")
    with pytest.raises(IngestError, match=r"line 1: the header has empty column names"):
        build(path, name=NAME, manifest=_manifest(tmp_path, 4))


# ---------------------------------------------------------------------- 7. choosing files
def test_empty_sibling_file_says_how_to_leave_it_out(tmp_path: Path, home: Path) -> None:
    logs = tmp_path / "keras"
    logs.mkdir()
    (logs / "model_history_log.csv").write_text("epoch,accuracy,loss\n0,0.5,1.2\n1,0.7,0.8\n")
    (logs / "model_history_log2.csv").write_bytes(b"")
    manifest = _manifest(logs, 32, steps_per_epoch=100)
    _refused_unchanged(home, [str(logs), "--name", NAME, "--manifest", str(manifest)],
                       "model_history_log2.csv, line 1: empty file",
                       "--exclude 'model_history_log2.csv'")
    result = CliRunner().invoke(main, ["add", str(logs), "--name", NAME, "--manifest",
                                       str(manifest), "--exclude", "model_history_log2.csv",
                                       "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "1 trials, 2 measurements" in result.output
    # the manifest's [workload] exclude does the same
    manifest = _manifest(logs, 32, steps_per_epoch=100, exclude=["*2.csv"])
    assert len(build(logs, name=NAME, manifest=manifest).trials) == 1


def test_include_and_exclude_choose_files_and_folders(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    for run in ("a/run.csv", "b/run.csv", "b/notes.csv", "c/deep/run.csv"):
        (logs / run).parent.mkdir(parents=True, exist_ok=True)
        (logs / run).write_text("step,loss\n0,1.0\n")

    def runs(**kw: tuple[str, ...]) -> list[str]:
        data = build(logs, name=NAME, manifest=_manifest(logs, 8), **kw)
        return sorted(data.origin["runs"].values())
    assert runs(exclude=("notes.csv",)) == ["a/run.csv", "b/run.csv", "c/deep/run.csv"]
    assert runs(exclude=("b",)) == ["a/run.csv", "c/deep/run.csv"]
    assert runs(include=("run.csv",), exclude=("c/*",)) == ["a/run.csv", "b/run.csv"]
    assert runs(include=("*/deep/*",)) == ["c/deep/run.csv"]
    with pytest.raises(IngestError, match=r"log here that --include/--exclude left in"):
        runs(include=("nothing*",))
    with pytest.raises(IngestError, match=r"no csv runs found here \(or --include/--exclude "
                       r"left every file out\)"):
        build(logs, name=NAME, manifest=_manifest(logs, 8), format="csv", exclude=["*.csv"])
    with pytest.raises(IngestError, match=r"'' is not a file pattern"):
        runs(exclude=("",))


@settings(max_examples=40, deadline=None)
@given(parts=st.lists(st.sampled_from(["a", "b", "trial_1", "x.csv"]), min_size=1, max_size=4),
       pattern=st.sampled_from(["a", "b", "trial_*", "*.csv", "a/*", "*/x.csv", "b/trial_1"]))
def test_exclude_wins_and_covers_what_a_folder_holds(parts: list[str], pattern: str) -> None:
    rel = "/".join(parts)
    f = FileFilter.of(include=(pattern,), exclude=(pattern,))
    assert not f.keeps(rel)  # an exclude always wins over an include
    excluded = not FileFilter.of(exclude=(pattern,)).keeps(rel)
    # a file under an excluded folder is excluded
    assert excluded <= (not FileFilter.of(exclude=(pattern,)).keeps(rel + "/more.csv"))
    assert FileFilter.of(include=(pattern,)).keeps(rel) == excluded


def _algoperf_trial(folder: Path, n: int, *, events: bool = True) -> None:
    folder.mkdir(parents=True)
    rows = [(1, 1.17, 0.16), (334, 0.29, 0.69), (575, 0.28 - n / 100, 0.70 + n / 100)]
    (folder / "eval_measurements.csv").write_text(
        "accumulated_eval_time,accumulated_submission_time,global_step,preemption_count,score,"
        "train/loss,validation/loss,validation/num_examples,validation/ssim,total_duration\n"
        + "".join(f"{i * 4.0},{i * 80.0},{s},0,{i * 80.0},{loss},{loss + 0.02},3554,{ssim},"
                  f"{i * 85.0}\n" for i, (s, loss, ssim) in enumerate(rows)))
    (folder / "measurements.csv").write_text(
        "global_step,grad_norm,loss,validation/loss\n0,6.0,1.12,\n1,,,1.19\n1,6.7,1.18,\n"
        + "".join(f"{s},5.0,{1 - s / 1000},\n" for s in range(2, 600, 50)))
    (folder / "hparams.json").write_text(json.dumps({"beta1": 0.9, "l2": 0.012 * n,
                                                     "optimizer": "amos",
                                                     "nested": {"x": 1}}))
    (folder / "flags_0.json").write_text('{"framework": "jax"}')
    if events:
        (folder / f"events.out.tfevents.171675{n}.host.1498.0.v2").write_bytes(
            b"".join(record(_event(s, "loss", 1 - s / 1000)) for s in range(0, 500, 100)))


def test_algoperf_trials_read_their_curve(tmp_path: Path, home: Path) -> None:
    study = tmp_path / "fastmri_jax"
    for n in (1, 2, 10):
        _algoperf_trial(study / f"trial_{n}", n)
    (study / "fastmri_jax_05-26-2024.log").write_text("version https://git-lfs\n")
    manifest = _manifest(study, 32, pattern="trial_*")
    with pytest.warns(IngestWarning, match=r"read as algoperf; not read: TensorBoard event "
                      r"files, measurements.csv, by-products of the same runs"):
        assert detect_format(study) == "algoperf"
    with pytest.warns(IngestWarning):
        data = build(study, name=NAME, manifest=manifest)
    assert sorted(data.origin["runs"].values()) == ["trial_1", "trial_10", "trial_2"]
    assert [t.trial_id for t in data.trials] == [1, 2, 3]  # natural order: 1, 2, 10
    table = data.measurements[(data.trials[0].key, 1)]
    assert table.column_names == ["step", "train/loss",
                                  "val/loss", "val/ssim"]
    assert table.column("step").to_pylist() == [1, 334, 575]
    assert data.trials[1].parameters == {"beta1": 0.9, "l2": 0.024,
                                         "optimizer": "amos"}
    # the CLI prints which format was picked, as a warning
    result = CliRunner().invoke(main, ["add", str(study), "--name", NAME, "--manifest",
                                       str(manifest), "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "Warning: " in result.output and "read as algoperf" in result.output
    assert "3 trials, 9 measurements" in result.output
    # one trial's folder, and the file itself, are sources too
    one = build(study / "trial_2", name=NAME, manifest=_manifest(study, 32, "trial_2"),
                format="algoperf")
    assert len(one.trials) == 1
    assert detect_format(study / "trial_2" / "eval_measurements.csv") == "algoperf"


def test_algoperf_folder_read_as_csv_is_not_two_trials_each(tmp_path: Path) -> None:
    study = tmp_path / "study"
    for n in (1, 2):
        _algoperf_trial(study / f"trial_{n}", n, events=False)
    manifest = _manifest(study, 32, pattern="trial_*/eval_measurements.csv")
    with pytest.warns(IngestWarning, match=r"skipped 2 AlgoPerf per-step log\(s\) "
                      r"\(trial_1/measurements.csv, \.\.\.\)"):
        data = build(study, name=NAME, manifest=manifest, format="csv")
    assert len(data.trials) == 2
    # asked for by name, the per-step log is read
    data = build(study, name=NAME, manifest=_manifest(study, 32, "trial_1/measurements.csv"),
                 format="csv", include=["trial_1/measurements.csv"])
    assert len(data.trials) == 1
    assert data.measurements[(data.trials[0].key, 1)].num_rows == 14


# ---------------------------------------------------------------------- 8. by-products
def _mlflow_run_with_tensorboard_artifacts(root: Path) -> Path:
    """An MLflow file store as autolog leaves it: metrics per epoch, and the TensorBoard
    logs of the same run copied under artifacts/."""
    experiment = root / "mlruns" / "1"
    experiment.mkdir(parents=True)
    (experiment / "meta.yaml").write_text("experiment_id: '1'\nname: stt\n"
                                          "lifecycle_stage: active\n")
    run = experiment / "ed05f9cd599442fe9a0c9222184710b8"
    (run / "metrics").mkdir(parents=True)
    (run / "params").mkdir()
    (run / "meta.yaml").write_text("run_id: ed05f9cd599442fe9a0c9222184710b8\nexperiment_id: "
                                   "'1'\nlifecycle_stage: active\nstart_time: 1628697775478\n")
    (run / "metrics" / "loss").write_text("".join(f"16286977{s} {2 - s / 10} {s}\n"
                                                  for s in range(5)))
    (run / "params" / "batch_size").write_text("32")
    board = run / "artifacts" / "tensorboard_logs" / "train"
    board.mkdir(parents=True)
    (board / "events.out.tfevents.1628697775.host.v2").write_bytes(
        b"".join(record(_event(s, "epoch_loss", 2 - s / 10)) for s in range(5)))
    return experiment


def test_mlflow_with_tensorboard_artifacts_is_mlflow(tmp_path: Path) -> None:
    experiment = _mlflow_run_with_tensorboard_artifacts(tmp_path)
    for source in (experiment, experiment.parent):
        with pytest.warns(IngestWarning, match=r"read as mlflow; not read: TensorBoard event "
                          r"files under its runs' artifacts/.*--log-format tensorboard"):
            assert detect_format(source) == "mlflow"
    # a TensorBoard log that is no artifact of a run is a second format: still refused
    (tmp_path / "mlruns" / "tb").mkdir()
    (tmp_path / "mlruns" / "tb" / "events.out.tfevents.1.host").write_bytes(
        record(_event(0, "loss", 1.0)))
    with pytest.raises(IngestError, match=r"several formats \(mlflow, tensorboard\)"):
        detect_format(experiment.parent)
    # ... unless it is left out
    with pytest.warns(IngestWarning):
        assert detect_format(experiment.parent, FileFilter.of(exclude=["tb"])) == "mlflow"
