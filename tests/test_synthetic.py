"""Tests of the synthetic release generator (curvekit.release.synthetic).

Every test is offline and fast: the archives are tiny or a few studies large.
"""

from __future__ import annotations

import bz2
import hashlib
import inspect
import itertools
import json
import math
import re
import shutil
import subprocess
import tarfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import indexed_bzip2
import numpy as np
import pytest

from curvekit.errors import CurvekitError, ManifestError
from curvekit.release.manifest import Manifest, load_manifest
from curvekit.release.synthetic import (
    TINY_STUDIES,
    full_scale_kwargs,
    generate_archive,
    tiny_archive,
    write_manifest,
)

LAYOUT = re.compile(
    r"batch_science/(?P<study>(?P<workload>[a-z0-9_]+(?:/[a-z0-9_]+)?/[a-z0-9_]+/[a-z_]+)"
    r"/(?P<bs>\d+))/(?:study\.json|(?P<trial>\d+)/(?:metadata\.json|measurements\.csv))"
)
STUDY_FIELDS = {"batch_size", "dataset", "model", "optimizer", "early_stopping",
                "train_steps", "parameter_configs"}
METADATA_FIELDS = {"trial_id", "status", "steps", "parameters", "_internal_study_name",
                   "_internal_trial_id"}


@dataclass
class Archive:
    """An archive read back with tarfile: its members in order and its file contents."""

    path: Path
    manifest: Manifest
    members: list[tarfile.TarInfo]
    files: dict[str, bytes]

    def named(self, suffix: str) -> dict[str, bytes]:
        return {k: v for k, v in self.files.items() if k.endswith(suffix)}

    def json(self, suffix: str) -> dict[str, dict]:
        return {k: json.loads(v) for k, v in self.named(suffix).items()}

    def csv_rows(self) -> dict[str, list[dict[str, str]]]:
        """Every measurements.csv as a list of rows (column name -> text)."""
        out = {}
        for name, data in self.named("measurements.csv").items():
            header, *lines = data.decode().split("\n")
            lines = [line for line in lines if line]
            out[name] = [dict(zip(header.split(","), ln.split(","), strict=True)) for ln in lines]
        return out


def read(path: Path, manifest: Manifest) -> Archive:
    members, files = [], {}
    with tarfile.open(path, "r:bz2") as tf:
        for info in tf:
            members.append(info)
            if info.isfile():
                files[info.name] = tf.extractfile(info).read()
    return Archive(path, manifest, members, files)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Archive:
    path = tmp_path_factory.mktemp("tiny") / "tiny.tar.bz2"
    return read(path, tiny_archive(path))


@pytest.fixture(scope="module")
def shuffled(tmp_path_factory: pytest.TempPathFactory) -> Archive:
    path = tmp_path_factory.mktemp("shuffled") / "shuffled.tar.bz2"
    return read(path, tiny_archive(path, order="shuffled"))


def small(path: Path, **kwargs: object) -> Manifest:
    """Two workloads, a few trials per study, a few rows per trial."""
    options: dict = {"workloads": ["cifar_10/resnet_8/sgd", "lm1b/lstm/nesterov_momentum"],
                     "max_trials_per_study": 4, "evals_scale": 0.05, "jobs": 1, **kwargs}
    return generate_archive(path, **options)


# ------------------------------------------------------------------- reading back
def test_tiny_is_fast(tmp_path: Path) -> None:
    tiny_archive(tmp_path / "warm.tar.bz2")  # imports and caches out of the timing
    # CPU time, not the clock: other work on a busy machine does not lengthen it.
    start = time.process_time()
    tiny_archive(tmp_path / "t.tar.bz2", seed=5)
    assert time.process_time() - start < 1.0


def test_bzip2_tools_read_the_same_bytes(tmp_path: Path) -> None:
    # several bzip2 streams (small chunks): every reader must see them all
    path = tmp_path / "multi.tar.bz2"
    small(path, chunk_bytes=20_000)
    data = path.read_bytes()
    assert data.count(b"BZh9") >= 3
    expected = bz2.decompress(data)
    with indexed_bzip2.open(str(path), parallelization=2) as f:
        assert f.read() == expected
    if shutil.which("bzip2"):
        out = subprocess.run(["bzip2", "-dc", str(path)], capture_output=True, check=True)
        assert out.stdout == expected
    if shutil.which("tar"):
        out = subprocess.run(["tar", "tjf", str(path)], capture_output=True, check=True, text=True)
        with tarfile.open(path, "r:bz2") as tf:
            assert len(out.stdout.splitlines()) == len(tf.getnames())
    assert len(expected) % tarfile.RECORDSIZE == 0


