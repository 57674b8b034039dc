"""The project's static checks run with the test suite, so one command runs everything."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("argv", [
    [sys.executable, "-m", "ruff", "check", "curvekit", "tests", "benchmarks"],
    [sys.executable, "-m", "mypy", "curvekit"],
], ids=["ruff", "mypy"])
def test_static_checks(argv: list[str]) -> None:
    if shutil.which(argv[2]) is None and subprocess.run(
            [sys.executable, "-m", argv[2], "--version"], capture_output=True).returncode:
        pytest.skip(f"{argv[2]} not installed (pip install -e '.[dev]')")
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
