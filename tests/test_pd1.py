"""PD1 in the store: the generator's layout, the faithful mapping, fetch, verify, commands.

Every test reads files forged in PD1's published layout (``curvekit.release.pd1_synthetic``);
the mapping is checked against a plain reading of the generated lines, line by line.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import curvekit
from curvekit import structured
from curvekit.cli import main
from curvekit.errors import ArchiveError
from curvekit.goals import above, default_goal
from curvekit.release.pd1 import (
    DATA_FILES,
    ID_BLOCK,
    METRIC_NAMES,
    SEARCH_SPACE,
    Pd1Manifest,
    file_hashes,
    load_pd1_manifest,
)
from curvekit.release.pd1_synthetic import generate_pd1
from curvekit.release.synthetic import tiny_archive
from curvekit.selection import Selection
from curvekit.store.pd1 import convert_pd1
from tests.conftest import snapshot
from tests.httpserver import serve, unused_port

POINTS = 6


@pytest.fixture(scope="module")
def pd1(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Pd1Manifest]:
    path = tmp_path_factory.mktemp("pd1") / "pd1.tar.gz"
    return path, generate_pd1(path, points=POINTS, evals_scale=0.3)


@pytest.fixture(scope="module")
def home(pd1: tuple[Path, Pd1Manifest], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path, manifest = pd1
    out = tmp_path_factory.mktemp("home")
    convert_pd1(path, out, manifest=manifest, sha256=manifest.sha256 or "", md5=manifest.md5)
    return out


def members(path: Path) -> dict[str, bytes | None]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else None)  # type: ignore[union-attr]
                for m in tar.getmembers()}


def lines(path: Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Every data line of a PD1 archive, read plainly: (file name, line number, object)."""
    for name, data in members(path).items():
        base = name.rpartition("/")[2]
        if base in DATA_FILES:
            assert data is not None
            for n, line in enumerate(gzip.decompress(data).splitlines(), 1):
                yield base, n, json.loads(line)


# -- the generator: the published layout and its quirks --------------------------------------

def test_generator_writes_the_published_layout(pd1: tuple[Path, Pd1Manifest]) -> None:
    path, manifest = pd1
    found = members(path)
    assert found["pd1"] is None  # the top folder
    assert {"pd1/README.txt", "pd1/LICENSE"} <= set(found)
    assert {f"pd1/{f}" for f in DATA_FILES} <= set(found)
    configs = [n for n in found if n.endswith(".json")]
    assert len(configs) == 24 and all(json.loads(found[n] or b"") for n in configs)
    for f in DATA_FILES:
        assert (found[f"pd1/{f}"] or b"")[:2] == b"\x1f\x8b"  # each data file is gzip
    assert file_hashes(path) == (manifest.md5, manifest.sha256)
    by_file: dict[str, int] = {}
    for f, _, _ in lines(path):
        by_file[f] = by_file.get(f, 0) + 1
    assert by_file == {f"pd1_{k.removesuffix('_lines')}_results.jsonl.gz": v
                       for k, v in manifest.counts.items() if k.endswith("_lines")}


def test_generator_is_deterministic(tmp_path: Path) -> None:
    a = generate_pd1(tmp_path / "a.tar.gz", points=2, evals_scale=0.2)
    b = generate_pd1(tmp_path / "b.tar.gz", points=2, evals_scale=0.2)
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    assert a.counts == b.counts