def test_layout(tiny: Archive) -> None:
    names = {m.name for m in tiny.members}
    assert all(m.isdir() or m.isfile() for m in tiny.members)
    for m in tiny.members:
        parent = m.name.rsplit("/", 1)[0]
        assert m.name == "batch_science" or parent in names, f"no directory member for {m.name}"
        if m.isfile():
            assert LAYOUT.fullmatch(m.name), m.name
    studies = {LAYOUT.fullmatch(n)["study"] for n in tiny.files}
    for study in studies:
        doc = json.loads(tiny.files[f"batch_science/{study}/study.json"])
        assert doc["batch_size"] == int(study.rsplit("/", 1)[1])
        assert set(doc) >= STUDY_FIELDS
        assert doc["model"] == study.split("/")[-3] and doc["optimizer"] == study.split("/")[-2]
        for cfg in doc["parameter_configs"].values():
            assert cfg["type"] in {"DOUBLE", "INTEGER", "DISCRETE"}
            assert cfg["scale"] in {"LINEAR_SCALE", "LOG_SCALE", "REVERSE_LOG_SCALE", ""}
    for name, meta in tiny.json("metadata.json").items():
        assert set(meta) >= METADATA_FIELDS
        assert meta["trial_id"] == int(name.split("/")[-2])
        assert meta["status"] in {"COMPLETE", "INCOMPLETE", "INFEASIBLE"}
        assert isinstance(meta["_internal_trial_id"], int)
        assert isinstance(meta["_internal_study_name"], str)
        assert name.replace("metadata.json", "measurements.csv") in tiny.files


def test_manifest_counts_match_members(tiny: Archive) -> None:
    m = tiny.manifest
    counted: Counter[tuple[str, int, str]] = Counter()
    for name, meta in tiny.json("metadata.json").items():
        match = LAYOUT.fullmatch(name)
        counted[match["workload"], int(match["bs"]), meta["status"]] += 1
    for s in m.studies:
        for status in ("COMPLETE", "INCOMPLETE", "INFEASIBLE"):
            assert counted[s.workload, s.batch_size, status] == getattr(s, status)
    assert sum(counted.values()) == m.totals["trials"] == 48
    assert m.measurements == sum(len(rows) for rows in tiny.csv_rows().values())
    data = tiny.path.read_bytes()
    assert m.archive.sha256 == hashlib.sha256(data).hexdigest()
    assert m.archive.approx_size_bytes == len(data)
    assert m.archive.url == tiny.path.resolve().as_uri()
    assert m.archive.file_name == tiny.path.name
    assert m.dataset == "batch_science_synthetic"
    assert m.raw["citation"]["key"] == "shallue2018measuring"
    assert {w["name"]: w["batch_sizes"] for w in m.workloads} == TINY_STUDIES


def test_write_manifest_round_trip(tiny: Archive, tmp_path: Path) -> None:
    path = write_manifest(tiny.manifest, tmp_path / "m.json")
    again = Manifest.from_file(path)
    assert again == tiny.manifest and again.measurements == tiny.manifest.measurements


