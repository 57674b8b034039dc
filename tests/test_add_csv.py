"""curvekit add with CSV logs: Lightning's and Keras's CSVLogger, any CSV with a step column;
statuses, the run manifest, and every malformed input refused with the store unchanged."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import polars as pl
import pytest

from curvekit.errors import IngestError, StoreError
from curvekit.ingest.add import add, build
from curvekit.ingest.manifest import EXAMPLE, load_run_manifest
from curvekit.store.store import Store
from curvekit.store.update import content_hash, validate
from tests.conftest import snapshot
from tests.logfiles import (
    BATCH_SIZES,
    error_curve,
    eval_steps,
    manifest_toml,
    write_keras,
    write_lightning,
    write_plain,
)

NAME = "my_data/cnn/momentum"


@pytest.fixture
def lightning(tmp_path: Path) -> Path:
    """Six batch sizes, two runs each, as Lightning writes them; one run diverges."""
    logs = tmp_path / "logs"
    version = 0
    for bs in BATCH_SIZES:
        for trial in range(2):
            write_lightning(logs / "lightning_logs" / f"version_{version}", bs, trial,
                            lr=0.1 * (trial + 1), diverge=(bs == 512 and trial == 1))
            version += 1
    return logs


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home that already holds one added workload, so 'unchanged' means something."""
    logs = tmp_path / "other"
    for bs in (32, 64):
        write_plain(logs / f"bs{bs}.csv", bs, 0)
    (logs / "m.toml").write_text(manifest_toml([("bs32.csv", 32, {}), ("bs64.csv", 64, {})]))
    add(logs, name="other/mlp/sgd", manifest=logs / "m.toml", home=tmp_path / "home")
    return tmp_path / "home"


def test_lightning_logs_become_a_workload(lightning: Path, home: Path) -> None:
    result = add(lightning, name=NAME, home=home)
    assert (result.changed, result.studies, result.trials, result.measurements) == \
        (True, 6, 12, 12 * 25)
    store = Store.open(home)
    trials = store.trials(NAME).select("batch_size", "trial_id", "status", "steps",
                                       "learning_rate", "momentum", "optimizer").rows()
    assert trials[0] == (16, 1, "COMPLETE", eval_steps(16)[-1], 0.1, 0.9, "momentum")
    assert trials[-1][:3] == (512, 2, "INFEASIBLE")  # its loss became NaN
    assert sum(t[2] == "COMPLETE" for t in trials) == 11
    rows = store.measurements(NAME, batch_size=64).filter(  # type: ignore[union-attr]
        pl.col("trial_id") == 1).select("step", "val/classification_error",
                                        "val/loss",
                                        "train/loss").rows()
    steps = eval_steps(64)
    assert [r[0] for r in rows] == steps  # the sparse train/val rows merged, one per step
    for (_, err, val, tr), want in zip(rows, error_curve(64, 0, steps), strict=True):
        assert err == pytest.approx(want, abs=1e-12)  # val_acc stored as 1 - accuracy
        assert val == pytest.approx(2.3 * want / 0.9) and tr == pytest.approx(0.9 * val)
    origin = store.metadata["added"][NAME]["origin"]
    assert origin["format"] == "csv" and origin["source"] == str(lightning.resolve())
    assert origin["runs"]["16/1"] == "lightning_logs/version_0/metrics.csv"
    assert "other/mlp/sgd" in store.workloads()  # the workload added before is kept


def test_adding_again_changes_nothing_and_replace_overwrites(lightning: Path,
                                                            home: Path) -> None:
    add(lightning, name=NAME, home=home)
    before = snapshot(home)
    again = add(lightning, name=NAME, home=home)
    assert not again.changed and snapshot(home) == before
    metrics = lightning / "lightning_logs" / "version_0" / "metrics.csv"
    text = metrics.read_text()
    assert "\n,0,0,2.3," in text
    metrics.write_text(text.replace("\n,0,0,2.3,", "\n,0,0,2.25,", 1))
    with pytest.raises(StoreError, match=r"already has a workload .* --replace"):
        add(lightning, name=NAME, home=home)
    assert snapshot(home) == before
    assert add(lightning, name=NAME, home=home, replace=True).changed
    value = Store.open(home).query(
        "select value from measurements where model = 'cnn' and metric = ? and "
        "batch_size = 16 and trial_id = 1 and step = 0", ["val/loss"]).item()
    assert value == 2.25