def test_generator_columns_types_and_quirks(pd1: tuple[Path, Pd1Manifest]) -> None:
    path, manifest = pd1
    empty = partial = extreme = 0
    null_elements = omitted = 0
    uniref_epochs: list[list[int | None]] = []
    points: dict[tuple[str, str], set[tuple[float, ...]]] = {}
    groups: dict[str, set[str]] = {}
    for f, _, obj in lines(path):
        assert isinstance(obj["dataset"], str) and isinstance(obj["model"], str)
        assert obj["status"] in ("done", "diverged")
        assert isinstance(obj["trial_dir"], str) and isinstance(obj["study_dir"], str)
        assert isinstance(obj["hparams"], dict) and obj["hparams"]["batch_size"] > 0
        assert obj["study_group"].split(",")[-1] == str(obj["hps.batch_size"])
        steps = obj["global_step"]
        groups.setdefault(f, set()).add(obj["study_group"])
        tuned = tuple(obj[k] for k in ("hps.lr_hparams.initial_value", "hps.lr_hparams.power",
                                       "hps.lr_hparams.decay_steps_factor",
                                       "hps.opt_hparams.momentum"))
        assert 1e-5 <= tuned[0] <= 10 and 0 <= tuned[3] < 1  # momentum is beta itself
        points.setdefault((f, obj["study_group"]), set()).add(tuned)
        if steps is None:
            empty += 1
            assert obj["status"] == "diverged"
            assert all(obj.get(a) is None for a in ("epoch", "train_cost", "valid/error_rate"))
            assert obj["best_valid/error_rate"] is None
            continue
        assert all(isinstance(s, int) for s in steps)
        for name in ("epoch", "eval_time", "train_cost", "valid/error_rate", "train/ce_loss"):
            assert len(obj[name]) == len(steps)
        null_elements += sum(v is None for v in obj["train/ce_loss"])
        if obj["dataset"] in ("imagenet", "lm1b", "translate_wmt", "uniref50"):
            omitted += "test/error_rate" not in obj
            assert obj.get("test/error_rate") is None
        else:
            assert len(obj["test/error_rate"]) == len(steps)
        if obj["dataset"] == "uniref50":
            uniref_epochs.append(obj["epoch"])
        if obj["status"] == "diverged":
            partial += 1
        extreme += max(obj["train_cost"]) > 1e4 and obj["status"] == "done"
        assert isinstance(obj["best_valid/error_rate"], float)
        assert isinstance(obj["best_valid/error_rate_index"], int)
    assert empty and partial and null_elements and omitted
    assert sum(1 for e in uniref_epochs if e[-1] is None) > 0
    complete = [e for e in uniref_epochs if e[-1] is not None and len(e) == 22]
    assert complete and all(e[:-1] == [0] * 21 and e[-1] == 1 for e in complete)
    # ImageNet ResNet-50 at 1024: only in unmatched phase 0
    lonely = "imagenet_resnet50,imagenet,resnet,resnet50,1024"
    assert [f for f, g in groups.items() if lonely in g] == [DATA_FILES[2]]
    # matched phase 1 runs the matched phase-0 points again
    for (f, group), seen in points.items():
        if f == DATA_FILES[0]:
            assert seen <= points[(DATA_FILES[1], group)]
    assert manifest.counts["matched_without_evaluations"] == sum(
        1 for f, _, o in lines(path) if f in DATA_FILES[:2] and o["global_step"] is None)


# -- the mapping: every line, every value ----------------------------------------------------

def test_every_line_is_a_trial_with_its_values(pd1: tuple[Path, Pd1Manifest],
                                               home: Path) -> None:
    path, _ = pd1
    con = duckdb.connect()
    root = home / "store"
    trials = {r[0]: r[1:] for r in con.sql(
        f"select trial_id, base_dir, model, batch_size, status, steps, n_measurements "
        f"from read_parquet('{root}/trials/**/*.parquet', hive_partitioning=true)").fetchall()}
    params = {(r[0], r[1]): r[2:] for r in con.sql(
        f"select trial_id, name, number, text from read_parquet("
        f"'{root}/parameters/**/*.parquet', hive_partitioning=true)").fetchall()}
    rows: dict[tuple[int, str], list[tuple[int, float | None]]] = {}
    for tid, step, metric, value in con.sql(
            f"select trial_id, step, metric, value from read_parquet("
            f"'{root}/measurements/**/*.parquet', hive_partitioning=true) "
            "order by trial_id, metric, step").fetchall():
        rows.setdefault((tid, metric), []).append((step, value))
    n = 0
    for f, line, obj in lines(path):
        n += 1
        tid = (DATA_FILES.index(f) + 1) * ID_BLOCK + line
        base_dir, model, batch, status, steps, evals = trials[tid]
        assert base_dir == f"pd1/{obj['dataset']}"
        act = obj.get("hps.activation_fn")
        assert model == (f"{obj['model']}_{act}" if act else obj["model"])
        assert batch == obj["hps.batch_size"]
        assert status == {"done": "COMPLETE", "diverged": "INFEASIBLE"}[obj["status"]]
        assert evals == len(obj["global_step"] or [])
        assert steps == max(obj["global_step"] or [0])
        assert params[(tid, "learning_rate")][0] == obj["hps.lr_hparams.initial_value"]
        assert params[(tid, "momentum")][0] == obj["hps.opt_hparams.momentum"]  # beta
        assert params[(tid, "source")][1] == f"pd1/{f}"
        assert params[(tid, "phase")][0] == int(f.split("phase")[1][0])
        assert params[(tid, "trial_dir")][1] == obj["trial_dir"]
        for name, values in obj.items():
            if name not in ("epoch", "train_cost", "learning_rate", *METRIC_NAMES) \
                    or not isinstance(values, list) or name.startswith("hps"):
                continue
            stored = rows.get((tid, METRIC_NAMES.get(name, name)), [])
            assert [s for s, _ in stored] == obj["global_step"]  # step = global_step
            for (_, got), want in zip(stored, values, strict=True):
                assert (got is None) if want is None else got == want  # nulls stay missing
        if obj["global_step"] is None:
            assert not any(k[0] == tid for k in rows)
    assert n == len(trials)


