"""CSV layouts of several kinds, each read by one rule: a title above the header, several
runs stacked in one long-format file, W&B chart exports (with or without companions,
grouped, with an x axis that is no step column), and a metric named like a metaparameter."""

from __future__ import annotations

import json
import re
import tempfile
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.cli import main
from curvekit.errors import IngestError
from curvekit.ingest.add import add_plan, build
from curvekit.ingest.files import SourceFiles
from curvekit.ingest.runs import IngestWarning
from curvekit.store.update import WorkloadData

MANIFEST = '[[runs]]\nrun = "*"\nbatch_size = 16\n'


def _build(folder: Path, workload: str = "", **options: object
           ) -> tuple[WorkloadData, list[str]]:
    manifest = folder / "runs.toml"
    manifest.write_text(f"[workload]\n{workload}\n{MANIFEST}" if workload else MANIFEST)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IngestWarning)
        data = build(folder, name="mine/net/sgd", manifest=manifest,
                     **options)  # type: ignore[arg-type]
    return data, [str(w.message) for w in caught if issubclass(w.category, IngestWarning)]


def _curves(data: WorkloadData) -> dict[str, list[tuple[int, float]]]:
    """Run name -> its (step, loss) rows, as stored."""
    names = {(t.key, t.trial_id): data.origin["runs"][f"{t.key.batch_size}/{t.trial_id}"]
             for t in data.trials}
    out = {}
    for key, table in data.measurements.items():
        metric = next(c for c in table.column_names if c != "step")
        out[names[key]] = list(zip(table.column("step").to_pylist(),
                                   table.column(metric).to_pylist(), strict=True))
    return out


# ------------------------------------------------------------------ a title above the header
_title = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")),
            max_size=40).map(lambda t: "# " + t),
    st.text("abcdefghij XYZ:-", min_size=1, max_size=30).filter(lambda t: t.strip()),
)


@settings(max_examples=30, deadline=None)
@given(titles=st.lists(_title, min_size=1, max_size=3), separator=st.sampled_from([",", ";"]),
       blank=st.booleans())
def test_a_title_above_the_header_is_left_out_with_a_notice(titles: list[str], separator: str,
                                                            blank: bool) -> None:
    rows = [(s, round(2.0 - s / 100, 3)) for s in range(0, 101, 20)]
    body = f"step{separator}loss{separator}acc\n" + "".join(
        f"{s}{separator}{v}{separator}{'0,5' if separator == ';' else '0.5'}\n"
        for s, v in rows)
    head = "\n".join(titles) + "\n" + ("\n" if blank else "")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "run.csv").write_text(head + body, encoding="utf-8")
        titled, notes = _build(folder)
        (folder / "run.csv").write_text(body)
        plain, _ = _build(folder)
    assert _curves(titled) == _curves(plain)
    assert any("left out as a title" in n and "run.csv" in n for n in notes), notes


def test_a_title_keeps_the_files_line_numbers(tmp_path: Path) -> None:
    (tmp_path / "run.csv").write_text("Run 3 of the sweep\nstep,loss,acc\n0,1.0,0.1\n"
                                      "10,oops,0.2\n")
    with pytest.raises(IngestError, match=r"run.csv, line 4: value 'oops' in column 'loss'"):
        _build(tmp_path)


# ------------------------------------------------------------------ several runs in one file
_run_name = st.one_of(st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True),
                      st.integers(0, 10**6).map(str))


@settings(max_examples=30, deadline=None)
@given(names=st.lists(_run_name, min_size=2, max_size=4, unique=True),
       lengths=st.lists(st.integers(2, 5), min_size=4, max_size=4),
       column=st.sampled_from(["run", "run_id", "trial", "seed", "name", "tag"]),
       first=st.booleans())
