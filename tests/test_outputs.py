"""What a command writes and cannot write: an ``Error:`` line naming the path, the cause and
the fix, never a traceback, and nothing lost (docs/security.md, "Output files and the
standard output")."""

from __future__ import annotations

import ast
import errno
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.cli import main
from curvekit.errors import OutputError
from curvekit.outputs import output_error, write_file
from tests.conftest import snapshot

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = "open_images_v4/resnet_50/nesterov_momentum"
METRIC = "val/cross_entropy_error"
HAS_TORCH = all(__import__("importlib").util.find_spec(m) for m in ("torch", "sklearn"))


@pytest.fixture(scope="module")
def home(converted_home: Callable[..., Path]) -> Path:
    return converted_home([WORKLOAD], max_trials=3, evals_scale=0.05)


def commands(out: Path, home: Path) -> dict[str, list[str]]:
    """Every command that writes files, writing them at ``out``."""
    at = ["--home", str(home)]
    return {
        "plot": ["plot", "best", WORKLOAD, "--metric", METRIC, "--format", "svg", "--out",
                 str(out), *at],
        "figure": ["figure", "20", "--format", "svg", "--out", str(out), *at],
        "figures": ["figures", "--format", "json", "--out", str(out), *at],
        "report": ["report", "--out", str(out), "--bootstrap", "0", "--no-figures", "--quiet",
                   *at],
        "run": ["run", "--model", "fc_16", "--optimizer", "sgd", "--batch-sizes", "16",
                "--trials-per-study", "1", "--steps", "10", "--eval-every", "10", "--device",
                "cpu", "--no-store", "--quiet", "--work-dir", str(out), *at],
        "generate-archive": ["generate-archive", str(out), "--max-trials", "1", "--evals-scale",
                             "0.01", "--workload", "mnist/simple_cnn_base/sgd", "--jobs", "1",
                             "--quiet"],
    }


COMMANDS = list(commands(Path("x"), Path("h")))


def _refused(argv: list[str], home: Path) -> str:
    if argv[0] == "run" and not HAS_TORCH:
        pytest.skip("curvekit run needs torch and scikit-learn")
    before = snapshot(home)
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and errors[0].startswith("Error: cannot write "), result.output
    assert "Traceback" not in result.output and result.exception is not None
    assert isinstance(result.exception, SystemExit)
    assert snapshot(home) == before  # the store, as it was
    return result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_a_name_over_255_bytes_is_an_error_line(command: str, home: Path,
                                               tmp_path: Path) -> None:
    """A path component over 255 bytes: the name, its size, the limit and the fix."""
    out = tmp_path / ("é" * 128)  # 256 bytes
    output = _refused(commands(out, home)[command], home)
    assert "bytes" in output and "255" in output and "choose a name" in output.replace(
        "choose a shorter name", "choose a name")
    assert os.listdir(tmp_path) == []  # nothing half-written left behind


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_where_a_folder_should_be_is_an_error_line(command: str, home: Path,
                                                         tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("kept\n")
    output = _refused(commands(blocker / "sub" / "out", home)[command], home)
    assert f"{blocker} is a file, not a folder" in output.replace("\n", "")
    assert blocker.read_text() == "kept\n"


def _failing_open(code: int) -> Callable[..., Any]:
    def fail(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if any(c in mode for c in "wxa"):
            raise OSError(code, os.strerror(code), os.fspath(file))
        return open(file, mode, *args, **kwargs)
    return fail


def _earlier(command: str, out: Path, home: Path) -> None:
    """What an earlier run left at ``out``, that a failing run must keep."""
    if command in ("plot", "figure", "generate-archive"):
        out.write_bytes(b"earlier\n")
    elif command in ("figures", "report"):
        assert CliRunner().invoke(main, commands(out, home)[command]).exit_code == 0


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_full_disk_or_read_only_folder_is_an_error_line_and_loses_nothing(
        command: str, code: int, home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file is written through curvekit.outputs: a refused write there (tests run as
    root, which no permission bit stops) is an Error line, and what was there stays."""
    out = tmp_path / "out"
    _earlier(command, out, home)
    before = snapshot(tmp_path)
    monkeypatch.setattr("curvekit.outputs.open", _failing_open(code), raising=False)
    output = _refused(commands(out, home)[command], home)
    assert os.strerror(code) in output
    assert "choose another place" in output or "choose a writable place" in output
    assert snapshot(tmp_path) == before  # the earlier output, and no work file left


def test_the_renderer_writes_to_a_device_that_refuses_data(home: Path) -> None:
    if not Path("/dev/full").is_char_device():
        pytest.skip("no /dev/full")
    for command in ("plot", "figure"):
        output = _refused(commands(Path("/dev/full"), home)[command], home)
        assert "/dev/full takes no more data (No space left on device)" in output
    assert Path("/dev/full").is_char_device() and not Path("/dev/full.json").exists()


STDOUT = [["query", "select * from measurements", "--format", "csv"],
          ["query", "select * from measurements", "--format", "json"],
          ["query", "select * from trials"], ["info"], ["best", WORKLOAD, "--metric", METRIC]]


@pytest.mark.parametrize("argv", STDOUT, ids=["query-csv", "query-json", "query-table", "info",
                                              "best"])
def test_stdout_on_a_full_disk_is_an_error_line(argv: list[str], home: Path,
                                                tmp_path: Path) -> None:
    """``curvekit ... > /dev/full``: one Error line and status 1, nothing else on stderr
    (no traceback, no "Exception ignored" from Python's last flush)."""
    if not Path("/dev/full").is_char_device():
        pytest.skip("no /dev/full")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "curvekit", *argv, "--home", str(home)],
                              stdout=full, stderr=subprocess.PIPE, text=True, env=env,
                              cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    *notes, last = proc.stderr.splitlines()
    assert last.startswith("Error: cannot write the output to the standard output: "
                           "No space left on device [ENOSPC]"), proc.stderr
    assert all(n.startswith("Note: ") for n in notes), proc.stderr  # info's own note


def test_the_cli_writes_stdout_through_one_guard() -> None:
    """Every stdout write of cli.py is ``_echo`` or inside ``with stdout_guard()``."""
    tree = ast.parse((ROOT / "curvekit" / "cli.py").read_text())
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.FunctionDef) and node.name == "_echo") or (
                isinstance(node, ast.With) and any(
                    "stdout_guard" in ast.unparse(i.context_expr) for i in node.items)):
            guarded |= {id(n) for n in ast.walk(node)}
    loose = []
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("click.echo", "print") \
                and not any(k.arg in ("err", "file") for k in node.keywords):
            loose.append(f"line {node.lineno}: {ast.unparse(node)[:60]}")
        if isinstance(node, ast.Attribute) and ast.unparse(node) == "sys.stdout":
            loose.append(f"line {node.lineno}: sys.stdout")
    assert loose == []


# -- the messages, for any path and cause ----------------------------------------------------

CODES = [errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM,
         errno.ENAMETOOLONG, errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.EIO]
_NAME = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\0"),
                min_size=1, max_size=300)