def test_studies_keep_the_task_and_the_search_space(home: Path) -> None:
    frame = curvekit.query("select base_dir, model, batch_size, parameter_configs, extra "
                           "from studies order by all", home)
    assert frame.height == 24
    for row in frame.to_dicts():
        assert json.loads(row["parameter_configs"]) == json.loads(
            structured.dumps(SEARCH_SPACE))
        extra = json.loads(row["extra"])
        assert extra["source"] == "pd1"
        assert extra["study_group"].split(",")[1] == row["base_dir"].removeprefix("pd1/")
        assert extra["hps"]["hps.batch_size"] == row["batch_size"]
    metrics = curvekit.query(
        "select distinct base_dir, metric from measurements where metric like 'test/%'", home)
    assert set(metrics["base_dir"]) == {"pd1/cifar10", "pd1/cifar100", "pd1/fashion_mnist",
                                        "pd1/mnist", "pd1/svhn_no_extra"}
    epochs = curvekit.query(
        "select metric from measurements where metric = 'epoch' limit 1", home)
    assert epochs.height == 1  # epoch kept as a measurement, never the step axis


@pytest.mark.slow
def test_member_order_does_not_change_the_store(tmp_path: Path) -> None:
    tables = []
    for order in ("published", "shuffled"):
        path = tmp_path / f"{order}.tar.gz"
        m = generate_pd1(path, points=2, evals_scale=0.2, order=order)  # type: ignore[arg-type]
        convert_pd1(path, tmp_path / order, manifest=m, sha256=m.sha256 or "")
        tables.append([curvekit.query(f"select * from {t} order by all", tmp_path / order)
                       for t in ("trials", "parameters", "measurements", "studies")])
    for a, b in zip(*tables, strict=True):
        assert a.equals(b)


