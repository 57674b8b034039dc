"""Processes curvekit starts never import a module, or run a program, from the working folder
(docs/security.md, "Processes curvekit starts"); a helper imports the very curvekit its
parent runs; a user's ``module:function`` is looked up where the docs and the error say."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit._processes import PROCESSES, child_import_path, find_program
from curvekit.cli import main
from curvekit.release.synthetic import generate_archive, tiny_archive, write_manifest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "curvekit"
PLANTED = ("json", "typing", "re", "enum", "subprocess", "pathlib", "base64", "numpy",
           "torch", "vl_convert", "pickle", "struct", "curvekit")
"""Modules a planted file of the same name would shadow: standard ones every helper
imports, the libraries it needs, and curvekit itself (as a package folder)."""


def plant(folder: Path, markers: Path) -> None:
    """Modules and a program in ``folder`` that leave a marker in ``markers`` if they run."""
    markers.mkdir(parents=True, exist_ok=True)
    code = (f"import os\nopen(os.path.join({str(markers)!r}, __name__ + '-'"
            " + str(os.getpid())), 'w').close()\n")
    for name in PLANTED:
        if name == "curvekit":
            (folder / name).mkdir(parents=True, exist_ok=True)
            (folder / name / "__init__.py").write_text(code)
        else:
            (folder / f"{name}.py").write_text(code)
    program = folder / "lbzip2"
    program.write_text(f"#!/bin/sh\ntouch {markers}/lbzip2-$$\nexit 1\n")
    program.chmod(0o755)


def ran(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


# -- one trigger per kind of process: the test cannot forget one --------------------------------

def _renderer(tmp: Path) -> None:
    archive = tmp / "oi.tar.bz2"
    manifest = generate_archive(archive, workloads=["open_images_v4/resnet_50/nesterov_momentum"],
                                max_trials_per_study=3, evals_scale=0.05, jobs=1)
    write_manifest(manifest, tmp / "oi.json")
    home = tmp / "home"
    assert CliRunner().invoke(main, ["fetch", "--home", str(home), "--archive", str(archive),
                                     "--manifest", str(tmp / "oi.json"), "--quiet",
                                     "--decompressor", "python"]).exit_code == 0
    out = tmp / "figure.svg"
    result = CliRunner().invoke(main, ["figure", "20", "--format", "svg", "--out", str(out),
                                       "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(b"<svg")  # drawn by the helper


RUN = ["run", "--model", "fc_16", "--optimizer", "sgd", "--batch-sizes", "16,32",
       "--trials-per-study", "1", "--steps", "10", "--eval-every", "10", "--device", "cpu",
       "--no-store", "--quiet"]


def _worker(tmp: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    result = CliRunner().invoke(main, [*RUN, "--workers", "2", "--work-dir", str(tmp / "w"),
                                       "--home", str(tmp / "home")])
    assert result.exit_code == 0, result.output
    assert "2 run now" in result.output


def _ray(tmp: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized()  # curvekit starts Ray itself
    result = CliRunner().invoke(main, [*RUN, "--executor", "ray", "--workers", "1",
                                       "--work-dir", str(tmp / "w"),
                                       "--home", str(tmp / "home")])
    assert result.exit_code == 0, result.output
    assert "2 run now" in result.output and not ray.is_initialized()


def _decompressor(tmp: Path) -> None:
    archive = tmp / "tiny.tar.bz2"
    write_manifest(tiny_archive(archive), tmp / "tiny.json")
    result = CliRunner().invoke(main, ["fetch", "--home", str(tmp / "home"), "--archive",
                                       str(archive), "--manifest", str(tmp / "tiny.json"),
                                       "--quiet"])
    assert result.exit_code == 0, result.output


def _generator(tmp: Path) -> None:
    result = CliRunner().invoke(main, ["generate-archive", str(tmp / "g.tar.bz2"), "--jobs",
                                       "2", "--max-trials", "2", "--evals-scale", "0.05",
                                       "--workload", "mnist/simple_cnn_base/sgd"])
    assert result.exit_code == 0, result.output


TRIGGERS: dict[str, Callable[[Path], None]] = {
    "renderer": _renderer, "worker": _worker, "ray": _ray, "decompressor": _decompressor,
    "generator": _generator}
SLOW = {"ray", "worker"}  # Ray starts in ~20 s; two workers each import torch


def test_every_kind_of_process_has_a_trigger() -> None:
    assert set(TRIGGERS) == set(PROCESSES)


@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.slow) if k in SLOW else k
                                  for k in PROCESSES])
def test_a_module_planted_in_the_working_folder_never_runs(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes curvekit starts: nothing in the working folder runs, whatever its name."""
    here, markers = tmp_path / "here", tmp_path / "markers"
    here.mkdir()
    plant(here, markers)
    monkeypatch.chdir(here)
    # An empty and a relative PATH entry both mean the working folder.
    monkeypatch.setenv("PATH", os.pathsep.join(["", ".", str(here), os.environ["PATH"]]))
    try:
        TRIGGERS[kind](tmp_path)
    finally:  # what ran is the finding, even when it also broke the command
        assert ran(markers) == [], "planted code ran"