def test_stacked_runs_are_one_trial_each(names: list[str], lengths: list[int], column: str,
                                         first: bool) -> None:
    expected: dict[str, list[tuple[int, float]]] = {}
    lines = [f"{column},step,loss" if first else f"step,loss,{column}"]
    for i, name in enumerate(names):
        for s in range(lengths[i]):
            value = round(1.0 / (1 + s + i), 4)
            expected.setdefault(name, []).append((s * 10, value))
            lines.append(f"{name},{s * 10},{value}" if first else f"{s * 10},{value},{name}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "sweep.csv").write_text("\n".join(lines) + "\n")
        data, notes = _build(folder)
    assert _curves(data) == {f"sweep/{n}": rows for n, rows in expected.items()}
    assert any(f"column {column!r} changes exactly where 'step' starts again" in n
               for n in notes), notes
    assert sorted(str(t.parameters[column]) for t in data.trials) == sorted(names)


def test_stacked_runs_on_the_epoch_axis(tmp_path: Path) -> None:
    """Keras-like logs of several runs, one after another: epochs start again per run."""
    (tmp_path / "history.csv").write_text("epoch,loss,seed\n0,1.0,7\n1,0.5,7\n0,0.9,8\n"
                                          "1,0.4,8\n2,0.3,8\n")
    data, _ = _build(tmp_path, "steps_per_epoch = 100")
    assert _curves(data) == {"history/7": [(100, 1.0), (200, 0.5)],
                             "history/8": [(100, 0.9), (200, 0.4), (300, 0.3)]}


def test_run_column_names_the_column_when_steps_go_on(tmp_path: Path) -> None:
    (tmp_path / "sweep.csv").write_text("run,step,loss\na,0,1.0\na,10,0.5\nb,20,0.9\n"
                                        "b,30,0.4\n")
    with pytest.raises(IngestError, match="--run-column 'run'"):
        _build(tmp_path)
    data, _ = _build(tmp_path, run_column="run")
    assert _curves(data) == {"sweep/a": [(0, 1.0), (10, 0.5)], "sweep/b": [(20, 0.9),
                                                                           (30, 0.4)]}
    result = CliRunner().invoke(main, ["add", str(tmp_path), "--name", "mine/net/sgd",
                                       "--run-manifest", str(tmp_path / "runs.toml"),
                                       "--run-column", "run", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "run sweep/a  ->" in result.output and "run sweep/b  ->" in result.output


def test_steps_that_start_again_without_a_run_column_name_the_option(tmp_path: Path) -> None:
    (tmp_path / "sweep.csv").write_text("step,loss\n0,1.0\n10,0.5\n0,0.9\n10,0.4\n")
    with pytest.raises(IngestError, match=r"appears twice.*--run-column NAME"):
        _build(tmp_path)


def test_a_run_column_of_one_row_per_run_is_a_runs_table(tmp_path: Path) -> None:
    (tmp_path / "runs.csv").write_text("Name,_step,val_loss\na,300,0.5\nb,200,0.4\n")
    with pytest.raises(IngestError, match="one row per run holds final values"):
        _build(tmp_path, run_column="Name")


def test_a_run_column_that_names_no_column_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run.csv").write_text("step,loss\n0,1.0\n")
    with pytest.raises(IngestError, match="--run-column 'trial' names no column"):
        _build(tmp_path, run_column="trial")


# ------------------------------------------------------------------ W&B chart exports
@settings(max_examples=30, deadline=None)
@given(names=st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True), min_size=1,
                      max_size=4, unique=True),
       companions=st.booleans(), x=st.sampled_from(["Step", "_step", "global_step"]))
def test_a_chart_export_is_one_trial_per_run(names: list[str], companions: bool,
                                             x: str) -> None:
    header = [x]
    for n in names:
        header += [f"{n} - val_loss"] + ([f"{n} - val_loss__MIN", f"{n} - val_loss__MAX"]
                                         if companions else [])
    lines = [",".join(f'"{h}"' for h in header)]
    expected: dict[str, list[tuple[int, float]]] = {n: [] for n in names}
    for s in range(0, 50, 10):
        cells = [str(s)]
        for i, n in enumerate(names):
            value = round(2.0 / (1 + s + i), 4)
            expected[n].append((s, value))
            cells += [str(value)] * (3 if companions else 1)
        lines.append(",".join(f'"{c}"' for c in cells))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "wandb_export.csv").write_text("\n".join(lines) + "\n")
        data, _ = _build(folder)
    assert _curves(data) == expected