# ---------------------------------------------------------------------- the quirks
def _quirks(a: Archive) -> dict[str, bool]:
    studies = a.json("study.json")
    metas = a.json("metadata.json")
    csvs = a.named("measurements.csv")
    rows = a.csv_rows()
    headers = {d.split(b"\n", 1)[0] for d in csvs.values()}
    cells = {v for trial in rows.values() for row in trial for v in row.values()}
    file_names = [m.name for m in a.members if m.isfile()]
    depths = {len(LAYOUT.fullmatch(n)["workload"].split("/")) - 2 for n in file_names}
    train_steps = {n.rsplit("/", 1)[0]: s["train_steps"] for n, s in studies.items()}

    def study_of(name: str) -> str:
        return name.rsplit("/", 2)[0]

    def ids_have_gaps() -> bool:
        by_study: dict[str, list[int]] = {}
        for name, meta in metas.items():
            by_study.setdefault(study_of(name), []).append(meta["trial_id"])
        return any(max(ids) - min(ids) + 1 > len(ids) for ids in by_study.values())

    def irregular_steps() -> bool:
        diffs = [np.diff([int(r["step"]) for r in trial]) for trial in rows.values()]
        return any(len(set(d)) > 1 for d in diffs) and all((d > 0).all() for d in diffs)

    budget = [s for s, steps in train_steps.items() if steps == 0]
    return {
        "unsorted members": file_names != sorted(file_names),
        "base_dir depth 1 and 2": depths == {1, 2},
        "column orders differ": any(
            [c for c in h1.split(b",") if c in h2.split(b",")]
            != [c for c in h2.split(b",") if c in h1.split(b",")]
            for h1, h2 in itertools.combinations(headers, 2)),
        "column sets differ": len({frozenset(h.split(b",")) for h in headers}) > 1,
        "step not first": any(not h.startswith(b"step,") for h in headers),
        "nan": "nan" in cells,
        "inf": "inf" in cells,
        "-inf": "-inf" in cells,
        "header-only csv": any(d.count(b"\n") == 1 and d.endswith(b"\n") for d in csvs.values()),
        "no final newline": any(not d.endswith(b"\n") for d in csvs.values()),
        "irregular steps": irregular_steps(),
        "runs past train_steps": any(
            m["status"] == "COMPLETE" and 0 < train_steps[study_of(n)] < m["steps"]
            and int(rows[n.replace("metadata.json", "measurements.csv")][-1]["step"])
            > train_steps[study_of(n)]
            for n, m in metas.items()),
        "extra study.json field": any(set(s) - STUDY_FIELDS for s in studies.values()),
        "extra metadata.json field": any(set(m) - METADATA_FIELDS for m in metas.values()),
        "train_steps 0 without INCOMPLETE": bool(budget) and all(
            m["status"] != "INCOMPLETE" for n, m in metas.items() if study_of(n) in budget),
        "empty scale": any(c["scale"] == "" for s in studies.values()
                           for c in s["parameter_configs"].values()),
        "trial id gaps": ids_have_gaps(),
        "trial dirs unsorted": any(
            [int(n.split("/")[-2]) for n in file_names if study_of(n) == s and "meta" in n]
            != sorted(int(n.split("/")[-2]) for n in file_names
                      if study_of(n) == s and "meta" in n)
            for s in train_steps),
    }


QUIRKS = (
    "unsorted members", "base_dir depth 1 and 2", "column orders differ", "column sets differ",
    "step not first", "nan", "inf", "-inf", "header-only csv", "no final newline",
    "irregular steps", "runs past train_steps", "extra study.json field",
    "extra metadata.json field", "train_steps 0 without INCOMPLETE", "empty scale",
    "trial id gaps", "trial dirs unsorted",
)


@pytest.mark.parametrize("quirk", QUIRKS)
def test_tiny_has_every_quirk(tiny: Archive, quirk: str) -> None:
    found = _quirks(tiny)
    assert set(found) == set(QUIRKS)
    assert found[quirk], quirk


@pytest.mark.parametrize("seed", [1, 2])
def test_two_workloads_still_get_the_pinned_quirks(tmp_path: Path, seed: int) -> None:
    # two look-alike workloads, few trials: the quirks that depend on luck are pinned
    pair = ["mnist/fc_1024/sgd", "mnist/fc_64_64_64/sgd"]
    path = tmp_path / "pair.tar.bz2"
    manifest = generate_archive(path, workloads=pair, batch_sizes={p: [1024] for p in pair},
                                max_trials_per_study=3, evals_scale=0.05, seed=seed, jobs=1)
    found = _quirks(read(path, manifest))
    missing = [q for q, ok in found.items() if not ok and q != "base_dir depth 1 and 2"]
    assert not missing


def test_quirks_off_gives_a_clean_archive(tmp_path: Path) -> None:
    path = tmp_path / "clean.tar.bz2"
    a = read(path, small(path, quirks=False, order="walk"))
    found = _quirks(a)
    for quirk in ("nan", "inf", "-inf", "header-only csv", "no final newline",
                  "extra study.json field", "extra metadata.json field", "step not first",
                  "train_steps 0 without INCOMPLETE", "trial id gaps", "runs past train_steps"):
        assert not found[quirk], quirk
    assert found["irregular steps"]


def test_walk_order_keeps_studies_and_trials_together(tiny: Archive) -> None:
    names = [m.name for m in tiny.members]
    studies = [LAYOUT.fullmatch(n)["study"] for n in names if LAYOUT.fullmatch(n)]
    runs = [s for i, s in enumerate(studies) if i == 0 or studies[i - 1] != s]
    assert len(runs) == len(set(runs)) == 8, "a study's files are split"
    for i, name in enumerate(names):
        if name.endswith("metadata.json"):
            trial = name.rsplit("/", 1)[0]
            assert {names[i - 1], names[i + 1]} & {f"{trial}/measurements.csv"}
            assert f"{trial}" in names[i - 2 : i]


