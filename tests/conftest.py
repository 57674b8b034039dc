"""Shared fixtures: small archives built member by member, and stores converted from them."""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import shutil
import tarfile
from collections.abc import Callable, Generator, Sequence
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests check values, not speed: a loaded CI machine must not fail them on time.
# By default they draw the same examples on every run (derandomize), so that a run of the
# suite says the same thing wherever it runs; `python -m pytest --hypothesis-profile
# explore` draws new examples each run (1,000 a property where a test sets no number of its
# own), to look for what the fixed draws miss (a failure it finds is pinned with @example
# once fixed).
settings.register_profile("curvekit", deadline=None, derandomize=True)
settings.register_profile("explore", deadline=None, derandomize=False,
                          max_examples=1000)
settings.load_profile("curvekit")

ROOT = "batch_science"

# The dev extra installs every package the suite imports; a module-level
# pytest.importorskip only fires in an environment made some other way, so its skip
# reason says how to get what is missing.
HOW_TO_INSTALL = ' (pip install -e ".[dev]" installs it)'


def _say_how_to_install(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and isinstance(report.longrepr, tuple):
        path, line, reason = report.longrepr
        if "could not import" in reason and HOW_TO_INSTALL not in reason:
            report.longrepr = (path, line, reason + HOW_TO_INSTALL)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector
                               ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    _say_how_to_install(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _say_how_to_install(report)
    return report

# -- what pip cannot install ------------------------------------------------------------
# A test that needs a program pip cannot install carries its marker; this file is the one
# place that skips it when the program is missing, saying how to get it. README.md states
# how many tests each marker holds, and tests/test_docs.py checks that against them.

def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable the browser tests drive, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


NEEDS: dict[str, tuple[str, Callable[[], object], str]] = {
    "needs_chromium": ("Chromium", find_chromium,
                       "no Chromium on this machine: apt install chromium"),
    "needs_lbzip2": ("lbzip2", lambda: shutil.which("lbzip2"),
                     "lbzip2 not installed: apt install lbzip2"),
}
"""Marker → (program, how to find it, the skip's reason when it is missing)."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker, (_, find, reason) in NEEDS.items():
        if item.get_closest_marker(marker) is not None and not find():
            pytest.skip(reason)


BROWSER_FIXTURES = {"browser", "browser_page"}
"""The fixtures that start Chromium (tests/test_report*.py)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    unmarked = [i.nodeid for i in items
                if BROWSER_FIXTURES & set(getattr(i, "fixturenames", ()))
                and i.get_closest_marker("needs_chromium") is None]
    if unmarked:
        raise pytest.UsageError("a test that drives Chromium carries "
                                f"@pytest.mark.needs_chromium: {', '.join(unmarked)}")


def pytest_report_collectionfinish(config: pytest.Config, start_path: Path,
                                   items: Sequence[pytest.Item]) -> list[str]:
    """With --collect-only, how many tests need each program pip cannot install."""
    if not config.option.collectonly:
        return []
    counts = (f"{program} {sum(1 for i in items if i.get_closest_marker(marker))}"
              for marker, (program, _, _) in NEEDS.items())
    return [f"tests that need a program pip cannot install: {', '.join(counts)}"]


Members = dict[str, bytes]


def study_json(batch_size: int, train_steps: int = 1000, **extra: object) -> bytes:
    return json.dumps({
        "batch_size": batch_size, "dataset": "mnist", "model": "fc_1024", "optimizer": "sgd",
        "early_stopping": False, "train_steps": train_steps,
        "parameter_configs": {"learning_rate": {"type": "DOUBLE", "min_value": 1e-3,
                                                "max_value": 10.0, "scale": "LOG_SCALE"}},
        **extra,
    }).encode()


def metadata_json(trial_id: int, status: str = "COMPLETE", steps: int = 1000,
                  **params: float) -> bytes:
    return json.dumps({"trial_id": trial_id, "status": status, "steps": steps,
                       "parameters": params or {"learning_rate": 0.1},
                       "_internal_study_name": "x", "_internal_trial_id": 7}).encode()


def small_members(workload: str = "mnist/fc_1024/sgd", batch_sizes: tuple[int, ...] = (8, 64),
                  trials: tuple[int, ...] = (1, 2)) -> Members:
    """A well-formed miniature release: every study with two trials of three rows."""
    members: Members = {}
    for bs in batch_sizes:
        base = f"{ROOT}/{workload}/{bs}"
        members[f"{base}/study.json"] = study_json(bs)
        for t in trials:
            members[f"{base}/{t}/metadata.json"] = metadata_json(t, learning_rate=0.1 * t)
            members[f"{base}/{t}/measurements.csv"] = (
                b"step,val/classification_error\n0,0.9\n100,0.5\n200,0.25\n")
    return members


def write_archive(path: Path, members: Members,
                  special: Callable[[tarfile.TarFile], None] | None = None) -> Path:
    """Write ``members`` (name → bytes) as a .tar.bz2; ``special`` may add odd members."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if special is not None:
            special(tar)
    path.write_bytes(bz2.compress(raw.getvalue()))
    return path


def snapshot(home: Path) -> dict[str, str]:
    """Every file under ``home`` (symlinks resolved) with its sha256, plus the store link."""
    out = {p.relative_to(home).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
           for p in sorted(home.rglob("*")) if p.is_file() and p.name != ".lock"}
    link = home / "store"
    out["<link>"] = str(link.readlink()) if link.is_symlink() else ""
    return out


@pytest.fixture
def make_archive(tmp_path: Path) -> Callable[..., Path]:
    counter = iter(range(10**6))

    def make(members: Members | None = None,
             special: Callable[[tarfile.TarFile], None] | None = None) -> Path:
        path = tmp_path / f"archive-{next(counter)}.tar.bz2"
        return write_archive(path, small_members() if members is None else members, special)

    return make


@pytest.fixture(scope="session")
def converted_home(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """Make a home holding a store converted from a generated archive in the release layout.

    ``converted_home()`` converts :func:`curvekit.release.synthetic.tiny_archive` (four
    workloads at two batch sizes, every quirk of the release);
    ``converted_home(workloads, max_trials=N)``
    the named workloads of the full-scale generator, at most N trials per study and
    ``evals_scale`` of its evaluation rows. Every call converts into a fresh folder, so a
    test may change the home it gets; the archive lies beside it (``home.parent``), named
    ``tiny.tar.bz2`` or ``a.tar.bz2``.
    """
    from curvekit.release.synthetic import generate_archive, tiny_archive
    from curvekit.store.build import convert

    def make(workloads: Sequence[str] | None = None, *, max_trials: int | None = None,
             evals_scale: float = 0.1, name: str = "home") -> Path:
        tmp = tmp_path_factory.mktemp(name)
        archive = tmp / ("tiny.tar.bz2" if workloads is None else "a.tar.bz2")
        if workloads is None:
            manifest = tiny_archive(archive)
        else:
            manifest = generate_archive(archive, workloads=list(workloads),
                                        max_trials_per_study=max_trials,
                                        evals_scale=evals_scale, jobs=1)
        convert(archive, tmp / "home", manifest=manifest)
        return tmp / "home"

    return make
