"""The documentation stays in step with the code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from curvekit.cli import main
from curvekit.store.layout import store_schema

DOCS = Path(__file__).resolve().parent.parent / "docs"
README = DOCS.parent / "README.md"


def test_store_page_documents_every_column() -> None:
    page = (DOCS / "store.md").read_text()
    for name, table in store_schema()["tables"].items():
        assert f"## `{name}`" in page
        for column in table["columns"]:
            assert f"| `{column['name']}` | {column['type']} |" in page


def test_every_command_is_documented() -> None:
    text = README.read_text() + "".join(p.read_text() for p in DOCS.glob("*.md"))
    for name, command in main.commands.items():
        assert f"curvekit {name}" in text, f"`curvekit {name}` is not in README.md or docs/"
        assert command.help, name
        result = CliRunner().invoke(main, [name, "--help"])
        assert result.exit_code == 0


def test_readme_test_command_is_what_ci_runs() -> None:
    ci = (DOCS.parent / ".ci" / "run").read_text()
    quick_start = README.read_text().split("## Quick start", 1)[1]
    block = quick_start.split("```bash\n", 1)[1].split("```", 1)[0]
    assert block.splitlines() == ['pip install -e ".[dev]"', "python -m pytest"]
    # CI runs those two commands, word for word, and no other pip or python command.
    commands = [line.strip() for line in ci.splitlines()
                if line.strip().startswith(("pip", "python"))]
    assert commands == block.splitlines()
    assert ci.strip().splitlines()[-2:] == block.splitlines()


def test_cli_reference_is_generated_from_the_commands() -> None:
    from curvekit.clidoc import cli_reference

    assert (DOCS / "cli.md").read_text() == cli_reference(), (
        "docs/cli.md is stale: run `python -m curvekit.clidoc > docs/cli.md`")
    for name, command in main.commands.items():
        assert f"## curvekit {name}" in cli_reference()
        for sub in getattr(command, "commands", {}):
            assert f"## curvekit {name} {sub}" in cli_reference()


def test_api_reference_covers_every_public_name() -> None:
    import inspect

    import curvekit

    page = (DOCS / "api.md").read_text()
    for name in curvekit.__all__:
        obj = getattr(curvekit, name)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        module = obj.__module__
        assert f"::: {module}.{obj.__qualname__}\n" in page or f"::: {module}\n" in page, (
            f"curvekit.{name} ({module}) is missing from docs/api.md")


def test_documentation_site_builds_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=DOCS.parent, capture_output=True,
                          text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").is_file()
    assert (tmp_path / "site" / "cli" / "index.html").is_file()


def test_no_docstring_example_is_skipped_entirely() -> None:
    """A docstring whose every example is ``+SKIP`` shows up as a skip in the suite's
    report; the only skips there should be programs pip cannot install. Show code that
    cannot run here as a plain ``::`` block instead."""
    import doctest
    import importlib
    import importlib.util
    import pkgutil

    import curvekit

    skipped = []
    finder = doctest.DocTestFinder()
    for info in pkgutil.walk_packages(curvekit.__path__, "curvekit."):
        if info.name.endswith("__main__") or (
                info.name in ("curvekit.runner.train", "curvekit.runner.workloads",
                              "curvekit.runner.batched")
                and importlib.util.find_spec("torch") is None):
            continue
        for test in finder.find(importlib.import_module(info.name)):
            if test.examples and all(e.options.get(doctest.SKIP) for e in test.examples):
                skipped.append(test.name)
    assert not skipped


def test_demo_examples_use_the_demo_goal() -> None:
    """Every command line on the demo's workloads, in the README and the docs, asks for the
    goal the demo records (so the numbers a reader gets match the ones the docs show)."""
    import re

    from curvekit.runner.demo import DEMO_GOAL

    metric, goal = DEMO_GOAL
    pages = [README, *sorted(DOCS.glob("*.md"))]
    seen = 0
    for page in pages:
        # a command and its continuation lines, joined
        text = page.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            if "curvekit " in line and " demo/" in line and "--goal" in line:
                seen += 1
                assert f"--metric {metric}" in line, (page.name, line)
                found = re.search(r"--goal (\S+)", line)
                assert found and float(found[1]) == goal, (page.name, line)
    assert seen >= 2
