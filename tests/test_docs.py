"""The documentation stays in step with the code."""

from __future__ import annotations

from pathlib import Path

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
    readme = README.read_text()
    for command in ('pip install -e ".[dev]"', "python -m pytest"):
        assert command in readme
    assert 'pip install -q -e ".[dev]"' in ci
    assert ci.strip().splitlines()[-1] == "python -m pytest"