def _archive(path: Path, lines_by_file: dict[str, list[bytes]]) -> Path:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for f in DATA_FILES:
            data = gzip.compress(b"".join(x + b"\n" for x in lines_by_file.get(f, [])))
            info = tarfile.TarInfo(f"pd1/{f}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(raw.getvalue())
    return path


def _line(values: list[float | None], *, status: str = "done", batch: int = 256,
          steps: list[int] | None = None) -> bytes:
    steps = steps or [100 * (i + 1) for i in range(len(values))]
    obj = {"dataset": "mnist", "model": "simple_cnn", "status": status,
           "study_group": f"mnist_simple_cnn,mnist,simple_cnn,simple_cnn,{batch}",
           "hps.batch_size": batch, "global_step": steps, "valid/error_rate": values,
           "hps.lr_hparams.initial_value": 0.1, "hps.opt_hparams.momentum": 0.9}
    return json.dumps(obj).encode()


def _manifest() -> Pd1Manifest:
    data = load_pd1_manifest().to_dict()
    data["counts"] = {}
    return Pd1Manifest.from_dict(data)


@settings(max_examples=10, deadline=None)
@given(st.lists(st.one_of(st.none(), st.just(math.nan),
                          st.floats(0, 1, allow_nan=False)), min_size=1, max_size=8),
       st.floats(0.05, 0.95))
def test_a_null_or_nan_never_satisfies_a_goal(tmp_path_factory: pytest.TempPathFactory,
                                              values: list[float | None], goal: float) -> None:
    tmp = tmp_path_factory.mktemp("goal")
    # a second trial that never reaches any goal drawn: the metric has a value
    path = _archive(tmp / "pd1.tar.gz", {DATA_FILES[1]: [_line(values), _line([0.99])]})
    convert_pd1(path, tmp / "home", manifest=_manifest(), sha256="0" * 64)
    store = curvekit.open(tmp / "home")
    result = curvekit.steps_to_result(store, Selection(
        "pd1/mnist/simple_cnn/nesterov_momentum", "val/classification_error", goal),
        explain=False)
    # the definition, read plainly: the first step whose value is a number below the goal
    want = next((100 * (i + 1) for i, v in enumerate(values)
                 if v is not None and not math.isnan(v) and v < goal), None)
    got = result["step"].to_list() if result.height else []
    assert got == ([want] if want is not None else [])
    store.close()


def test_bad_lines_are_refused_naming_member_and_line_and_lose_nothing(
        pd1: tuple[Path, Pd1Manifest], tmp_path: Path) -> None:
    path, manifest = pd1
    home = tmp_path / "home"
    convert_pd1(path, home, manifest=manifest, sha256=manifest.sha256 or "")
    before = snapshot(home)
    good = _line([0.5, 0.4])
    cases = {
        b"{not json": "line 2: not JSON",
        _line([0.5], steps=[1, 2]): "'valid/error_rate' has 1 values, 'global_step' 2",
        _line([0.5], steps=[-1]): "global_step -1 is not a whole number",
        _line(["x"]): "holds 'x', expected numbers",  # type: ignore[list-item]
        b"[1, 2]": "expected a JSON object",
    }
    for bad, words in cases.items():
        broken = _archive(tmp_path / "bad.tar.gz", {DATA_FILES[0]: [good, bad]})
        with pytest.raises(ArchiveError, match=r"pd1_matched_phase0_results\.jsonl\.gz") as err:
            convert_pd1(broken, home, manifest=manifest, sha256="1" * 64)
        assert words in str(err.value)
        assert snapshot(home) == before
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(ArchiveError, match="not a readable PD1 archive"):
        convert_pd1(tmp_path / "junk.tar.gz", home, manifest=manifest, sha256="1" * 64)
    missing = _archive(tmp_path / "m.tar.gz", {})
    with tarfile.open(missing, "r:gz") as tar:
        names = tar.getnames()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo("pd1/README.txt")
        tar.addfile(info, io.BytesIO(b""))
    (tmp_path / "m.tar.gz").write_bytes(raw.getvalue())
    with pytest.raises(ArchiveError, match="a PD1 archive holds all four data files"):
        convert_pd1(tmp_path / "m.tar.gz", home, manifest=manifest, sha256="1" * 64)
    assert len(names) == 4 and snapshot(home) == before


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "parent", "absolute", "twice"])
def test_hostile_members_are_refused(kind: str, tmp_path: Path) -> None:
    raw = io.BytesIO()
    data = gzip.compress(_line([0.5]) + b"\n")
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for f in DATA_FILES:
            info = tarfile.TarInfo(f"pd1/{f}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        bad = tarfile.TarInfo({"parent": "pd1/../../x", "absolute": "/etc/x"}.get(
            kind, f"pd1/{DATA_FILES[0]}" if kind == "twice" else "pd1/link"))
        if kind in ("symlink", "hardlink"):
            bad.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
            bad.linkname = "/etc/passwd"
            tar.addfile(bad)
        else:
            bad.size = len(data)
            tar.addfile(bad, io.BytesIO(data))
    path = tmp_path / "pd1.tar.gz"
    path.write_bytes(raw.getvalue())
    words = {"symlink": "a link or a device", "hardlink": "a link or a device",
             "parent": "leaves the archive's folder", "absolute": "leaves the archive's folder",
             "twice": "appears twice"}[kind]
    with pytest.raises(ArchiveError, match=words):
        convert_pd1(path, tmp_path / "home", manifest=_manifest(), sha256="3" * 64)
    assert not (tmp_path / "home" / "store").exists()
    assert not any(p.name == "x" for p in tmp_path.rglob("x"))


