"""The command line mirrors the Python API, errors have one tree, options one meaning each.

- every leaf command ``curvekit X`` (``curvekit plot X``: ``plot_X``) has a public function
  ``curvekit.X`` with a docstring example;
- every exception and warning class lives in :mod:`curvekit.errors`, under
  :class:`~curvekit.errors.CurvekitError` or :class:`~curvekit.errors.CurvekitWarning`,
  and is still importable from where it was defined before;
- a renamed option still answers to its old spelling, which --help and docs/cli.md leave out;
- fetch, report and run report progress through the one :class:`~curvekit.progress.Progress`.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import curvekit
from curvekit import errors
from curvekit.cli import AliasedOption, main
from curvekit.clidoc import cli_reference
from curvekit.ingest.manifest import EXAMPLE
from curvekit.progress import STAGES, stage_counter
from tests.conftest import snapshot
from tests.logfiles import BATCH_SIZES, write_lightning

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "curvekit"


def _leaves(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _leaves(command, (*prefix, name))
        else:
            yield (*prefix, name)


LEAVES = list(_leaves(main))


def test_the_command_tree_is_walked() -> None:
    # A guard for the walk itself: the commands and plot's subcommands are all there.
    assert ("fetch",) in LEAVES and ("plot", "steps-to-result") in LEAVES
    assert len(LEAVES) >= 18


@pytest.mark.parametrize("path", LEAVES, ids=[" ".join(p) for p in LEAVES])
def test_every_leaf_command_has_a_public_function(path: tuple[str, ...]) -> None:
    name = "_".join(path).replace("-", "_")
    assert name in curvekit.__all__, f"curvekit {' '.join(path)}: curvekit.{name} is not public"
    function = getattr(curvekit, name)
    assert callable(function) and not inspect.ismodule(function), (
        f"curvekit.{name} is {function!r}, not a function")
    assert ">>>" in (function.__doc__ or ""), f"curvekit.{name} has no docstring example"


# --- one error tree ---------------------------------------------------------------------

def _class_bases() -> Iterator[tuple[Path, str, list[str]]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                yield path, node.name, bases


def test_every_exception_and_warning_class_is_defined_in_errors() -> None:
    elsewhere = [f"{path.relative_to(ROOT)}: {name}({', '.join(bases)})"
                 for path, name, bases in _class_bases()
                 if path != PACKAGE / "errors.py"
                 and any(b.endswith(("Error", "Exception", "Warning")) for b in bases)]
    assert elsewhere == []


def test_the_tree_has_one_root_each_and_is_drawn_and_exported() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, (errors.CurvekitError, errors.CurvekitWarning)), name
        assert name in doc, f"{name} is missing from the tree in curvekit.errors"
        assert getattr(curvekit, name) is cls and name in curvekit.__all__
    assert issubclass(errors.CurvekitWarning, UserWarning)


@pytest.mark.parametrize(("module", "name"), [
    ("curvekit.scaling", "FitError"),
    ("curvekit.plotting.render", "FigureError"),
    ("curvekit.plotting.render", "FigureNotesWarning"),
    ("curvekit.plotting.static", "RendererError"),
    ("curvekit.measure", "EmptyResultWarning"),
    ("curvekit.measure", "DirectionWarning"),
    ("curvekit.ingest.runs", "IngestWarning"),
])
def test_old_import_locations_keep_working(module: str, name: str) -> None:
    import importlib

    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_no_bare_root_error_is_raised() -> None:
    """A named subclass says what went wrong; the root is for catching."""
    bare = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                    and ast.unparse(node.exc.func).endswith("CurvekitError")):
                bare.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert bare == []


def test_former_bare_errors_are_named(tmp_path: Path) -> None:
    from curvekit.plotting.output import save
    from curvekit.release.synthetic import generate_archive
    from curvekit.reporting.site import check_out
    from curvekit.store.store import Store

    curvekit.demo(tmp_path / "home")
    store = Store.open(tmp_path / "home")
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(errors.ReportError, match="exists and is a file"):
        check_out(store, tmp_path / "a-file")
    with pytest.raises(errors.FigureError, match="unknown format 'bmp'"):
        save({"mark": "point"}, tmp_path / "x.bmp", {})
    with pytest.raises(errors.ArchiveError, match="need 0 < trial_fraction <= 1"):
        generate_archive(tmp_path / "g.tar.bz2", trial_fraction=2.0)
    from curvekit.store.fetch import fetch

    with pytest.raises(errors.ArchiveError, match="no such file"):
        fetch(home=tmp_path / "home", archive=tmp_path / "missing.tar.bz2")
    assert not (tmp_path / "x.bmp").exists() and not (tmp_path / "g.tar.bz2").exists()


def test_the_cli_prints_every_named_error_once(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["fetch", "--archive", str(tmp_path / "none.tar.bz2"),
                                       "--home", str(tmp_path / "home"), "--quiet"])
    assert result.exit_code == 1
    assert result.output == f"Error: --archive {tmp_path / 'none.tar.bz2'}: no such file\n"


# --- one meaning per option: renamed options keep their old spelling, hidden ----------

RENAMED = [  # (command, new spelling, old spelling)
    ("add", "--run-manifest", "--manifest"),
    ("add", "--example-run-manifest", "--example-manifest"),
    ("run", "--trials-per-study", "--trials"),
    ("fit", "--fit-model", "--model"),
]


@pytest.mark.parametrize(("command", "new", "old"), RENAMED)
def test_old_spellings_are_hidden_from_help_and_reference(command: str, new: str,
                                                          old: str) -> None:
    help_text = CliRunner().invoke(main, [command, "--help"]).output
    assert new in help_text
    assert f"{old} " not in help_text and f"{old}\n" not in help_text
    section = cli_reference().split(f"## curvekit {command}\n", 1)[1].split("\n## ", 1)[0]
    assert f"`{new}`" in section and f"`{old}`" not in section


@pytest.mark.parametrize(("command", "new", "old"), RENAMED)
def test_both_spellings_reach_the_same_parameter(command: str, new: str, old: str) -> None:
    cmd = main.commands[command]
    option = next(p for p in cmd.params if new in p.opts)
    assert isinstance(option, AliasedOption) and old in option.opts
    value = [] if option.is_flag else ["2" if command == "run" else "critical"
                                       if command == "fit" else "csv"
                                       if "format" in new else str(ROOT / "README.md")]
    parsed = {s: cmd.make_context(command, [s, *value]).params[option.name or ""]
              for s in (new, old)}
    assert parsed[new] == parsed[old] and parsed[new] not in (None, False)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["auto", "csv", "release", "tensorboard"]), st.booleans())
def test_log_format_spellings_parse_alike(fmt: str, use_old: bool) -> None:
    # add's --format is the format of the --dry-run plan (table, json), as --format is an
    # output format in every other command; a log format there is the old spelling of
    # --log-format, still read as one, and left out of --help
    cmd = main.commands["add"]
    params = cmd.make_context("add", ["--format" if use_old else "--log-format", fmt]).params
    assert (params["out_fmt"] if use_old else params["fmt"]) == fmt
    help_text = CliRunner().invoke(main, ["add", "--help"]).output
    assert "[table|json]" in help_text and "--log-format" in help_text


def test_a_wrong_value_names_the_new_spelling() -> None:
    result = CliRunner().invoke(main, ["add", "--log-format", "excel"])
    assert result.exit_code == 2
    assert "Invalid value for '--log-format'" in result.output
    result = CliRunner().invoke(main, ["add", "--format", "excel"])
    assert result.exit_code == 2
    assert "Invalid value for '--format'" in result.output and "'table', 'json'" in result.output


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    for version, bs in enumerate(BATCH_SIZES[:3]):
        write_lightning(tmp_path / "logs" / f"version_{version}", bs, 0, lr=0.1)
    return tmp_path / "logs"


def test_add_with_old_and_new_spellings(logs: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    for spelling in ("--example-run-manifest", "--example-manifest"):
        assert runner.invoke(main, ["add", spelling]).output == EXAMPLE
    new = tmp_path / "new"
    result = runner.invoke(main, ["add", str(logs), "--name", "a/b/c", "--log-format", "csv",
                                  "--home", str(new)])
    assert result.exit_code == 0, result.output
    old = tmp_path / "old"
    result = runner.invoke(main, ["add", str(logs), "--name", "a/b/c", "--format", "csv",
                                  "--home", str(old)])
    assert result.exit_code == 0, result.output
    assert curvekit.query("select count(*) as n from measurements", new)["n"][0] == \
        curvekit.query("select count(*) as n from measurements", old)["n"][0] > 0
    # A refused run manifest, by either name, leaves the store as it was.
    bad = tmp_path / "bad.toml"
    bad.write_text("[nonsense\n")
    before = snapshot(new)
    for spelling in ("--run-manifest", "--manifest"):
        result = runner.invoke(main, ["add", str(logs), "--name", "a/b/d", spelling, str(bad),
                                      "--home", str(new)])
        assert result.exit_code == 1 and result.output.startswith("Error: ")
    assert snapshot(new) == before
    result = runner.invoke(main, ["add", "--home", str(new)])
    assert result.exit_code == 2 and "give SOURCE" in result.output


# --- one Progress ---------------------------------------------------------------------

def test_fetch_and_report_speak_the_one_progress(tmp_path: Path) -> None:
    from curvekit.release.synthetic import tiny_archive
    from curvekit.store.fetch import fetch

    heard: list[tuple[str, int, int | None]] = []

    def progress(stage: str, done: int, total: int | None) -> None:
        heard.append((stage, done, total))

    manifest = tiny_archive(tmp_path / "t.tar.bz2")
    fetch(home=tmp_path / "home", archive=tmp_path / "t.tar.bz2", manifest=manifest,
          progress=progress)
    store = curvekit.open(tmp_path / "home")
    curvekit.report(store, tmp_path / "site", bootstrap=0, figures=False,
                    workloads=store.workloads()[:1], progress=progress)
    stages = list(dict.fromkeys(stage for stage, _, _ in heard))
    assert stages == ["verify", "convert", "workloads"]
    assert set(stages) <= set(STAGES)
    for stage in stages:  # each stage counts up
        done = [d for s, d, _ in heard if s == stage]
        assert done == sorted(done)
    assert heard[-1] == ("workloads", 1, 1)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(STAGES)), st.integers(0, 10**12),
       st.none() | st.integers(0, 10**12))
def test_a_stage_counter_reports_its_stage(stage: str, done: int, total: int | None) -> None:
    heard: list[tuple[str, int, int | None]] = []
    counter = stage_counter(lambda s, d, t: heard.append((s, d, t)), stage)
    assert counter is not None
    counter(done, total)
    assert heard == [(stage, done, total)]
    assert stage_counter(None, stage) is None


def test_run_defaults_its_trials_in_the_library() -> None:
    """The CLI passes no default of its own: the library picks 8 (or 1 seed with a scaling
    protocol)."""
    params = main.commands["run"].make_context("run", []).params
    assert params["trials"] is None
    assert inspect.signature(curvekit.run).parameters["trials"].default is None


# --- every option and argument says what it is for ----------------------------------

def _params(group: click.Group, prefix: tuple[str, ...] = ()
            ) -> Iterator[tuple[str, click.Parameter]]:
    """Every parameter of every command under ``group``, groups included, with its command."""
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        for param in command.params:
            yield " ".join(path), param
        if isinstance(command, click.Group):
            yield from _params(command, path)


PARAMS = list(_params(main))


def test_the_parameter_walk_sees_arguments_and_options() -> None:
    kinds = {type(p).__name__ for _, p in PARAMS}
    assert {"Argument", "Option"} <= kinds and len(PARAMS) > 100
    assert ("run", "seed") in {(c, p.name) for c, p in PARAMS}


@pytest.mark.parametrize(("command", "param"), PARAMS,
                         ids=[f"{c} {p.name}" for c, p in PARAMS])
def test_every_option_and_argument_has_help(command: str, param: click.Parameter) -> None:
    """`--help` and docs/cli.md say what every option and argument is for; a hidden option
    (a former spelling) is the only one left without."""
    if isinstance(param, click.Option) and param.hidden:
        return
    name = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
    assert (param.help or "").strip(), f"curvekit {command}: {name} has no help text"