def test_a_titled_chart_export_is_read_below_its_title(tmp_path: Path) -> None:
    (tmp_path / "wandb_export.csv").write_text(
        '# sweep 3\n"Step","a - loss","b - loss"\n"0","2.0",""\n"10","1.5","1.7"\n')
    data, notes = _build(tmp_path)
    assert _curves(data) == {"a": [(0, 2.0), (10, 1.5)], "b": [(10, 1.7)]}
    assert any("left out as a title" in n for n in notes), notes


def test_a_grouped_chart_export_is_refused(tmp_path: Path) -> None:
    (tmp_path / "wandb_export.csv").write_text(
        '"Step","Group: lr=0.1 - val_loss","Group: lr=0.1 - val_loss__MIN",'
        '"Group: lr=0.1 - val_loss__MAX"\n"0","2.0","1.9","2.1"\n')
    with pytest.raises(IngestError, match=r"grouped .*aggregate of its runs.*grouping off"):
        _build(tmp_path)


def test_a_chart_with_another_x_axis_places_runs_by_their_own_step(tmp_path: Path) -> None:
    (tmp_path / "wandb_export.csv").write_text(
        '"epoch_id","a - _step","a - _step__MIN","a - _step__MAX","a - loss","a - loss__MIN",'
        '"a - loss__MAX"\n"0","11","11","11","2.0","2.0","2.0"\n'
        '"1","23","23","23","1.5","1.5","1.5"\n')
    data, notes = _build(tmp_path)
    assert _curves(data) == {"a": [(11, 2.0), (23, 1.5)]}
    assert any("--map 'epoch_id=step'" in n for n in notes), notes
    by_x, _ = _build(tmp_path, metric_map=["epoch_id=step"])
    assert _curves(by_x) == {"a": [(0, 2.0), (1, 1.5)]}
    text = (tmp_path / "wandb_export.csv").read_text()
    (tmp_path / "wandb_export.csv").write_text(text.replace('"epoch_id"', '"epoch"', 1))
    by_epoch, _ = _build(tmp_path)  # the runs' own steps win over the epochs
    assert _curves(by_epoch) == {"a": [(11, 2.0), (23, 1.5)]}
    (tmp_path / "wandb_export.csv").write_text('"epoch_id","a - loss","a - loss__MIN",'
                                               '"a - loss__MAX"\n"0","2.0","2.0","2.0"\n')
    with pytest.raises(IngestError, match=r"x axis 'epoch_id' is no step column.*"
                                          r"--map 'epoch_id=step'"):
        _build(tmp_path)