# -- fetch: download, checksums, beside the release ------------------------------------------

def _unpinned(manifest: Pd1Manifest, url: str) -> Pd1Manifest:
    """A manifest like the bundled one: the md5 known, no sha256."""
    data = manifest.to_dict()
    data["archive"] = {**data["archive"], "sha256": None, "url": url}
    return Pd1Manifest.from_dict(data)


def test_fetch_pd1_downloads_records_sha256_and_checks_it(
        pd1: tuple[Path, Pd1Manifest], tmp_path: Path) -> None:
    path, manifest = pd1
    data = path.read_bytes()
    home = tmp_path / "home"
    with serve(data) as server:
        m = _unpinned(manifest, server.url("/pd1.tar.gz"))
        mfile = tmp_path / "m.json"
        mfile.write_text(structured.dumps(m.to_dict()))
        args = ["fetch", "--home", str(home), "--dataset", "pd1", "--manifest", str(mfile)]
        server.state.mode, server.state.break_after = "break", len(data) // 2
        broken = CliRunner().invoke(main, [*args, "--quiet"])
        assert broken.exit_code == 1 and "resume" in broken.output
        server.state.mode = "normal"
        ok = CliRunner().invoke(main, [*args, "--quiet"])
        assert ok.exit_code == 0, ok.output
        assert server.state.hits[-1].range == f"bytes={len(data) // 2}-"
        assert "No sha256 is published for PD1" in ok.output and "now recorded" in ok.output
        record = json.loads((home / "downloads" / "pd1.tar.gz.sha256.json").read_text())
        assert record["sha256"] == manifest.sha256 and record["md5"] == manifest.md5
        again = CliRunner().invoke(main, [*args, "--quiet"])
        assert "Nothing to do" in again.output
        hits = len(server.state.hits)
        # forced: the cached file is checked against the recorded sha256, not downloaded
        forced = CliRunner().invoke(main, [*args, "--quiet", "--force"])
        assert forced.exit_code == 0, forced.output
        assert "recorded at the first download" in forced.output
        assert len(server.state.hits) == hits
        before = snapshot(home)
        # a server sending other bytes: the md5 does not match, nothing changes
        (home / "downloads" / "pd1.tar.gz").unlink()
        server.state.mode = "wrong-content"
        bad = CliRunner().invoke(main, [*args, "--quiet", "--force"])
    assert bad.exit_code == 1
    assert "PD1's known md5" not in bad.output or "expected" in bad.output
    assert "expected" in bad.output and "got" in bad.output
    after = snapshot(home)
    before.pop("downloads/pd1.tar.gz")
    assert after == before


