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


def _python_blocks(page: Path) -> list[str]:
    import re

    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


def test_the_user_install_has_what_the_documented_examples_import() -> None:
    """README: `pip install -e .` is enough for every example (pandas included): each
    package a README or docs example imports, or needs for `.to_pandas()`, is one of the
    core dependencies, not only of an extra."""
    import ast
    import re
    import tomllib

    project = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]
    core = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower().replace("-", "_")
            for d in project["dependencies"]}
    missing = set()
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for block in _python_blocks(page):
            tree = ast.parse(block)
            needed = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                      for a in n.names}
            needed |= {n.module.split(".")[0] for n in ast.walk(tree)
                       if isinstance(n, ast.ImportFrom) and n.module}
            if any(isinstance(n, ast.Attribute) and n.attr == "to_pandas"
                   for n in ast.walk(tree)):
                needed.add("pandas")
            missing |= {(page.name, m) for m in needed - core - {"curvekit"}
                        if m not in sys.stdlib_module_names}
    assert "pandas" in core and missing == set()


@pytest.mark.slow
def test_the_readme_says_exactly_what_skips_without_what(tmp_path: Path) -> None:
    """README, Quick start, and docs/security.md, Skips: the number of tests that skip
    without Chromium, without lbzip2 and without the corpus of real logs, as the suite's
    own markers count them (with the corpus made absent)."""
    import re

    text = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    said = {
        "Chromium": re.search(r"^\| Chromium \| the report's (\d+) browser tests \|", text, re.M),
        "lbzip2": re.search(r"^\| lbzip2 \| (\d+) decompression tests \|", text, re.M),
        "corpus": re.search(r"^\| the corpus of real logs \| `tests/test_reallogs.py`: (\d+) "
                            r"skips", text, re.M),
        "total": re.search(r"the suite ends with (\d+) skips", text),
    }
    assert all(said.values()), said
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         str(README.parent / "tests")], capture_output=True, text=True, cwd=README.parent,
        env={**os.environ, "CURVEKIT_REALLOGS": str(tmp_path / "absent")})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    counted = re.search(r"need a program pip cannot install: Chromium (\d+), lbzip2 (\d+)",
                        proc.stdout)
    corpus = re.search(r"SKIPPED \[(\d+)\] tests/test_reallogs\.py", proc.stdout)
    assert counted and corpus, proc.stdout[-3000:]
    counts = {"Chromium": int(counted[1]), "lbzip2": int(counted[2]), "corpus": int(corpus[1])}
    stated = {k: int(m[1]) for k, m in said.items() if m}
    assert stated == {**counts, "total": sum(counts.values())}