def test_a_helper_ignores_the_working_folder_its_parent_imports_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started by ``python -m curvekit`` (the working folder first on the parent's path) or
    with ``PYTHONPATH=.``, a helper still imports nothing from the working folder."""
    here, markers = tmp_path / "here", tmp_path / "markers"
    here.mkdir()
    plant(here, markers)
    for name in PLANTED:  # the parent must not meet them: only its helpers could
        if name not in ("vl_convert", "curvekit"):
            path = here / f"{name}.py"
            path.unlink(missing_ok=True)
    monkeypatch.chdir(here)
    monkeypatch.syspath_prepend(str(here))
    from curvekit.plotting.static import Renderer

    try:
        with Renderer() as renderer:
            svg = renderer.draw('{"data": {"values": [{"x": 1}]}, "mark": "point"}', "svg")
    finally:
        assert ran(markers) == [], "planted code ran"
    assert svg.startswith(b"<svg")


def _where(parent_code_cwd: Path, env: dict[str, str], site: bool) -> dict[str, object]:
    code = ("import json, subprocess, curvekit\n"
            "from curvekit._processes import python\n"
            f"p = python('curvekit._processes', 'where', purpose='worker', site={site},"
            " stdout=subprocess.PIPE)\n"
            "print(json.dumps({'parent': curvekit.__file__,"
            " 'child': json.loads(p.communicate()[0])}))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=parent_code_cwd, env=env,
                          capture_output=True, text=True, check=True)
    return dict(json.loads(proc.stdout))


def _copy_of_the_package(folder: Path) -> Path:
    shutil.copytree(PACKAGE, folder / "curvekit",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return folder / "curvekit" / "__init__.py"


@pytest.mark.parametrize("site", [False, True], ids=["renderer", "worker"])
@pytest.mark.parametrize("install", ["editable", "wheel-like", "pythonpath", "from-its-folder"])
def test_a_helper_imports_the_curvekit_its_parent_runs(install: str, site: bool,
                                                       tmp_path: Path) -> None:
    """The helper finds the same curvekit as its parent, however it is installed, although
    it runs isolated (``-I``: no PYTHONPATH, no user site, no working folder)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    expected = str(PACKAGE / "__init__.py")  # this checkout, installed in editable mode
    if install == "wheel-like":  # a package folder on the path, as site-packages holds it
        packages = tmp_path / "site-packages"
        expected = str(_copy_of_the_package(packages))
        env["PYTHONPATH"] = str(packages)
    elif install == "pythonpath":
        env["PYTHONPATH"] = str(ROOT)
    elif install == "from-its-folder":  # `python -c` in the folder holding the package
        cwd = tmp_path / "checkout"
        expected = str(_copy_of_the_package(cwd))
    seen = _where(cwd, env, site)
    child = seen["child"]
    assert isinstance(child, dict)
    assert seen["parent"] == child["curvekit"] == expected
    assert child["isolated"] is True
    assert str(cwd) not in child["path"] and "" not in child["path"]


# -- the import path and the program lookup, for any path ----------------------------------------

_SPELLINGS = st.sampled_from(["", ".", "./", "rel", "rel/sub", "{cwd}", "{cwd}/", "{cwd}/.",
                              "{cwd}/sub/..", "{link}", "/usr/lib/x", "/opt/y", "/opt/y"])
_LINKS = Path(tempfile.mkdtemp(prefix="curvekit-links-"))


@settings(max_examples=60, deadline=None)
@given(st.lists(_SPELLINGS, max_size=12))
def test_the_child_path_never_holds_the_working_folder(entries: list[str]) -> None:
    """Whatever spells the working folder (``''``, ``.``, relative, absolute, a link to it)
    is left out; every other entry keeps its order, once."""
    cwd = Path.cwd().resolve()
    link = _LINKS / "to-the-working-folder"
    if not link.is_symlink():
        link.symlink_to(cwd)
    path = [e.format(cwd=cwd, link=link) for e in entries]
    saved = sys.path[:]
    try:
        sys.path[:] = path
        child = child_import_path()
    finally:
        sys.path[:] = saved
    assert all(os.path.isabs(e) and Path(e).resolve() != cwd for e in child)
    expected = [e for e in dict.fromkeys(path)
                if e and os.path.isabs(e) and Path(e).resolve() != cwd]
    assert child == expected


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["", ".", "bin", "./bin", "{cwd}", "{cwd}/bin", "{real}"]),
                max_size=8))
