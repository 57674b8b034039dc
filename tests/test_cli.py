"""The CLI end to end on a generated archive with every quirk: fetch, verify, info."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from curvekit.cli import main
from curvekit.release.manifest import Manifest
from curvekit.release.synthetic import tiny_archive, write_manifest


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cli")
    manifest = tiny_archive(tmp / "tiny.tar.bz2", order="shuffled")
    write_manifest(manifest, tmp / "tiny.manifest.json")
    result = CliRunner().invoke(main, ["fetch", "--home", str(tmp / "home"), "--archive",
                                       str(tmp / "tiny.tar.bz2"), "--manifest",
                                       str(tmp / "tiny.manifest.json")])
    assert result.exit_code == 0, result.output
    return tmp / "home"


def test_verify_passes_on_a_fresh_store(home: Path) -> None:
    result = CliRunner().invoke(main, ["verify", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("OK: 8 studies")


def test_info_formats(home: Path) -> None:
    runner = CliRunner()
    rows = json.loads(runner.invoke(main, ["info", "--home", str(home), "--format", "json"]).output)
    by_name = {r["workload"]: r for r in rows}
    manifest = Manifest.from_file(home.parent / "tiny.manifest.json")
    assert set(by_name) == {w["name"] for w in manifest.workloads}
    for w in manifest.workloads:
        assert by_name[w["name"]]["batch_sizes"] == w["batch_sizes"]
    assert sum(r["measurements"] for r in rows) == manifest.measurements
    assert "mnist_subsets/mnist_6875/simple_cnn_base/nesterov_momentum" in by_name
    assert "val/average_precision" in by_name["open_images_v4/resnet_50/nesterov_momentum"][
        "metrics"]
    assert not any("classification" in m for m in by_name["lm1b/lstm/nesterov_momentum"][
        "metrics"])
    csv = runner.invoke(main, ["info", "--home", str(home), "--format", "csv"]).output
    assert csv.splitlines()[0] == ("workload,batch_sizes,studies,trials,complete,incomplete,"
                                   "infeasible,metrics,measurements")
    table = runner.invoke(main, ["info", "--home", str(home)]).output
    assert table.splitlines()[1].startswith("-----")


def test_verify_reports_mismatches(home: Path, tmp_path: Path) -> None:
    copy = tmp_path / "home"
    shutil.copytree(home, copy, symlinks=True)
    store = (copy / "store").resolve()
    manifest = json.loads((store / "_manifest.json").read_text())
    manifest["studies"][0]["COMPLETE"] += 1
    manifest["totals"]["COMPLETE"] += 1
    manifest["totals"]["trials"] += 1
    manifest["measurements"] += 5
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    victim = next((store / "measurements").rglob("*.parquet"))
    victim.write_bytes(b"not parquet")
    result = CliRunner().invoke(main, ["verify", "--home", str(copy), "--manifest",
                                       str(tmp_path / "m.json")])
    assert result.exit_code == 1
    s0 = manifest["studies"][0]
    assert f"{s0['workload']} batch size {s0['batch_size']}: " in result.output
    assert "unreadable Parquet file" in result.output
    assert "manifest says" in result.output


def test_no_store_yet_says_how_to_fetch(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["info", "--home", str(tmp_path)])
    assert result.exit_code == 1
    assert "curvekit fetch" in result.output