def test_fetch_pd1_offline_names_url_and_archive(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{unused_port()}/pd1.tar.gz"
    result = CliRunner().invoke(main, ["fetch", "--home", str(tmp_path), "--dataset", "pd1",
                                       "--url", url, "--quiet"])
    assert result.exit_code == 1
    assert url in result.output and "--archive" in result.output


def test_fetch_pd1_refuses_a_file_without_the_known_md5(pd1: tuple[Path, Pd1Manifest],
                                                        tmp_path: Path) -> None:
    path, manifest = pd1
    result = CliRunner().invoke(main, ["fetch", "--home", str(tmp_path / "h"), "--dataset",
                                       "pd1", "--archive", str(path), "--quiet"])
    assert result.exit_code == 1
    assert "e04c789cff8d5ddc9f2301e2ac02d0e3" in result.output  # the known md5, expected
    assert manifest.md5 in result.output and f"--sha256 {manifest.sha256}" in result.output
    assert path.is_file()  # a local copy is left in place
    pinned = CliRunner().invoke(main, ["fetch", "--home", str(tmp_path / "h"), "--dataset",
                                       "pd1", "--archive", str(path), "--quiet",
                                       "--sha256", manifest.sha256 or ""])
    assert pinned.exit_code == 0, pinned.output
    assert "the one you pinned" in pinned.output


def test_a_local_copy_is_checked_by_its_md5_and_its_sha256_said(
        pd1: tuple[Path, Pd1Manifest], tmp_path: Path) -> None:
    path, manifest = pd1
    mfile = tmp_path / "m.json"
    mfile.write_text(structured.dumps(_unpinned(manifest, "http://127.0.0.1:9/x").to_dict()))
    out = CliRunner().invoke(main, ["fetch", "--home", str(tmp_path / "h"), "--dataset",
                                    "pd1", "--archive", str(path), "--manifest", str(mfile),
                                    "--quiet"])
    assert out.exit_code == 0, out.output
    assert "none was recorded by a download here" in out.output
    assert f"this file's sha256 is {manifest.sha256}" in out.output
    assert not (tmp_path / "h" / "downloads" / "pd1.tar.gz.sha256.json").exists()


def test_generate_archive_writes_a_pd1_look_alike(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["generate-archive", "--dataset", "pd1", "--points", "1",
                                    "--evals-scale", "0.1", str(tmp_path / "p.tar.gz")])
    assert out.exit_code == 0, out.output
    m = load_pd1_manifest(tmp_path / "p.tar.gz.manifest.json")
    assert m.dataset == "pd1_synthetic" and m.counts["matched_phase1_lines"] == 23
    assert file_hashes(tmp_path / "p.tar.gz")[0] == m.md5


@pytest.mark.slow
def test_pd1_lives_beside_the_release_and_survives_its_refetch(
        pd1: tuple[Path, Pd1Manifest], tmp_path: Path) -> None:
    path, manifest = pd1
    home = tmp_path / "home"
    tiny = tiny_archive(tmp_path / "tiny.tar.bz2")
    curvekit.fetch(home=home, archive=tmp_path / "tiny.tar.bz2", manifest=tiny)
    result = curvekit.fetch(home=home, dataset="pd1", archive=path, manifest=manifest)
    assert result.action == "converted"
    workloads = curvekit.open(home).workloads()
    assert any(w.startswith("pd1/") for w in workloads)
    assert any(not w.startswith("pd1/") for w in workloads)
    frame = curvekit.datasets(home)
    # both are look-alikes written by the generators, which the listing says
    assert frame["in_store"].to_list() == [False, False]
    assert frame["generated"].to_list() == [True, True]
    again = curvekit.fetch(home=home, archive=tmp_path / "tiny.tar.bz2", manifest=tiny,
                           force=True)
    assert sorted(curvekit.open(home).workloads()) == sorted(workloads)
    assert again.metadata["counts"]["trials"] == (
        tiny.totals["trials"] + sum(manifest.counts[k] or 0 for k in manifest.counts
                                    if k.endswith("_lines")))
    report = curvekit.verify(curvekit.open(home))
    assert report.ok, report.problems
    # PD1 again: its workloads are replaced, the release's kept
    curvekit.fetch(home=home, dataset="pd1", archive=path, manifest=manifest, force=True)
    assert sorted(curvekit.open(home).workloads()) == sorted(workloads)
    assert curvekit.verify(curvekit.open(home)).ok


def test_datasets_lists_the_releases(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["datasets", "--home", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "pd1: PD1" in out.output and "CC-BY 4.0" in out.output
    assert "not in the store: curvekit fetch --dataset pd1" in out.output
    assert "http://storage.googleapis.com/gresearch/pint/pd1.tar.gz" in out.output
    rows = json.loads(CliRunner().invoke(main, ["datasets", "--home", str(tmp_path),
                                                "--format", "json"]).output)
    assert [r["dataset"] for r in rows] == ["batch_science", "pd1"]
    assert rows[1]["size_bytes"] is None and rows[0]["size_bytes"] == 802_000_000
    bad = CliRunner().invoke(main, ["fetch", "--home", str(tmp_path), "--dataset", "lcbench"])
    assert bad.exit_code == 1 and "batch_science, pd1" in bad.output


# -- verify and the commands ----------------------------------------------------------------

def test_verify_checks_the_known_counts_and_says_what_it_cannot(
        pd1: tuple[Path, Pd1Manifest], home: Path, tmp_path: Path) -> None:
    ok = CliRunner().invoke(main, ["verify", "--home", str(home)])
    assert ok.exit_code == 0, ok.output
    assert "5 PD1 counts" in ok.output
    path, _ = pd1
    real = tmp_path / "real"  # the bundled manifest: the real file's counts, some unknown
    convert_pd1(path, real, manifest=load_pd1_manifest(), sha256="2" * 64)
    bad = CliRunner().invoke(main, ["verify", "--home", str(real)])
    assert bad.exit_code == 1
    assert "PD1 matched phase-0 lines" in bad.output and "count is 2277" in bad.output
    assert "count is 9200" in bad.output and "count is 1348" in bad.output
    assert "Not checked: unmatched phase-0 lines" in bad.output
    listed = curvekit.datasets(real).row(1, named=True)  # converted as PD1 itself
    assert listed["in_store"] and not listed["generated"] and listed["workloads"] == 13


def test_every_command_works_on_pd1(home: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    w = "pd1/imagenet/resnet/nesterov_momentum"
    info = runner.invoke(main, ["info", "--home", str(home)])
    assert info.exit_code == 0 and w in info.output
    q = runner.invoke(main, ["query", "--home", str(home), "--format", "csv",
                             "select count(*) as n from trials where base_dir like 'pd1/%'"])
    assert q.exit_code == 0, q.output
    goal = default_goal(curvekit.open(home), w)
    assert goal.source == "pd1-rule" and goal.metric == "val/classification_error"
    for command in (["steps-to-result", w, "--metric", "val/classification_error",
                     "--goal", str(goal.goal)],
                    ["best", w, "--metric", "val/classification_error"]):
        out = runner.invoke(main, [*command, "--home", str(home), "--format", "csv"])
        assert out.exit_code == 0, out.output
        batch_sizes = pl.read_csv(io.StringIO(out.stdout))["batch_size"].to_list()
        assert batch_sizes == [256, 512, 1024]  # the default goal: every batch size reaches it
    fit = runner.invoke(main, ["fit", "--all", "--home", str(home), "--format", "json"])
    assert fit.exit_code == 0, fit.output
    rows = {r["workload"]: r for r in json.loads(fit.stdout)}
    note = rows["pd1/cifar10/wide_resnet/nesterov_momentum"]["note"]
    assert "With 2 batch sizes the data identify only the scaling between them" in note
    assert "B_crit cannot be identified" in note


@pytest.mark.slow
def test_plot_and_report_on_pd1(home: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    w = "pd1/imagenet/resnet/nesterov_momentum"
    goal = default_goal(curvekit.open(home), w).goal
    out = runner.invoke(main, ["plot", "steps-to-result", w, "--home", str(home),
                               "--metric", "val/classification_error", "--goal", str(goal),
                               "--out", str(tmp_path / "s.svg")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "s.svg").stat().st_size > 1000
    rep = runner.invoke(main, ["report", "--home", str(home), "--out", str(tmp_path / "r"),
                               "--bootstrap", "0", "--no-figures", "--quiet",
                               "--workload", w])
    assert rep.exit_code == 0, rep.output
    page = next((tmp_path / "r" / "workloads").glob("pd1~imagenet*.html")).read_text()
    assert "val/classification_error" in page


@settings(max_examples=200)
@given(st.floats(1e-6, 1e6, allow_nan=False))
def test_the_pd1_goal_lies_just_above_the_worst_best(value: float) -> None:
    goal = above(value)
    assert goal > value
    digits = f"{goal:.1e}"  # two significant figures say it exactly
    assert float(digits) == goal
    mantissa, exponent = digits.split("e")
    smaller = float(f"{float(mantissa) - 0.1:.1f}e{exponent}")
    assert smaller <= value
