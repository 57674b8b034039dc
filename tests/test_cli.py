"""The CLI end to end on a generated archive with every quirk: fetch, verify, info."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.__main__ import BROKEN_PIPE, INTERRUPTED
from curvekit.cli import _readable, emit, main
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


def test_no_store_yet_also_offers_the_demo(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["info", "--home", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: no curvekit store at {tmp_path}")
    assert "`curvekit demo`" in result.stderr


# -- Ctrl-C ---------------------------------------------------------------------------------


def test_ctrl_c_in_a_command_exits_130_with_one_line(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("curvekit.store.catalog.info", interrupted)
    result = CliRunner().invoke(main, ["info", "--home", str(home)])
    assert result.exit_code == INTERRUPTED == 130
    assert (result.stdout, result.stderr) == ("", "Aborted.\n")


# A real SIGINT, delivered while the CLI's imports run: a finder that the import system
# asks first sends it when `module` is imported.
SIGINT_AT_IMPORT = """
import os, signal, sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            os.kill(os.getpid(), signal.SIGINT)
            signal.getsignal(signal.SIGINT)  # let the handler run before the import goes on
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["curvekit", *{argv!r}]
from curvekit.__main__ import entry
entry()
"""


@pytest.mark.parametrize("module, argv", [
    ("click", ["--version"]),        # the CLI module's own imports
    ("pandas", ["query", "select 1"]),  # deep inside a command's imports (polars → pandas)
    ("polars", ["info"]),
], ids=["click", "pandas", "polars"])
def test_ctrl_c_while_importing_exits_130_with_one_line(
        home: Path, module: str, argv: list[str]) -> None:
    code = SIGINT_AT_IMPORT.format(module=module, argv=[*argv, "--home", str(home)]
                                   if argv[0] != "--version" else argv)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(), timeout=60)
    assert (proc.returncode, proc.stderr, proc.stdout) == (130, "Aborted.\n", "")


# -- output ---------------------------------------------------------------------------------


def test_table_rounds_floats_for_reading_csv_and_json_keep_every_digit(home: Path) -> None:
    sql = "select 0.1::double + 0.2::double as x, 1 / 3 as third, 12345678.9::double as big, 7 as n"
    runner = CliRunner()
    table = runner.invoke(main, ["query", sql, "--home", str(home)]).stdout.splitlines()
    assert table[0].split() == ["x", "third", "big", "n"]
    assert table[2].split() == ["0.3", "0.333333", "1.23457e+07", "7"]
    csv = runner.invoke(main, ["query", sql, "--home", str(home), "--format", "csv"]).stdout
    assert csv.splitlines()[1] == f"{0.1 + 0.2!r},{1 / 3!r},12345678.9,7"
    rows = json.loads(runner.invoke(main, ["query", sql, "--home", str(home),
                                           "--format", "json"]).stdout)
    assert rows == [{"x": 0.1 + 0.2, "third": 1 / 3, "big": 12345678.9, "n": 7}]


finite = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.one_of(finite, st.sampled_from([math.nan, math.inf, -math.inf])),
                       min_size=1, max_size=5))
def test_table_cells_are_within_six_digits_and_csv_round_trips(values: list[float]) -> None:
    import polars as pl

    frame = pl.DataFrame({"v": values, "l": [values] * len(values)},
                         schema={"v": pl.Float64, "l": pl.List(pl.Float64)})
    runner = CliRunner()

    @click.command()
    @click.argument("fmt")
    def show(fmt: str) -> None:
        emit(frame, fmt)

    table = runner.invoke(show, ["table"]).stdout.splitlines()[2:]
    for line, value in zip(table, values, strict=True):
        cell = line.split()[0]
        assert len(cell.replace("-", "").replace(".", "").split("e")[0]) <= 6
        shown = float(cell)
        assert shown == value or (math.isnan(shown) and math.isnan(value)) or math.isclose(
            shown, value, rel_tol=5e-6)
        assert line.split()[1:] == [_readable(v) for v in values]
    csv = runner.invoke(show, ["csv"]).stdout.splitlines()[1:]
    for line, value in zip(csv, values, strict=True):
        read = float(line.split(",")[0])
        assert read == value or (math.isnan(read) and math.isnan(value))
        assert [float(x) for x in line.split(",")[1].split()] == pytest.approx(
            values, nan_ok=True, rel=0, abs=0)


def test_output_cut_short_by_its_reader_ends_quietly(home: Path) -> None:
    # Like `| head -1`, status 141 as git's. The table is written line by line, and 20,000
    # lines are more than a pipe holds: a write meets the closed pipe. info's few lines are
    # still buffered when the reader has already gone: the flush at exit meets it.
    for argv, lines in ((["query", "select range as i from range(20000)"], 1), (["info"], 0)):
        proc = subprocess.Popen([sys.executable, "-m", "curvekit", *argv, "--home", str(home)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
        assert proc.stdout is not None and proc.stderr is not None
        for _ in range(lines):
            proc.stdout.readline()
        proc.stdout.close()
        stderr = proc.stderr.read()
        assert (proc.wait(timeout=60), stderr) == (BROKEN_PIPE, b""), argv


# -- figures and hints ------------------------------------------------------------------------


@pytest.mark.parametrize("number", ["25", "0"])
def test_figure_out_of_range_names_the_range(tmp_path: Path, number: str) -> None:
    # No store here: the number is checked first.
    result = CliRunner().invoke(main, ["figure", number, "--home", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr == (f"Error: there is no figure {number}; "
                             "the paper's figures are 1–24\n")


def test_install_hints_match_the_readme() -> None:
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    assert 'pip install -e ".[train]"' in readme
    for path in [*(root / "curvekit").rglob("*.py"), *(root / "docs").glob("*.md")]:
        for hint in re.findall(r"pip install[^\n`]*\[(?:train|ray|dev)\][^\n`]*", path.read_text()):
            assert re.search(r'pip install -e "\.\[(train|ray|dev)\]"', hint), (path, hint)


def test_the_curvekit_script_is_the_guarded_entry_point() -> None:
    import tomllib

    from curvekit import __main__ as entry_module

    pyproject = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml")
                              .read_text())
    assert pyproject["project"]["scripts"]["curvekit"] == "curvekit.__main__:entry"
    assert callable(entry_module.entry)


def _env() -> dict[str, str]:
    """This checkout first on the path of a child interpreter."""
    root = str(Path(__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])])}
