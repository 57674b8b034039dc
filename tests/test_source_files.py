"""What ``curvekit add`` reads from a source folder: regular files inside it, never through a
link, never a FIFO, device or socket (docs/security.md, "`curvekit add`: the files it
reads"). Every importer reaches its files through ``curvekit.ingest.files.SourceFiles``;
these tests replay the attacks on each format's files, and read the package's source to
check that no other module of ``curvekit.ingest`` opens a file itself."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import socket
import struct
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curvekit.cli import main
from curvekit.errors import IngestError, IngestWarning
from curvekit.ingest import files as files_module
from curvekit.ingest.add import add, build
from curvekit.ingest.files import MAX_DEPTH, MAX_SIDE_FILE, SourceFiles
from curvekit.ingest.manifest import MAX_MANIFEST, load_run_manifest
from curvekit.ingest.tensorboard import record
from tests.conftest import ROOT, small_members, snapshot
from tests.deadline import deadline
from tests.logfiles import write_lightning, write_plain
from tests.logformats import (
    write_dvclive,
    write_jsonl,
    write_mlflow_db,
    write_sacred_run,
    write_timm,
    write_ultralytics,
    write_wandb08,
)

NAME = "mine/mlp/sgd"
PACKAGE = Path(__file__).resolve().parent.parent / "curvekit"
RUNS_TOML = '[[runs]]\nrun = "*"\nbatch_size = 32\n'


# -- one small source per importer, and the file of it an attacker replaces ----------------

def _manifest(source: Path) -> dict[str, object]:
    path = source.parent / f"{source.name}.toml"
    path.write_text(RUNS_TOML)
    return {"manifest": path}


def _csv(root: Path) -> tuple[Path, Path, dict[str, object]]:
    source = root / "logs"
    return source, write_plain(source / "run.csv", 32, 1), _manifest(source)


def _lightning_hparams(root: Path) -> tuple[Path, Path, dict[str, object]]:
    source = root / "logs"
    write_lightning(source / "version_0", 32, 1, 0.1)
    return source, source / "version_0" / "hparams.yaml", {}


def _scalar_event(step: int, value: float) -> bytes:
    value_msg = b"\x0a\x08val_loss\x15" + struct.pack("<f", value)
    summary = b"\x0a" + bytes([len(value_msg)]) + value_msg
    return b"\x10" + bytes([step]) + b"\x2a" + bytes([len(summary)]) + summary


def _events(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(record(_scalar_event(s, 1 - s / 100)) for s in (0, 50, 100)))
    return path


def _tensorboard(root: Path) -> tuple[Path, Path, dict[str, object]]:
    source = root / "logs"
    return source, _events(source / "run" / "events.out.tfevents.1.host"), _manifest(source)


def _tensorboard_hparams(root: Path) -> tuple[Path, Path, dict[str, object]]:
    source = root / "logs"
    _events(source / "run" / "events.out.tfevents.1.host")
    (source / "run" / "hparams.yaml").write_text("batch_size: 32\nlr: 0.1\n")
    return source, source / "run" / "hparams.yaml", {}


def _mlflow_run(root: Path) -> Path:
    run = root / "mlruns" / "1" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run / "params").mkdir()
    (run / "tags").mkdir()
    (run.parent / "meta.yaml").write_text("experiment_id: '1'\nname: sweep\n")
    (run / "meta.yaml").write_text("run_id: abc\nlifecycle_stage: active\n")
    (run / "params" / "batch_size").write_text("32")
    (run / "params" / "lr").write_text("0.1")
    (run / "tags" / "mlflow.runName").write_text("bs32")
    (run / "metrics" / "val_loss").write_text("1700000000000 2.3 0\n1700000000100 1.9 100\n")
    return run


def _mlflow(name: str) -> Callable[[Path], tuple[Path, Path, dict[str, object]]]:
    def make(root: Path) -> tuple[Path, Path, dict[str, object]]:
        run = _mlflow_run(root)
        return run.parent, run / name, {}
    return make


def _wandb(root: Path) -> tuple[Path, Path, dict[str, object]]:
    source = root / "logs"
    source.mkdir()
    pq.write_table(pa.table({"_step": [0, 50, 100], "val_loss": [2.0, 1.5, 1.0]}),
                   source / "run.parquet")
    return source, source / "run.parquet", _manifest(source)


def _hf(root: Path) -> tuple[Path, Path, dict[str, object]]:
    source = root / "out"
    state = {"global_step": 20, "max_steps": 20, "train_batch_size": 32,
             "log_history": [{"step": 10, "loss": 2.0}, {"step": 20, "eval_loss": 1.8}]}
    (source / "bs32" / "checkpoint-20").mkdir(parents=True)
    path = source / "bs32" / "checkpoint-20" / "trainer_state.json"
    path.write_text(json.dumps(state))
    return source, path, {}


def _algoperf(root: Path) -> tuple[Path, Path, dict[str, object]]:
    source = root / "study"
    (source / "trial_1").mkdir(parents=True)
    (source / "trial_1" / "eval_measurements.csv").write_text(
        "global_step,validation/loss\n1,1.2\n334,0.3\n")
    (source / "trial_1" / "hparams.json").write_text('{"beta1": 0.9}')
    return source, source / "trial_1" / "hparams.json", _manifest(source)


def _release(member: str) -> Callable[[Path], tuple[Path, Path, dict[str, object]]]:
    def make(root: Path) -> tuple[Path, Path, dict[str, object]]:
        source = root / "release"
        for name, data in small_members().items():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes(data)
        return source, source / f"{ROOT}/mnist/fc_1024/sgd/8/{member}", {}
    return make


def _sacred(name: str) -> Callable[[Path], tuple[Path, Path, dict[str, object]]]:
    def make(root: Path) -> tuple[Path, Path, dict[str, object]]:
        run = write_sacred_run(root / "runs" / "1", config={"batch_size": 32},
                               metrics={"val_loss": ([50, 100], [2.0, 1.0])})
        return run.parent, run / name, {}
    return make


def _dvclive(name: str) -> Callable[[Path], tuple[Path, Path, dict[str, object]]]:
    def make(root: Path) -> tuple[Path, Path, dict[str, object]]:
        live = write_dvclive(root / "logs" / "dvclive", {"val/loss": ([50, 100], [2.0, 1.0]),
                                                         "epoch": ([50, 100], [0, 1])},
                             params={"batch_size": 32})
        return live.parent, live / name, {}
    return make


def _timm(root: Path) -> tuple[Path, Path, dict[str, object]]:
    run = write_timm(root / "out" / "run1", [{"epoch": 0, "eval_loss": 1.0},
                                             {"epoch": 1, "eval_loss": 0.5}],
                     {"batch_size": 32})
    return run.parent, run / "args.yaml", _spe(run.parent)


def _ultralytics(root: Path) -> tuple[Path, Path, dict[str, object]]:
    run = write_ultralytics(root / "runs" / "train", [{"epoch": 0, "train/box_loss": 1.0}],
                            {"batch": 32})
    return run.parent, run / "results.csv", _spe(run.parent)


def _jsonl(root: Path) -> tuple[Path, Path, dict[str, object]]:
    log = write_jsonl(root / "out" / "log.txt", [{"epoch": 0, "train_loss": 1.0}])
    path = log.parent.parent / "out.toml"
    path.write_text(RUNS_TOML + "[workload]\nsteps_per_epoch = 10\n")
    return log.parent, log, {"manifest": path}


def _spe(source: Path) -> dict[str, object]:
    path = source.parent / f"{source.name}.toml"
    path.write_text("[workload]\nsteps_per_epoch = 10\n")
    return {"manifest": path}


def _mlflow_sqlite(root: Path) -> tuple[Path, Path, dict[str, object]]:
    db = write_mlflow_db(root / "store" / "mlflow.db", {1: "sweep"}, [
        {"id": "a" * 32, "experiment": 1, "status": "FINISHED", "start": 1,
         "params": {"batch_size": 32}, "metrics": {"val_loss": [(50, 2.0, 1), (100, 1.0, 2)]}}])
    return db.parent, db, {}


def _wandb_local(name: str) -> Callable[[Path], tuple[Path, Path, dict[str, object]]]:
    def make(root: Path) -> tuple[Path, Path, dict[str, object]]:
        run = write_wandb08(root / "wandb" / "run-1", [{"loss": 2.0}, {"loss": 1.0}],
                            {"batch_size": 32})
        return run.parent, run / name, {}
    return make


SOURCES = {
    "sacred-run.json": _sacred("run.json"),
    "sacred-config.json": _sacred("config.json"),
    "sacred-metrics.json": _sacred("metrics.json"),
    "dvclive-params.yaml": _dvclive("params.yaml"),
    "dvclive-tsv": _dvclive("plots/metrics/val/loss.tsv"),
    "timm-args.yaml": _timm,
    "ultralytics-results.csv": _ultralytics,
    "jsonl-log.txt": _jsonl,
    "mlflow-sqlite": _mlflow_sqlite,
    "wandb-history.jsonl": _wandb_local("wandb-history.jsonl"),
    "wandb-config.yaml": _wandb_local("config.yaml"),
    "wandb-metadata.json": _wandb_local("wandb-metadata.json"),
    "csv": _csv,
    "lightning-hparams.yaml": _lightning_hparams,
    "tensorboard-event-file": _tensorboard,
    "tensorboard-hparams.yaml": _tensorboard_hparams,
    "mlflow-params": _mlflow("params/lr"),
    "mlflow-metrics": _mlflow("metrics/val_loss"),
    "mlflow-meta.yaml": _mlflow("meta.yaml"),
    "mlflow-tags": _mlflow("tags/mlflow.runName"),
    "wandb-parquet": _wandb,
    "hf-trainer_state.json": _hf,
    "algoperf-hparams.json": _algoperf,
    "release-study.json": _release("study.json"),
    "release-metadata.json": _release("1/metadata.json"),
    "release-measurements.csv": _release("1/measurements.csv"),
}



def _source(kind: str, root: Path) -> tuple[Path, Path, dict[str, object]]:
    return SOURCES[kind](root)


@contextlib.contextmanager
def _unblocked(fifo: Path, after: float = 30) -> Iterator[None]:
    """Open ``fifo`` for writing if the block is still running after ``after`` seconds, so
    that a reader blocked on it (the attack, replayed on code that does not refuse FIFOs)
    gets an end of file and the test fails instead of hanging in a worker thread."""
    done = threading.Event()

    def rescue() -> None:
        if done.wait(after):
            return
        while not done.wait(0.1):
            with contextlib.suppress(OSError):  # ENXIO while no reader waits
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    thread = threading.Thread(target=rescue, daemon=True)
    thread.start()
    try:
        with deadline(after * 4):
            yield
    finally:
        done.set()
        thread.join()


def _replace(source: Path, target: Path, kind: str, outside: Path) -> None:
    """Put an attack where ``target`` was: a link to a copy out of the source, a link to a
    copy inside it (in a hidden folder no importer reads), or a FIFO."""
    if kind == "fifo":
        target.unlink()
        os.mkfifo(target)
        return
    if kind == "link-out":
        outside.mkdir(parents=True, exist_ok=True)
        moved = outside / target.name
        shutil.move(target, moved)
        target.symlink_to(moved)
        return
    stash = source / ".stash" / (target.name + ".orig")  # a place no importer reads
    stash.parent.mkdir()
    shutil.move(target, stash)
    target.symlink_to(os.path.relpath(stash, target.parent))  # a relative link, inside


@pytest.mark.parametrize("kind", ["link-out", "link-in", "fifo"])
@pytest.mark.parametrize("fmt", sorted(SOURCES))
def test_every_importer_reads_only_regular_files_inside_the_source(
        tmp_path: Path, fmt: str, kind: str) -> None:
    """security.md, "`curvekit add`: the files it reads": a link (out of the source or in
    it) or a FIFO where any importer reads a file is refused, naming it; a FIFO never
    blocks the import."""
    source, target, options = _source(fmt, tmp_path)
    build(source, name=NAME, **options)  # the source as written imports
    _replace(source, target, kind, tmp_path / "outside")
    with _unblocked(target) if kind == "fifo" else contextlib.nullcontext(), \
            pytest.raises(IngestError) as info:
        build(source, name=NAME, **options)
    message = str(info.value)
    assert message.startswith(str(target)), message
    if kind == "fifo":
        assert "a FIFO (named pipe), not a regular file" in message, message
    else:
        where = "outside" if kind == "link-out" else "inside"
        assert f"a link (to '{os.readlink(target)}', {where} the source folder)" in message
        assert "--follow-links" in message


@pytest.mark.parametrize("fmt", sorted(SOURCES))
def test_follow_links_reads_through_links(tmp_path: Path, fmt: str) -> None:
    """security.md: ``--follow-links`` reads through links, wherever they point."""
    source, target, options = _source(fmt, tmp_path)
    expected = build(source, name=NAME, **options)
    _replace(source, target, "link-out", tmp_path / "outside")
    got = build(source, name=NAME, follow_links=True, **options)
    assert got.measurements.keys() == expected.measurements.keys()
    assert [t.parameters for t in got.trials] == [t.parameters for t in expected.trials]


def test_follow_links_still_refuses_devices_fifos_and_sockets(tmp_path: Path) -> None:
    """security.md: even with ``--follow-links``, only regular files are read: a link to a
    character device (``/dev/zero``, which never ends), a FIFO or a socket is refused."""
    source, target, options = _csv(tmp_path)
    target.unlink()
    target.symlink_to("/dev/zero")
    with deadline(60), pytest.raises(IngestError, match="a character device, not a regular"):
        build(source, name=NAME, follow_links=True, **options)
    target.unlink()
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(target))
        with pytest.raises(IngestError, match="a socket, not a regular file"):
            build(source, name=NAME, **options)
    target.unlink()
    os.mkfifo(tmp_path / "pipe")
    target.symlink_to(tmp_path / "pipe")
    with _unblocked(tmp_path / "pipe"), pytest.raises(IngestError, match="a FIFO"):
        build(source, name=NAME, follow_links=True, **options)


def test_a_linked_folder_on_the_way_is_refused(tmp_path: Path) -> None:
    """security.md: a link anywhere on the way to a file is refused, not only the file's
    own name: MLflow's ``params`` folder linked to a folder of secrets."""
    run = _mlflow_run(tmp_path)
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "token").write_text("s3cr3t")
    (secrets / "batch_size").write_text("32")
    shutil.rmtree(run / "params")
    (run / "params").symlink_to(secrets)
    with pytest.raises(IngestError, match=r"params: a link \(to") as info, \
            pytest.warns(IngestWarning, match="params: not read: a link to the folder"):
        build(run.parent, name=NAME)  # detection walks past it; the reader refuses it
    assert "s3cr3t" not in str(info.value)
    data = build(run.parent, name=NAME, follow_links=True)
    assert data.trials[0].parameters == {"token": "s3cr3t"}


