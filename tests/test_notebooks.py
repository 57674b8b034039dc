"""The notebooks in analyses/ run top to bottom."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.patience import PATIENCE

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ANALYSES = Path(__file__).resolve().parent.parent / "analyses"


@pytest.mark.parametrize("path", sorted(ANALYSES.glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CURVEKIT_HOME", str(tmp_path / "empty-home"))
    notebook = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(notebook, timeout=PATIENCE, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