def test_a_program_is_never_found_in_the_working_folder(entries: list[str]) -> None:
    real = shutil.which("sh")
    assert real is not None
    cwd = Path.cwd()
    saved = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join(
        e.format(cwd=cwd, real=Path(real).parent) for e in entries)
    try:
        found = find_program("sh")
    finally:
        os.environ["PATH"] = saved
    assert found is None or (os.path.isabs(found) and
                             Path(found).resolve().parent != cwd.resolve())
    assert (found is not None) == ("{real}" in entries)


def test_lbzip2_gets_the_archive_as_a_full_path(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A file name starting with "-" reaches the decompressor as a file, not an option."""
    import bz2

    from curvekit.release.archive import open_decompressed

    if find_program("lbzip2") is None:
        pytest.skip("lbzip2 is not installed")
    monkeypatch.chdir(tmp_path)
    Path("-n1.bz2").write_bytes(bz2.compress(b"hello"))
    with open_decompressed("-n1.bz2", decompressor="lbzip2") as stream:
        assert stream.read() == b"hello"


_STARTS = re.compile(
    r"(subprocess\.(Popen|run|call|check_call|check_output|getoutput|getstatusoutput)"
    r"|os\.(system|popen|fork\w*|posix_spawn\w*|exec\w*|spawn\w*)"
    r"|multiprocessing(\.\w+)*|concurrent\.futures(\.process)?\.ProcessPoolExecutor"
    r"|ProcessPoolExecutor|pty\.spawn|asyncio\.create_subprocess_\w+|webbrowser\.\w+"
    r"|ray\.init)")


def test_every_process_is_started_in_one_module() -> None:
    """Only curvekit._processes starts processes: a new way to start one cannot skip its
    rules (and its kind must be listed in PROCESSES, which the tests above walk)."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_processes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Call):
                names = [ast.unparse(node.func)]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno}: {name}"
                          for name in names if _STARTS.fullmatch(name)]
    assert offenders == []


# -- a user's module:function --------------------------------------------------------------------

USER_MODEL = textwrap.dedent("""
    import torch

    def build(input_shape, num_classes):
        size = 1
        for n in input_shape:
            size *= n
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(size, num_classes))
""")