def test_keras_epochs_become_steps(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_keras(logs / "bs32.csv", epochs=6, trial=0, batch_size=32, validation_freq=2)
    write_keras(logs / "bs64.csv", epochs=6, trial=0, batch_size=64, validation_freq=2)
    text = (logs / "bs32.csv").read_bytes()
    assert text.startswith(b"epoch,accuracy,loss,val_accuracy,val_loss\r\n") and b",NA,NA" in text
    (logs / "m.toml").write_text(
        manifest_toml([("bs32.csv", 32, {}), ("bs64.csv", 64, {})], train_examples=1600))
    data = build(logs, name=NAME, manifest=logs / "m.toml")
    table = data.measurements[(data.studies[0].key, 1)]
    assert table.column("step").to_pylist() == [50, 100, 150, 200, 250, 300]
    assert table.column("val/classification_error").to_pylist()[:2] == \
        [None, pytest.approx(error_curve(32, 0, [100])[0])]
    assert sorted(table.column_names) == ["step", "train/classification_error",
                                          "train/loss",
                                          "val/classification_error", "val/loss"]
    # 64 runs 1600 / 64 = 25 steps per epoch
    assert data.measurements[(data.studies[1].key, 1)].column("step").to_pylist()[0] == 25


def test_keras_needs_steps_per_epoch(tmp_path: Path) -> None:
    path = write_keras(tmp_path / "bs32.csv", epochs=3, trial=0, batch_size=32)
    (tmp_path / "m.toml").write_text(manifest_toml([("bs32.csv", 32, {})]))
    with pytest.raises(IngestError, match=r"counts epochs .* steps_per_epoch") as info:
        build(path, name=NAME, manifest=tmp_path / "m.toml")
    assert info.value.path == str(path)


def test_any_csv_step_column_and_map(tmp_path: Path) -> None:
    write_plain(tmp_path / "a.csv", 32, 0, step_name="global_step")
    write_plain(tmp_path / "b.csv", 32, 1, step_name="iteration_count")
    (tmp_path / "m.toml").write_text(manifest_toml([("*.csv", 32, {"learning_rate": 0.3})]))
    with pytest.raises(IngestError, match=r"b\.csv, line 1: no step column"):
        build(tmp_path, name=NAME, manifest=tmp_path / "m.toml")
    data = build(tmp_path, name=NAME, manifest=tmp_path / "m.toml",
                 metric_map=["iteration_count=step", "train/cross_entropy_error="])
    assert [t.trial_id for t in data.trials] == [1, 2]
    assert [t.parameters for t in data.trials] == [{"learning_rate": 0.3}] * 2
    for table in data.measurements.values():
        assert table.column_names == ["step", "val/classification_error"]


def test_statuses(tmp_path: Path) -> None:
    for t in range(3):
        write_plain(tmp_path / f"r{t}.csv", 64, t)
    lines = (tmp_path / "r1.csv").read_text().splitlines()
    (tmp_path / "r1.csv").write_text("\n".join(lines[:10]) + "\n")  # stopped early
    lines = (tmp_path / "r2.csv").read_text().splitlines()
    lines[-1] = lines[-1].rsplit(",", 1)[0] + ",inf"  # training loss blew up
    (tmp_path / "r2.csv").write_text("\n".join(lines) + "\n")
    entries = [(f"r{t}.csv", 64, {}) for t in range(3)]
    (tmp_path / "m.toml").write_text(manifest_toml(entries))
    data = build(tmp_path, name=NAME, manifest=tmp_path / "m.toml")
    assert [t.status for t in data.trials] == ["COMPLETE", "INCOMPLETE", "INFEASIBLE"]
    assert data.studies[0].train_steps == eval_steps(64)[-1]  # default: the longest run
    (tmp_path / "m.toml").write_text(manifest_toml(entries, train_steps=0)
                                     + '[[runs]]\nrun = "r0.csv"\nstatus = "INCOMPLETE"\n')
    data = build(tmp_path, name=NAME, manifest=tmp_path / "m.toml")
    assert [t.status for t in data.trials] == ["INCOMPLETE", "COMPLETE", "INFEASIBLE"]
    (tmp_path / "m.toml").write_text(manifest_toml(entries, train_steps=10**6))
    data = build(tmp_path, name=NAME, manifest=tmp_path / "m.toml")
    assert [t.status for t in data.trials] == ["INCOMPLETE", "INCOMPLETE", "INFEASIBLE"]


def test_manifest_formats_agree(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    for bs in (32, 64):
        write_plain(tmp_path / f"bs{bs}.csv", bs, 0)
    obj = {"workload": {"name": NAME, "train_steps": {"32": 5000, "64": 3000}},
           "metrics": {"val/classification_error": "1-val/accuracy"},
           "runs": [{"run": f"bs{bs}.csv", "batch_size": bs,
                     "parameters": {"learning_rate": 0.1, "momentum": 0.9}}
                    for bs in (32, 64)]}
    (tmp_path / "m.json").write_text(json.dumps(obj))
    (tmp_path / "m.yaml").write_text(
        f"workload:\n  name: {NAME}\n  train_steps: {{32: 5000, 64: 3000}}\n"
        "metrics:\n  val/classification_error: 1-val/accuracy\nruns:\n"
        + "".join(f"  - run: bs{bs}.csv\n    batch_size: {bs}\n"
                  "    parameters: {learning_rate: 0.1, momentum: 0.9}\n" for bs in (32, 64)))
    (tmp_path / "m.toml").write_text(
        f'[workload]\nname = "{NAME}"\ntrain_steps = {{ 32 = 5000, 64 = 3000 }}\n'
        '[metrics]\n"val/classification_error" = "1-val/accuracy"\n'
        + "".join(f'[[runs]]\nrun = "bs{bs}.csv"\nbatch_size = {bs}\n'
                  "parameters = { learning_rate = 0.1, momentum = 0.9 }\n" for bs in (32, 64)))
    hashes = set()
    for suffix in ("json", "yaml", "toml"):
        data = build(tmp_path, manifest=tmp_path / f"m.{suffix}")
        hashes.add(content_hash(data, validate(data)))
        assert [s.train_steps for s in data.studies] == [5000, 3000]
        accuracy = data.measurements[(data.studies[0].key, 1)].column("val/accuracy")
        assert accuracy[0].as_py() == pytest.approx(1 - 0.9)
    assert len(hashes) == 1


def test_example_manifest_is_valid(tmp_path: Path) -> None:
    obj = tomllib.loads(EXAMPLE)
    assert {"workload", "metrics", "runs"} <= set(obj)
    (tmp_path / "m.toml").write_text(EXAMPLE)
    m = load_run_manifest(tmp_path / "m.toml")
    assert m.name == "my_data/resnet_20/momentum" and [r.batch_size for r in m.runs] == [128, 256]


# ---------------------------------------------------------------------- malformed inputs
def _runs(folder: Path, n: int = 2) -> Path:
    for t in range(n):
        write_plain(folder / f"r{t}.csv", 32, t)
    (folder / "m.toml").write_text(manifest_toml([("r*.csv", 32, {})]))
    return folder / "m.toml"


def _edit(path: Path, line: int, text: str) -> None:
    lines = path.read_text().splitlines()
    lines[line - 1] = text
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("damage", "message"), [
    (lambda p: _edit(p, 1, "when,val/classification_error,train/cross_entropy_error"),
     r"r1\.csv, line 1: no step column: the header has when, val/classification_error, "
     r"train/cross_entropy_error; name the column .* --map COLUMN=step"),
    (lambda p: _edit(p, 5, "1800,0.5,oops"),
     r"r1\.csv, line 5: value 'oops' in column 'train/cross_entropy_error' is not a number; "
     r"fix the value, or leave the column out with --map 'train/cross_entropy_error='"),
    (lambda p: _edit(p, 4, "250,0.125,2.0"),
     r"r1\.csv, line 4: step 250 appears twice with different 'val/classification_error' "
     r"values \(.* on line 3, 0\.125 on line 4\); keep one row per step and metric"),
    (lambda p: _edit(p, 6, "3.5,0.1,0.2"),
     r"r1\.csv, line 6: step 3\.5 is not a non-negative integer"),
    (lambda p: _edit(p, 3, "450,0.5"),
     r"r1\.csv, line 3: 2 fields where the header has 3 columns"),
    (lambda p: p.write_text(""),
     r"r1\.csv, line 1: empty file"),
    (lambda p: _edit(p, 1, "step,val_xent,val/cross_entropy_error"),
     r"r1\.csv: metrics 'val_xent' and 'val/cross_entropy_error' would both become the "
     r"column 'val/cross_entropy_error'; keep one"),
])
def test_bad_csv_is_refused_and_store_unchanged(tmp_path: Path, home: Path, damage: object,
                                                message: str) -> None:
    manifest = _runs(tmp_path / "logs")
    damage(tmp_path / "logs" / "r1.csv")  # type: ignore[operator]
    before = snapshot(home)
    with pytest.raises(IngestError, match=message) as info:
        add(tmp_path / "logs", name=NAME, manifest=manifest, home=home)
    assert info.value.path == str(tmp_path / "logs" / "r1.csv")
    assert snapshot(home) == before


def test_missing_batch_size(tmp_path: Path, home: Path) -> None:
    manifest = _runs(tmp_path / "logs")
    manifest.write_text(manifest_toml([("r0.csv", 32, {})]))
    before = snapshot(home)
    with pytest.raises(IngestError, match=r"r1\.csv: run 'r1\.csv' has no batch size; give it "
                       r"in the manifest \(\[\[runs\]\] run = \"r1\.csv\", batch_size = N\)"):
        add(tmp_path / "logs", name=NAME, manifest=manifest, home=home)
    with pytest.raises(IngestError, match="has no batch size"):
        add(tmp_path / "logs", name=NAME, home=home)  # no manifest at all
    assert snapshot(home) == before


def test_unknown_format(tmp_path: Path, home: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "notes.txt").write_text("hello")
    before = snapshot(home)
    with pytest.raises(IngestError, match=r"logs: unknown format: found no study\.json.*pass "
                       "--log-format"):
        add(tmp_path / "logs", name=NAME, home=home)
    with pytest.raises(IngestError, match=r"unknown format: not a \.tar"):
        add(tmp_path / "logs" / "notes.txt", name=NAME, home=home)
    with pytest.raises(IngestError, match="unknown format 'excel'"):
        add(tmp_path / "logs", name=NAME, format="excel", home=home)
    assert snapshot(home) == before


def test_name_collisions(tmp_path: Path, home: Path) -> None:
    manifest = _runs(tmp_path / "logs")
    before = snapshot(home)
    with pytest.raises(StoreError, match="'cifar_10/resnet_8/sgd' is a workload of the "
                       "published release; choose another name"):
        add(tmp_path / "logs", name="cifar_10/resnet_8/sgd", manifest=manifest, home=home)
    with pytest.raises(StoreError, match="already has a workload 'other/mlp/sgd' with "
                       "different data; pass --replace"):
        add(tmp_path / "logs", name="other/mlp/sgd", manifest=manifest, home=home)
    with pytest.raises(IngestError, match="must be base_dir/model/optimizer"):
        add(tmp_path / "logs", name="just/two", manifest=manifest, home=home)
    with pytest.raises(IngestError, match="needs a name: pass --name"):
        add(tmp_path / "logs", manifest=manifest, home=home)
    assert snapshot(home) == before


def test_manifest_mistakes(tmp_path: Path) -> None:
    manifest = _runs(tmp_path / "logs")
    manifest.write_text(manifest_toml([("r*.csv", 32, {})]) + '[[runs]]\nrun = "r9.csv"\n')
    with pytest.raises(IngestError, match=r"m\.toml: runs\[1\]: run 'r9\.csv' matches no run "
                       r"of the source \(its runs: r0\.csv, r1\.csv\)"):
        build(tmp_path / "logs", name=NAME, manifest=manifest)
    manifest.write_text('[[runs]]\nrun = "r0.csv"\nbatchsize = 32\n')
    with pytest.raises(IngestError, match=r"runs\[0\]: unknown key 'batchsize'; the keys are"):
        build(tmp_path / "logs", name=NAME, manifest=manifest)
    manifest.write_text('[[runs]]\nrun = "r0.csv"\nbatch_size = 32\nstatus = "DONE"\n')
    with pytest.raises(IngestError, match=r"runs\[0\]\.status: 'DONE' is not one of COMPLETE"):
        build(tmp_path / "logs", name=NAME, manifest=manifest)
    manifest.write_text('[[runs]]\nrun = "r0.csv"\nbatch_size = 32\n'
                        '[[runs]]\nrun = "r1.csv"\nbatch_size = 32\ntrial_id = 4\n'
                        '[[runs]]\nrun = "r0.csv"\ntrial_id = 4\n')
    with pytest.raises(IngestError, match="both have trial_id 4"):
        build(tmp_path / "logs", name=NAME, manifest=manifest)
    manifest.write_text("[workload\n")
    with pytest.raises(IngestError, match=r"m\.toml, line 1: malformed TOML"):
        build(tmp_path / "logs", name=NAME, manifest=manifest)


def test_nan_spelled_in_csv_is_a_value(tmp_path: Path) -> None:
    manifest = _runs(tmp_path / "logs", n=1)
    _edit(tmp_path / "logs" / "r0.csv", 3, "450,nan,NaN")
    data = build(tmp_path / "logs", name=NAME, manifest=manifest)
    table = next(iter(data.measurements.values()))
    assert math.isnan(table.column("val/classification_error")[1].as_py())
    assert data.trials[0].status == "INFEASIBLE"


def test_source_from_the_manifest(tmp_path: Path) -> None:
    write_plain(tmp_path / "logs" / "a.csv", 32, 0)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "m.toml").write_text(
        manifest_toml([("a.csv", 32, {})], name=NAME, source="../logs"))
    data = build(manifest=tmp_path / "conf" / "m.toml")
    assert data.origin["source"] == str((tmp_path / "logs").resolve())
    (tmp_path / "logs" / "m.toml").write_text(manifest_toml([("a.csv", 32, {})], name=NAME))
    assert len(build(manifest=tmp_path / "logs" / "m.toml").trials) == 1  # beside the logs