def test_a_linked_folder_is_not_walked_into_and_a_warning_names_it(tmp_path: Path) -> None:
    """security.md: a walk does not enter a linked folder; a warning names it. With
    ``--follow-links`` it is read, and a link to a folder above it does not loop."""
    source = tmp_path / "logs"
    write_plain(source / "a" / "run.csv", 32, 1)
    elsewhere = tmp_path / "elsewhere"
    write_plain(elsewhere / "run.csv", 32, 2)
    (source / "b").symlink_to(elsewhere)
    (source / "a" / "up").symlink_to(source)  # a loop
    manifest = _manifest(source)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IngestWarning)
        data = build(source, name=NAME, **manifest)
    assert len(data.trials) == 1
    assert sorted(str(w.message).split(": not read: a link to the folder")[0]
                  for w in caught) == [str(source / "a" / "up"), str(source / "b")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", IngestWarning)
        data = build(source, name=NAME, follow_links=True, **manifest)
    assert len(data.trials) == 2


def test_the_source_named_may_be_a_link(tmp_path: Path) -> None:
    """security.md: the folder or file the user names may itself be a link (their own
    choice); what lies below it is confined."""
    source, target, options = _csv(tmp_path)
    (tmp_path / "named").symlink_to(source)
    assert len(build(tmp_path / "named", name=NAME, **options).trials) == 1
    (tmp_path / "one.csv").symlink_to(target)
    assert len(build(tmp_path / "one.csv", name=NAME, **options).trials) == 1


def test_the_command_line_refuses_a_link_and_follows_it_when_asked(tmp_path: Path) -> None:
    """security.md: ``curvekit add`` prints ``Error:`` naming the link (exit 1, no store);
    ``--follow-links`` reads through it."""
    source, target, options = _csv(tmp_path)
    _replace(source, target, "link-out", tmp_path / "outside")
    home = tmp_path / "home"
    args = ["add", str(source), "--name", NAME, "--run-manifest", str(options["manifest"]),
            "--home", str(home)]
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code == 1
    assert refused.output.startswith(f"Error: {target}: a link (to "), refused.output
    assert not (home / "store").exists()
    followed = CliRunner().invoke(main, [*args, "--follow-links"])
    assert followed.exit_code == 0, followed.output
    assert (home / "store").exists()


def test_a_named_fifo_source_and_manifest_are_refused(tmp_path: Path) -> None:
    """security.md: a FIFO named as the source or as the run manifest is refused too (no
    read blocks)."""
    source, _, options = _csv(tmp_path)
    os.mkfifo(tmp_path / "pipe.csv")
    with _unblocked(tmp_path / "pipe.csv"), pytest.raises(IngestError, match="a FIFO"):
        build(tmp_path / "pipe.csv", name=NAME, **options)
    os.mkfifo(tmp_path / "pipe.toml")
    with _unblocked(tmp_path / "pipe.toml"), pytest.raises(IngestError, match="a FIFO"):
        load_run_manifest(tmp_path / "pipe.toml")
    with _unblocked(tmp_path / "pipe.toml"), pytest.raises(IngestError, match="a FIFO"):
        build(source, name=NAME, manifest=tmp_path / "pipe.toml")


def test_a_refused_link_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    """security.md: a refused import changes nothing in the store."""
    home = tmp_path / "home"
    source, _, options = _csv(tmp_path / "first")
    add(source, name="mine/first/sgd", home=home, **options)
    before = snapshot(home)
    attack, target, options = _mlflow("params/lr")(tmp_path / "second")
    _replace(source, target, "link-out", tmp_path / "outside")
    with pytest.raises(IngestError, match="a link"):
        add(attack, name=NAME, home=home, **options)
    assert snapshot(home) == before


def test_folders_nested_too_deep_are_refused(tmp_path: Path) -> None:
    """security.md: walks go at most ``MAX_DEPTH`` folders below the source, iteratively
    (no recursion limit, one open descriptor per level)."""
    deep = tmp_path / "logs"
    write_plain(deep / "run.csv", 32, 1)
    (deep / "/".join(["d"] * (MAX_DEPTH + 1))).mkdir(parents=True)
    with pytest.raises(IngestError, match=f"folders nested more than {MAX_DEPTH} deep"):
        build(tmp_path / "logs", name=NAME, **_manifest(tmp_path / "logs"))


def test_exclude_leaves_out_the_files_read_beside_a_log(tmp_path: Path) -> None:
    """security.md: ``--exclude`` leaves out the files read beside a log too (a Lightning
    ``hparams.yaml``, MLflow's params), so the fix a refusal gives works."""
    source, target, _ = _lightning_hparams(tmp_path / "a")
    _replace(source, target, "link-out", tmp_path / "outside-a")
    (source / "runs.toml").write_text(RUNS_TOML)
    data = build(source, name=NAME, manifest=source / "runs.toml",
                 exclude=["version_0/hparams.yaml", "runs.toml"])
    assert [t.parameters for t in data.trials] == [{}]
    attack, target, _ = _mlflow("params/lr")(tmp_path / "b")
    _replace(attack, target, "link-out", tmp_path / "outside-b")
    data = build(attack, name=NAME, exclude=["abc/params/lr"])
    assert [t.parameters for t in data.trials] == [{}]


def test_files_larger_than_their_kind_allows_are_refused_unread(tmp_path: Path) -> None:
    """security.md: a side file above 16 MiB and a run manifest above 64 MiB are refused
    before they are read (sparse files here: nothing is written)."""
    source, target, _ = _lightning_hparams(tmp_path)
    with open(target, "r+b") as fh:
        fh.truncate(MAX_SIDE_FILE + 1)
    with pytest.raises(IngestError, match=f"{MAX_SIDE_FILE + 1:,} bytes, more than the "
                       f"{MAX_SIDE_FILE:,} read from such a file"):
        build(source, name=NAME)
    manifest = tmp_path / "runs.toml"
    with open(manifest, "wb") as fh:
        fh.truncate(MAX_MANIFEST + 1)
    with pytest.raises(IngestError, match="a run manifest is a few kilobytes"):
        load_run_manifest(manifest)


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_file_swapped_after_its_check_is_still_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """security.md: the kind of a file is checked again on the open descriptor, and the
    file is opened with ``O_NOFOLLOW`` and ``O_NONBLOCK``: a file swapped for a link or a
    FIFO after ``lstat`` said "regular file" is still refused, and the open does not block.
    (The swap is played by making ``lstat`` answer for the file it saw first.)"""
    source, target, _ = _csv(tmp_path)
    regular = os.stat(target)
    _replace(source, target, "link-out" if kind == "link" else "fifo", tmp_path / "outside")
    real_stat = os.stat

    def stale(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if path == target.name and kwargs.get("dir_fd") is not None:
            return regular  # what the file was when it was checked
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(files_module.os, "stat", stale)
    expected = r"a link \(to" if kind == "link" else "a FIFO"
    with deadline(60), pytest.raises(IngestError, match=expected) as info:
        SourceFiles.of(source).read_bytes(target)
    assert str(info.value).startswith(str(target))


# -- the rule, on generated trees ------------------------------------------------------------

_ENTRY = st.sampled_from(["file", "dir", "link-file-in", "link-file-out", "link-dir-in",
                          "link-dir-out", "dangling", "fifo"])


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=st.lists(st.tuples(st.integers(0, 3), _ENTRY), min_size=1, max_size=12))
def test_reads_never_leave_the_source_or_block(tmp_path_factory: pytest.TempPathFactory,
                                                tree: list[tuple[int, str]]) -> None:
    """security.md: for any arrangement of files, folders, links (in, out, dangling) and
    FIFOs, ``SourceFiles`` walks only real folders below the root and every read either
    returns the bytes of a regular file inside the source or refuses, naming the path."""
    base = tmp_path_factory.mktemp("tree")
    root, outside = base / "src", base / "out"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret").write_text("outside")
    (outside / "sub" / "secret").write_text("outside")
    folders = [root]
    root.mkdir()
    for i, (parent, kind) in enumerate(tree):
        here = folders[parent % len(folders)]
        path = here / f"e{i}"
        if kind == "file":
            path.write_text(f"inside {i}")
        elif kind == "dir":
            path.mkdir()
            folders.append(path)
        elif kind == "link-file-in":
            (root / f"t{i}").write_text(f"inside {i}")
            path.symlink_to(root / f"t{i}")
        elif kind == "link-file-out":
            path.symlink_to(outside / "secret")
        elif kind == "link-dir-in":
            path.symlink_to(root)
        elif kind == "link-dir-out":
            path.symlink_to(outside / "sub")
        elif kind == "dangling":
            path.symlink_to(base / "nowhere")
        else:
            os.mkfifo(path)
    files = SourceFiles.of(root)
    with deadline(60), warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        walked = list(files.walk())
    for top, _, names in walked:
        assert top.resolve().is_relative_to(root.resolve()) and not top.is_symlink()
        for name in names:
            path = top / name
            try:
                with deadline(60):
                    data = files.read_bytes(path)
            except IngestError as exc:
                assert str(exc).startswith(str(path)), exc
                assert path.is_symlink() or not path.is_file()
                continue
            assert data.startswith(b"inside") and not path.is_symlink()


# -- one door: no other module of curvekit.ingest opens a file -------------------------------

_OPENERS = {"open", "read_text", "read_bytes", "iterdir", "rglob", "glob", "walk", "scandir",
            "listdir", "stat", "lstat", "read_table", "read_schema", "ParquetFile",
            "read_csv", "load", "fdopen"}
"""Calls that open, read or list a path (``os.*``, ``Path.*``, builtins, pyarrow's
readers given a path)."""


def _receiver(func: ast.expr) -> str:
    return ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""


def test_no_ingest_module_opens_a_file_but_the_one_door() -> None:
    """security.md: every file ``curvekit add`` reads goes through
    ``curvekit.ingest.files.SourceFiles``: no other module of ``curvekit.ingest`` opens,
    reads or lists a path itself, and the release reader's folder and tar paths use the
    ``SourceReader`` they are given."""
    bad = []
    checked = [p for p in sorted((PACKAGE / "ingest").glob("*.py")) if p.name != "files.py"]
    for path in checked:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else \
                func.attr if isinstance(func, ast.Attribute) else ""
            if name not in _OPENERS:
                continue
            receiver = _receiver(func)
            first = ast.unparse(node.args[0]) if node.args else ""
            allowed = receiver in ("files", "json", "yaml") \
                or receiver.startswith("files_of(") or (
                # pyarrow parses bytes already read, or a file opened through the door
                receiver in ("pacsv", "pq") and (first.startswith("pa.py_buffer")
                                                 or first == "fh"))
            if not allowed:
                bad.append(f"{path.name}:{node.lineno}: {ast.unparse(node)[:80]}")
    archive = ast.parse((PACKAGE / "release" / "archive.py").read_text())
    for fn in (n for n in ast.walk(archive) if isinstance(n, ast.FunctionDef)
               and n.name in ("_folder_records", "_open_tar", "read_release")):
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                text = ast.unparse(node.func)
                if text in ("open", "os.open", "open_decompressed") or text.endswith(
                        (".read_bytes", ".read_text", ".rglob", ".iterdir", ".stat")) or (
                        text.endswith((".open", ".walk")) and not text.startswith(
                            ("files.", "reader.", "bz2.", "gzip.", "lzma."))):
                    bad.append(f"archive.py:{node.lineno}: {ast.unparse(node)[:80]}")
    assert bad == [], "\n".join(bad)