def test_shuffled_order_puts_directories_first_and_mixes_files(
    shuffled: Archive, tiny: Archive
) -> None:
    kinds = [m.isdir() for m in shuffled.members]
    assert kinds == sorted(kinds, reverse=True)
    files = [m.name for m in shuffled.members if m.isfile()]
    studies = [LAYOUT.fullmatch(n)["study"] for n in files]
    switches = sum(a != b for a, b in itertools.pairwise(studies))
    assert switches > len(files) / 2
    assert shuffled.manifest.studies == tiny.manifest.studies  # same trials, other order
    assert shuffled.manifest.measurements == tiny.manifest.measurements


# ---------------------------------------------------------------------- the values
def test_number_formats(tiny: Archive) -> None:
    evals = {5000, 10000, 25000, 50000}
    for name, trial in tiny.csv_rows().items():
        for row in trial:
            assert int(row["step"]) >= 0
            for col, text in row.items():
                if col == "step" or text in ("nan", "inf", "-inf"):
                    continue
                value = float(text)
                if col.endswith("classification_error"):
                    assert repr(value) == text
                    assert any(abs(value * n - round(value * n)) < 1e-6 for n in evals), text
                elif col.startswith("train/"):  # shortest float32 digits
                    assert float(np.float32(value)) == float(np.float32(text))
                    assert len(text.replace("0.", "").lstrip("0").replace(".", "")) <= 9, text
                else:  # a float32 value written as Python's repr of the float
                    assert repr(value) == text, (name, col, text)
                    assert float(np.float32(value)) == value, text


def test_statuses_behave(tiny: Archive) -> None:
    studies = {n.rsplit("/", 1)[0]: s for n, s in tiny.json("study.json").items()}
    rows = tiny.csv_rows()
    for name, meta in tiny.json("metadata.json").items():
        trial = rows[name.replace("metadata.json", "measurements.csv")]
        steps = [int(r["step"]) for r in trial]
        assert steps == sorted(set(steps))
        assert not steps or steps[-1] <= meta["steps"]
        train_steps = studies[name.rsplit("/", 2)[0]]["train_steps"]
        if meta["status"] == "COMPLETE":
            assert steps[-1] == meta["steps"] >= train_steps
        if meta["status"] == "INCOMPLETE":
            assert meta["steps"] < train_steps
        if meta["status"] != "INFEASIBLE":
            assert all(v not in ("nan", "inf", "-inf") for r in trial for v in r.values())
        params = meta["parameters"]
        assert params["learning_rate"] > 0
        assert ("momentum" in params) == (name.split("/")[-4] != "sgd")


def test_curves_look_like_training(tmp_path: Path) -> None:
    """Steps to val error < 0.3 shrink with batch size, perfectly at first, then less."""
    wl = "cifar_10/resnet_8/nesterov_momentum"
    path = tmp_path / "cifar.tar.bz2"
    manifest = generate_archive(path, workloads=[wl], batch_sizes={wl: [16, 256, 4096]},
                                trial_fraction=0.5, evals_scale=0.3, quirks=False, jobs=1)
    a = read(path, manifest)
    metas = a.json("metadata.json")
    best: dict[int, tuple[int, float]] = {}
    improved = []
    for name, trial in a.csv_rows().items():
        meta = metas[name.replace("measurements.csv", "metadata.json")]
        if meta["status"] != "COMPLETE":
            continue
        errors = [float(r["val/classification_error"]) for r in trial]
        improved.append(errors[-1] < errors[0] - 0.1)  # unless the learning rate is tiny
        hit = [int(r["step"]) for r, e in zip(trial, errors, strict=True) if e < 0.3]
        bs = int(name.split("/")[-3])
        p = meta["parameters"]
        if hit and (bs not in best or hit[0] < best[bs][0]):
            best[bs] = (hit[0], p["learning_rate"] / (1 - p["momentum"]))
    assert np.mean(improved) > 0.6
    assert set(best) == {16, 256, 4096}
    steps = {bs: s for bs, (s, _) in best.items()}
    assert steps[16] / steps[256] > 6  # near-perfect scaling (16x) below B_crit = 1024
    assert 1.2 < steps[256] / steps[4096] < steps[16] / steps[256]  # diminishing returns
    assert best[16][1] < best[256][1] < best[4096][1] * 2  # optimal effective LR grows


