"""The package's floors, checked on its source: imports only go downward.

Every module of ``curvekit`` is parsed with :mod:`ast`; its imports of ``curvekit``
modules, at the top AND inside functions, are the edges of a module graph. Imports under
``if TYPE_CHECKING:`` are left out: they never run, so they cannot make a cycle or reach
up a floor at run time. ``from curvekit.x import y`` counts as an import of the module
``curvekit.x.y`` when that is a module, else of ``curvekit.x``; importing a submodule's
parent package implicitly (Python runs its ``__init__``) is not an edge.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "curvekit"

GROUND = {"curvekit", "curvekit.errors", "curvekit.records", "curvekit.names",
          "curvekit.values", "curvekit.structured", "curvekit.home", "curvekit.selection",
          "curvekit._resources", "curvekit._version", "curvekit._exits", "curvekit.progress",
          "curvekit.noise", "curvekit._processes", "curvekit.outputs"}
"""The ground floor: what anything may import (``curvekit`` itself is lazy)."""
RELEASE_READERS = {"curvekit.store.build", "curvekit.ingest.release", "curvekit.store.fetch",
                   "curvekit.store.pd1"}
"""The only modules above ``release/`` that read the archive (the converters of the release
and of PD1, the release importer of ``curvekit add``, and ``fetch``'s orchestration)."""


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


@cache
def imports(module: str) -> frozenset[tuple[str, str]]:
    """(imported module, imported name or "") of every run-time import in ``module``."""
    path = modules()[module]
    return imports_in(path.read_text(), module, package=path.name == "__init__.py")


def imports_in(source: str, module: str, *, package: bool = False
               ) -> frozenset[tuple[str, str]]:
    """The run-time imports of ``source``, the text of ``module``."""
    tree = ast.parse(source)
    hidden = {id(sub) for node in ast.walk(tree) if isinstance(node, ast.If)
              and _type_checking(node) for stmt in node.body for sub in ast.walk(stmt)}
    here = module.split(".") if package else module.split(".")[:-1]
    out: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            out.update((a.name, "") for a in node.names if a.name.split(".")[0] == "curvekit")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here[: len(here) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if base.split(".")[0] != "curvekit":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add((full, "") if full in modules() else (base, alias.name))
    return frozenset(out)


def edges(module: str) -> set[str]:
    return {target for target, _ in imports(module) if target in modules() and target != module}


def _below(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_the_graph_sees_function_level_imports() -> None:
    # fetch imports the converter at the top, the CLI imports fetch inside a command
    assert "curvekit.store.build" in edges("curvekit.store.fetch")
    assert "curvekit.store.fetch" in edges("curvekit.cli")


def test_release_imports_only_the_ground_floor() -> None:
    bad = {m: sorted(t for t in edges(m) if not _below(t, "curvekit.release") and t not in GROUND)
           for m in modules() if _below(m, "curvekit.release")}
    assert {m: t for m, t in bad.items() if t} == {}


def test_release_never_imports_the_store() -> None:
    bad = {m: sorted(t for t in edges(m) if _below(t, "curvekit.store"))
           for m in modules() if _below(m, "curvekit.release")}
    assert {m: t for m, t in bad.items() if t} == {}


def test_only_the_converter_the_release_importer_and_fetch_read_the_archive() -> None:
    # release.manifest describes the release (what verify and the paper goals compare
    # with) and release.synthetic writes archives in its layout (generate-archive), reading
    # none; the readers (archive, tarstream, csvparse) and download are for the doors that
    # bring the release in.
    # The registry of releases (registry, about, batch_science) describes them and
    # pd1_synthetic writes PD1 look-alikes, reading none.
    readers = {m for m in modules() if _below(m, "curvekit.release")} - {
        "curvekit.release", "curvekit.release.manifest", "curvekit.release.synthetic",
        "curvekit.release.registry", "curvekit.release.about", "curvekit.release.batch_science",
        "curvekit.release.pd1_synthetic"}
    bad = {m: sorted(edges(m) & readers) for m in modules()
           if not _below(m, "curvekit.release") and m not in RELEASE_READERS}
    assert {m: t for m, t in bad.items() if t} == {}


def test_records_come_from_records() -> None:
    # studies, trials and statuses are spoken of through curvekit.records, never through
    # the archive reader or the manifest that happen to use them too
    record_names = {"StudyKey", "StudyRecord", "TrialRecord", "STATUSES", "Workload"}
    bad = sorted(f"{m}: {name} from {target}" for m in modules()
                 for target, name in imports(m)
                 if name in record_names and target != "curvekit.records")
    assert bad == []


def test_the_store_never_imports_measurements() -> None:
    bad = {m: sorted(t for t in edges(m) if _below(t, "curvekit.measure"))
           for m in modules() if _below(m, "curvekit.store")}
    assert {m: t for m, t in bad.items() if t} == {}


def test_the_ground_floor_imports_only_itself() -> None:
    bad = {m: sorted(edges(m) - GROUND) for m in GROUND - {"curvekit"} if m in modules()}
    assert {m: t for m, t in bad.items() if t} == {}


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(graph[node]):
                work.append((node, i + 1))
                nxt = graph[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return out


def test_no_import_cycles() -> None:
    assert cycles({m: sorted(edges(m)) for m in modules()}) == []


@pytest.mark.parametrize("source", [
    "from curvekit.store import layout\n",
    "def f():\n    from curvekit.store.layout import TABLES\n",
    "def f():\n    import curvekit.store.layout\n",
    "from ..store import layout\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\n"
    "def f():\n    from curvekit.store.layout import TABLES\n",
])
def test_an_import_up_a_floor_is_seen_anywhere(source: str) -> None:
    found = {t for t, _ in imports_in(source, "curvekit.release.archive")}
    assert found & {"curvekit.store.layout", "curvekit.store"}


def test_type_checking_imports_are_left_out() -> None:
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
              "    from curvekit.store.store import Store\n")
    assert imports_in(source, "curvekit.measure") == frozenset()


def test_a_cycle_is_found() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"], "e": []}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": ["b"], "b": []}) == []


def test_the_package_holds_no_test_configuration_or_test_helpers() -> None:
    """``help(curvekit)`` lists what a user imports: the suite's conftest lives beside the
    package, and the archive generator is ``curvekit.release.synthetic``, a feature
    (``curvekit generate-archive``), not a test helper."""
    import pydoc

    import curvekit

    bad = sorted(m for m in modules() if m.rsplit(".", 1)[-1] in ("conftest", "testing", "tests")
                 or m.rsplit(".", 1)[-1].startswith("test_"))
    assert bad == []
    contents = pydoc.render_doc(curvekit, renderer=pydoc.plaintext)
    listed = contents.split("PACKAGE CONTENTS", 1)[1].split("\n\n", 1)[0].split()
    assert "release (package)" in " ".join(listed)
    assert not {"conftest", "testing"} & set(listed), listed