@settings(max_examples=60, deadline=None)
@given(code=st.sampled_from(CODES), names=st.lists(_NAME, min_size=1, max_size=3),
       named=st.booleans())
def test_every_output_error_names_the_path_and_says_what_to_do(
        code: int, names: list[str], named: bool) -> None:
    path = Path("/nonexistent-curvekit", *names)
    exc = OSError(code, os.strerror(code), str(path) if named else None)
    error = output_error(exc, path, "the chart")
    assert isinstance(error, OutputError)
    message = str(error)
    assert message.startswith(f"cannot write the chart {path}: ")
    assert any(fix in message for fix in ("choose", "free some space", "remove it", "give"))
    stdout = str(output_error(OSError(code, os.strerror(code)), None, "the output"))
    assert stdout.startswith("cannot write the output to the standard output: ")


def test_a_failed_write_keeps_the_file_it_would_replace(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    target = write_file(tmp_path / "chart.svg", "first", "the chart")
    monkeypatch.setattr("curvekit.outputs.os.replace", _raise(errno.ENOSPC))
    with pytest.raises(OutputError, match="no space left on the disk that holds"):
        write_file(target, "second", "the chart")
    assert target.read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chart.svg"]


def _raise(code: int) -> Callable[..., None]:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise OSError(code, os.strerror(code))
    return fail


@pytest.mark.skipif(not HAS_TORCH, reason="curvekit run needs torch and scikit-learn")
def test_a_sweep_keeps_the_trials_written_before_a_full_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second trial's part meets a full disk: an Error line; the first part stays, and
    the same command resumes from it."""
    work = tmp_path / "work"
    argv = commands(work, tmp_path / "home")["run"]
    argv[argv.index("16")] = "16,32"
    parts: list[str] = []
    real = open

    def second_part_fails(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "x" in mode and "parts" in os.fspath(file):
            parts.append(os.fspath(file))
            if len(parts) == 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(file, mode, *args, **kwargs)

    monkeypatch.setattr("curvekit.outputs.open", second_part_fails, raising=False)
    failed = CliRunner().invoke(main, argv)
    assert failed.exit_code == 1 and failed.output.startswith("Error: cannot write a finished")
    kept = sorted(work.glob("parts/**/*.parquet"))
    assert len(kept) == 1 and not list(work.glob("parts/**/.curvekit-*"))
    monkeypatch.undo()
    resumed = CliRunner().invoke(main, argv)
    assert resumed.exit_code == 0, resumed.output
    assert "1 run now, 1 from" in resumed.output


def test_a_pipe_or_device_is_written_in_place_without_a_sidecar(tmp_path: Path) -> None:
    """``--out`` a FIFO (or /dev/stdout): written in place, no work file, no sidecar."""
    import threading

    from curvekit.plotting.output import save

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()  # opening a FIFO blocks until both ends are open: no timing involved
    save({"data": {"values": [{"x": 1}]}, "mark": "point"}, fifo, {"plot": "t"}, fmt="svg")
    reader.join()
    assert received[0].startswith(b"<svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"] and fifo.is_fifo()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_folder_that_cannot_be_made_is_an_error_line(
        command: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only place refuses the folders a command makes (the report's, the figures',
    a sweep's work folder) as much as its files."""
    out = tmp_path / "ro" / "out"
    real = Path.mkdir

    def refuse(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.is_relative_to(tmp_path / "ro"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refuse)
    output = _refused(commands(out, home)[command], home)
    assert "cannot be written (Read-only file system)" in output
    assert os.listdir(tmp_path) == []