# ------------------------------------------------------------- scale and arguments
def test_deterministic_and_independent_of_jobs(tmp_path: Path) -> None:
    one = small(tmp_path / "a.tar.bz2", seed=3, chunk_bytes=30_000, jobs=1)
    two = small(tmp_path / "b.tar.bz2", seed=3, chunk_bytes=30_000, jobs=2)
    other = small(tmp_path / "c.tar.bz2", seed=4, chunk_bytes=30_000, jobs=1)
    assert one.archive.sha256 == two.archive.sha256
    assert one.measurements == two.measurements
    assert other.archive.sha256 != one.archive.sha256


@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_counts_the_members_written(tmp_path: Path, jobs: int) -> None:
    """generate-archive reports how far it is, as fetch and run do: ("generate", done,
    total) in archive members, from 0 to every member, after each chunk."""
    heard: list[tuple[str, int, int | None]] = []
    path = tmp_path / "p.tar.bz2"
    small(path, chunk_bytes=30_000, jobs=jobs,
          progress=lambda stage, done, total: heard.append((stage, done, total)))
    with tarfile.open(path, "r:bz2") as tf:
        members = len(tf.getmembers())
    assert {stage for stage, _, _ in heard} == {"generate"}
    assert {total for _, _, total in heard} == {members}
    done = [d for _, d, _ in heard]
    assert done[0] == 0 and done[-1] == members and done == sorted(done)
    assert len(done) > 3  # several chunks, each reported


def test_generate_archive_command_shows_its_progress_unless_quiet(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from curvekit.cli import main

    args = ["generate-archive", "--workload", "cifar_10/resnet_8/sgd", "--max-trials", "2",
            "--evals-scale", "0.02", "--jobs", "1"]
    shown = CliRunner().invoke(main, [*args, str(tmp_path / "a.tar.bz2")])
    assert shown.exit_code == 0, shown.output
    assert shown.stderr.startswith("Generating") and shown.stdout.startswith("Wrote ")
    quiet = CliRunner().invoke(main, [*args, str(tmp_path / "b.tar.bz2"), "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_trial_fraction_scales_published_counts(tmp_path: Path) -> None:
    pair = ["mnist/fc_1024/sgd", "lm1b/lstm/nesterov_momentum"]
    m = generate_archive(tmp_path / "f.tar.bz2", workloads=pair, trial_fraction=0.03,
                         evals_scale=0.02, quirks=False, jobs=1)
    published = {(s.workload, s.batch_size): s for s in load_manifest().studies}
    assert len(m.studies) == sum(s.workload in pair for s in published.values())
    for s in m.studies:
        pub = published[s.workload, s.batch_size]
        for status in ("INCOMPLETE", "INFEASIBLE"):
            assert getattr(s, status) == math.floor(getattr(pub, status) * 0.03 + 0.5)
        assert s.COMPLETE == max(1, math.floor(pub.COMPLETE * 0.03 + 0.5))  # noqa: SIM300


def test_max_trials_per_study_keeps_proportions(tmp_path: Path) -> None:
    m = small(tmp_path / "cap.tar.bz2", max_trials_per_study=5, quirks=False)
    published = {(s.workload, s.batch_size): s for s in load_manifest().studies}
    for s in m.studies:
        pub = published[s.workload, s.batch_size]
        assert s.total == 5
        for status in ("COMPLETE", "INCOMPLETE", "INFEASIBLE"):
            assert (getattr(s, status) > 0) == (getattr(pub, status) > 0)
        assert s.COMPLETE >= s.INCOMPLETE


def test_evals_scale_scales_rows(tmp_path: Path) -> None:
    few = small(tmp_path / "few.tar.bz2", evals_scale=0.02, quirks=False)
    more = small(tmp_path / "more.tar.bz2", evals_scale=0.08, quirks=False)
    assert 2.5 < more.measurements / few.measurements < 6


def test_bad_arguments_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no_such/model/sgd"):
        generate_archive(tmp_path / "x.tar.bz2", workloads=["no_such/model/sgd"])
    with pytest.raises(ManifestError, match="batch sizes"):
        generate_archive(tmp_path / "x.tar.bz2", workloads=["mnist/fc_1024/sgd"],
                         batch_sizes={"mnist/fc_1024/sgd": [3]})
    with pytest.raises(CurvekitError, match="trial_fraction"):
        generate_archive(tmp_path / "x.tar.bz2", trial_fraction=0)
    assert not list(tmp_path.iterdir())


def test_defaults_are_the_full_scale() -> None:
    params = inspect.signature(generate_archive).parameters
    for name, value in full_scale_kwargs().items():
        assert params[name].default == value