def test_a_users_module_is_not_found_in_the_working_folder_and_the_error_says_where(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    (tmp_path / "user_nets.py").write_text(USER_MODEL)
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("user_nets", None)
    result = CliRunner().invoke(main, ["run", "--model", "user_nets:build", "--optimizer",
                                       "sgd", "--batch-sizes", "16", "--trials-per-study",
                                       "1", "--steps", "10", "--eval-every", "10",
                                       "--device", "cpu", "--no-store", "--quiet",
                                       "--home", str(tmp_path / "home")])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ")
    assert "cannot import 'user_nets'" in result.output
    assert "--import-path folders (none given)" in result.output
    assert "never the working folder" in result.output and "--import-path DIR" in result.output


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_import_path_names_the_folder_of_a_users_module(
        workers: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--import-path DIR`` makes a module in DIR importable here and in every worker."""
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    models = tmp_path / "my models"
    models.mkdir()
    (models / "user_nets.py").write_text(USER_MODEL)
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("user_nets", None)
    before = sys.path[:]
    result = CliRunner().invoke(main, ["run", "--model", "user_nets:build", "--optimizer",
                                       "sgd", "--batch-sizes", "16,32", "--trials-per-study",
                                       "1", "--steps", "10", "--eval-every", "10",
                                       "--device", "cpu", "--no-store", "--quiet",
                                       "--workers", str(workers), "--import-path",
                                       str(models), "--home", str(tmp_path / "home")])
    assert result.exit_code == 0, result.output
    assert "2 run now" in result.output
    assert sys.path == before  # the folder was looked in for the run only
    sys.modules.pop("user_nets", None)


def test_import_path_must_be_a_folder(tmp_path: Path) -> None:
    from curvekit.errors import RunError
    from curvekit.runner.sweep import run

    pytest.importorskip("torch")
    with pytest.raises(RunError, match=r"--import-path .*nowhere.* is not a folder"):
        run("x", model="fc_16", import_paths=[tmp_path / "nowhere"], home=tmp_path / "h")


@pytest.mark.slow
def test_a_worker_that_dies_or_fails_is_reported(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Local workers: an error in a trial comes back as the runner's own error; a worker
    process that dies is named, and the trials finished before it are kept."""
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    (tmp_path / "dying_nets.py").write_text("import os\n\ndef build(shape, classes):\n"
                                            "    os._exit(3)\n")
    monkeypatch.chdir(tmp_path)
    options = [*RUN, "--workers", "2", "--home", str(tmp_path / "home")]
    too_big = CliRunner().invoke(main, [*options, "--batch-sizes", "16,5000",
                                        "--work-dir", str(tmp_path / "a")])
    assert too_big.exit_code == 1
    assert too_big.output.startswith("Error: ") and "1197 training examples" in too_big.output
    died = CliRunner().invoke(main, [*options, "--model", "dying_nets:build", "--import-path",
                                     str(tmp_path), "--work-dir", str(tmp_path / "b")])
    assert died.exit_code == 1
    assert "a worker process died while running trial 1 of" in died.output


@pytest.mark.slow
def test_a_script_without_a_main_guard_is_not_imported_by_the_workers(tmp_path: Path) -> None:
    """Local workers are fresh processes: the calling script runs once, so
    ``curvekit.run(workers=N)`` needs no ``if __name__ == "__main__":`` guard."""
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    script = tmp_path / "sweep.py"
    script.write_text(textwrap.dedent(f"""
        import os, curvekit
        open(os.path.join({str(tmp_path)!r}, f"ran-{{os.getpid()}}"), "w").close()
        curvekit.run("s", model="fc_16", optimizers=["sgd"], batch_sizes=[16, 32], trials=1,
                     steps=10, eval_every=10, device="cpu", workers=2, store=False,
                     work_dir={str(tmp_path / "work")!r})
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, check=True,
                   capture_output=True, timeout=600)
    assert len(list(tmp_path.glob("ran-*"))) == 1
    assert len(list((tmp_path / "work").glob("parts/**/*.parquet"))) == 2


def test_lbzip2_asked_for_but_not_on_the_path_is_an_error(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``--decompressor lbzip2`` looks only on absolute PATH folders other than the working
    folder; without one there, the error names the alternatives."""
    import bz2

    from curvekit.errors import ArchiveError
    from curvekit.release.archive import open_decompressed

    archive = tmp_path / "a.bz2"
    archive.write_bytes(bz2.compress(b"x"))
    plant(tmp_path, tmp_path / "markers")  # an lbzip2 here, on PATH only as "." and ""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", os.pathsep.join(["", "."]))
    with pytest.raises(ArchiveError, match=r"no lbzip2 program .* indexed_bzip2"), \
            open_decompressed(archive, decompressor="lbzip2"):
        pass
    assert ran(tmp_path / "markers") == []


def test_a_relative_data_folder_reaches_ray_as_the_folder_it_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's workers run in a folder of their own: a relative --data-dir is sent as the
    absolute folder it names here (the sweep's plan keeps it as given)."""
    from curvekit.runner.executors import _absolute_data
    from curvekit.runner.plan import Sweep

    monkeypatch.chdir(tmp_path)
    sweep = Sweep.create("doc", dataset="digits", model="fc_16", optimizers=["sgd"],
                         batch_sizes=[16], trials=2, steps=10, eval_every=10,
                         data_dir="data")
    chunk = sweep.trial_specs()
    sent = _absolute_data(chunk)
    assert {s.data_dir for s in sent} == {str(tmp_path / "data")}
    assert [s.trial_id for s in sent] == [s.trial_id for s in chunk]
    assert _absolute_data(sent) == sent