# ------------------------------------------------------------------ a metric named like a parameter
@pytest.mark.parametrize(("column", "parameter", "stored", "values"), [
    ("learning_rate", "learning_rate", "learning_rate", ("0.1", "0.05")),
    ("val_acc", "val/classification_error", "val/classification_error",  # 1 - value
     ("0.5", "0.75")),
    ("learning_rate", "lr", "learning_rate", ("0.1", "0.05")),  # lr: learning_rate
])
def test_a_metric_named_like_a_metaparameter_is_kept_and_the_notice_fix_works(
        tmp_path: Path, column: str, parameter: str, stored: str,
        values: tuple[str, str]) -> None:
    version = tmp_path / "version_0"
    version.mkdir()
    (version / "metrics.csv").write_text(f"epoch,step,{column},val_loss\n0,9,{values[0]},2.0\n"
                                         f"0,19,{values[1]},1.5\n")
    (version / "hparams.yaml").write_text(f"batch_size: 32\n{parameter}: 0.1\n")
    before = add_plan(tmp_path, name="mine/net/sgd")
    data, notes = _build(tmp_path)
    note = next(n for n in notes if "named like a metaparameter" in n)
    fix = re.search(r"--map '([^']+)'", note)
    assert fix is not None, note
    result = CliRunner().invoke(main, ["add", str(tmp_path), "--name", "mine/net/sgd",
                                       "--map", fix.group(1), "--dry-run", "--format", "json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    renamed = {m["logged"]: m for m in plan["runs"][0]["metrics"]}[column]
    was = {m.logged: m for m in before.runs[0].metrics}[column]
    assert renamed["stored"] not in plan["runs"][0]["parameters"]
    assert renamed["transform"] == was.transform
    assert "named like a metaparameter" not in " ".join(plan["notes"])
    assert data.trials[0].parameters[stored] == 0.1


def _plan_and_reads(source: Path, monkeypatch: pytest.MonkeyPatch,
                    **options: object) -> tuple[dict[str, list[str]], list[str]]:
    """The plan's files of each run (``""``: files of no run), and every file the import
    read."""
    read: list[str] = []
    original = SourceFiles.read

    def spy(self: SourceFiles) -> list[str]:
        read.extend(original(self))
        return original(self)

    monkeypatch.setattr(SourceFiles, "read", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        plan = add_plan(source, name="mine/net/sgd", **options)  # type: ignore[arg-type]
    return {"": plan.unused, **{r.run: r.files for r in plan.runs}}, read


def _layouts(root: Path) -> dict[str, tuple[Path, dict[str, object]]]:
    """Sources of several formats whose runs are made of several files."""
    from tests.logformats import write_mlflow_db, write_sacred_run
    from tests.test_add_epochs_and_hf import _trainer_output
    from tests.test_add_formats import _tensorboard_runs

    out: dict[str, tuple[Path, dict[str, object]]] = {}
    lightning = root / "lightning"
    for n in (0, 1):
        (lightning / f"version_{n}").mkdir(parents=True)
        (lightning / f"version_{n}" / "metrics.csv").write_text(
            "epoch,step,val_loss\n0,9,2.0\n0,19,1.0\n")
        (lightning / f"version_{n}" / "hparams.yaml").write_text(f"batch_size: {16 << n}\n")
    out["lightning"] = (lightning, {})
    _tensorboard_runs(root / "tensorboard")
    out["tensorboard"] = (root / "tensorboard", {})
    for bs in (16, 32):
        _trainer_output(root / "hf" / f"bs{bs}", bs, 60, 60, checkpoints=(20, 40))
    out["hf"] = (root / "hf", {})
    charts = root / "charts"
    charts.mkdir()
    for metric in ("val_loss", "train_loss"):
        (charts / f"{metric}.csv").write_text(
            f'"Step","a - {metric}","b - {metric}"\n"0","2.0","2.5"\n"10","1.0","1.5"\n')
    manifest = root / "runs.toml"
    manifest.write_text(MANIFEST)
    out["wandb"] = (charts, {"manifest": manifest})
    sacred = root / "sacred"
    for n in (1, 2):
        write_sacred_run(sacred / str(n), config={"batch_size": 32, "lr": 0.1},
                         metrics={"loss": ([10, 20], [1.0, 0.5])})
    out["sacred"] = (sacred, {})
    db = root / "mlflow" / "mlruns.db"
    db.parent.mkdir()
    write_mlflow_db(db, {1: "exp"}, [{"id": "r1", "experiment": 1, "status": "FINISHED",
                                      "start": 1, "params": {"batch_size": "32"},
                                      "metrics": {"loss": [(10, 1.0, 1), (20, 0.5, 2)]}}])
    out["mlflow"] = (db.parent, {})
    return out


def test_the_plan_names_every_file_each_run_is_read_from(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """Whatever the format, every file the import read is named under the runs it makes,
    and a run of several files names each of them."""
    for fmt, (source, options) in _layouts(tmp_path).items():
        with monkeypatch.context() as patch:
            files, read = _plan_and_reads(source, patch, **options)
        unused = files.pop("")
        named = {f for fs in files.values() for f in fs}
        assert set(read) <= named and not unused, (fmt, sorted(set(read) - named), unused)
        assert all(len(fs) >= 2 for fs in files.values()) or fmt == "mlflow", (fmt, files)
    lightning, _ = _layouts(tmp_path / "again")["lightning"]
    with monkeypatch.context() as patch:
        files, _ = _plan_and_reads(lightning, patch)
    version = lightning / "version_0"
    assert files["version_0/metrics.csv"] == [str(version / "hparams.yaml"),
                                              str(version / "metrics.csv")]
    result = CliRunner().invoke(main, ["add", str(lightning), "--name", "mine/net/sgd",
                                       "--dry-run", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert f'"{version / "hparams.yaml"}"' in result.output
