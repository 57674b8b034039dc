"""Every answer curvekit gives about a store, recorded so two versions can be compared.

``record`` runs, for every workload of a home: ``info`` (table, CSV, JSON), the default
goal's ``steps-to-result`` and ``best`` (table, CSV, JSON), ``fit --all`` (table, JSON),
every figure's Vega-Lite spec (``curvekit figures --format json``) and the report's data
(:func:`curvekit.reporting.data.workload_data` of every workload, as JSON), each as a file
under OUT. It runs curvekit as a command, so ``--code DIR`` runs another checkout of it
(``PYTHONPATH=DIR``), e.g. the previous commit in a temporary git worktree. ``compare``
says which files differ; the home's own path and snapshot name are written as ``<home>``
and ``<snapshot>``, the only things that may differ between two homes.

``side-by-side`` does it all in one run: it converts ARCHIVE (and installs the demo) into
a home with each version of the code, records both and compares them::

    python benchmarks/answers.py side-by-side --archive A.tar.bz2 --old-ref HEAD~1
    python benchmarks/answers.py record HOME OUT [--code DIR]
    python benchmarks/answers.py compare OUT_A OUT_B
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

REPORT_DATA = r"""
import json, sys
import polars as pl
from curvekit.reporting.data import workload_data
from curvekit.store.store import Store

def plain(value):
    if isinstance(value, pl.DataFrame):
        return {"columns": value.columns, "dtypes": [str(t) for t in value.dtypes],
                "rows": value.rows()}
    if hasattr(value, "__dataclass_fields__"):
        return {k: plain(getattr(value, k)) for k in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value

store = Store.open(sys.argv[1])
out = {w: plain(workload_data(store, w, bootstrap=int(sys.argv[2])))
       for w in store.workloads()}
print(json.dumps(out, indent=1, sort_keys=True, default=repr))
"""

GOALS = r"""
import json, sys
from curvekit.goals import default_goal
from curvekit.store.store import Store
store = Store.open(sys.argv[1])
goals = {}
for w in store.workloads():
    g = default_goal(store, w)
    goals[w] = [g.metric, g.goal, g.maximize, g.trials]
print(json.dumps(goals))
"""


def _env(code: Path | None) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "200"}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return env


def _run(argv: list[str], code: Path | None, ok: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run([sys.executable, *argv], env=_env(code), capture_output=True,
                          text=True, cwd=tempfile.gettempdir())
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout + (f"\n[stderr]\n{done.stderr}" if done.stderr else "") \
        + f"\n[exit {done.returncode}]\n"


def _cli(args: list[str], code: Path | None, ok: tuple[int, ...] = (0,)) -> str:
    return _run(["-m", "curvekit", *args], code, ok)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def record(home: Path, out: Path, code: Path | None, *, bootstrap: int = 20,
           figures: bool = True) -> None:
    """Write every answer about the store of ``home`` into the folder ``out``."""
    home, out = home.absolute(), out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    h = ["--home", str(home)]
    for fmt in ("table", "csv", "json"):
        (out / f"info.{fmt}").write_text(_cli(["info", "--format", fmt, *h], code))
    goals = json.loads(_run(["-c", GOALS, str(home)], code).split("\n[", 1)[0])
    (out / "goals.json").write_text(json.dumps(goals, indent=1) + "\n")
    for workload, (metric, goal, maximize, trials) in goals.items():
        sel = [workload, "--metric", metric, "--trials", str(trials),
               *(["--maximize"] if maximize else [])]
        for fmt in ("table", "csv", "json"):
            (out / f"steps-{_safe(workload)}.{fmt}").write_text(_cli(
                ["steps-to-result", *sel, "--goal", repr(goal), "--format", fmt, *h], code,
                ok=(0, 3)))
            (out / f"best-{_safe(workload)}.{fmt}").write_text(_cli(
                ["best", *sel, "--format", fmt, *h], code, ok=(0, 3)))
    for fmt in ("table", "json"):
        (out / f"fit-all.{fmt}").write_text(_cli(["fit", "--all", "--format", fmt, *h], code,
                                                 ok=(0, 1)))
    if figures:
        specs = Path(tempfile.mkdtemp(prefix="ck-answers-"))
        log = _cli(["figures", "--format", "json", "--out", str(specs), *h], code, ok=(0, 1))
        (out / "figures.log").write_text(log.replace(str(specs), "<figures>"))
        for path in sorted(specs.glob("*.json")):
            shutil.copy(path, out / f"figure-{path.name}")
        shutil.rmtree(specs)
    (out / "report-data.json").write_text(_run(["-c", REPORT_DATA, str(home), str(bootstrap)],
                                               code))
    _normalise(out, home)


def _normalise(out: Path, home: Path) -> None:
    """Write the home's path as ``<home>`` and snapshot names as ``<snapshot>``."""
    real = str(home.resolve())
    for path in out.iterdir():
        text = path.read_text()
        text = text.replace(real, "<home>").replace(str(home), "<home>")
        text = re.sub(r"<home>/stores/[^/\"'\s]+", "<home>/stores/<snapshot>", text)
        path.write_text(text)


def compare(a: Path, b: Path) -> list[str]:
    """The files of ``a`` and ``b`` that differ or that only one has."""
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    differ = []
    for name in names:
        pa, pb = a / name, b / name
        if not (pa.exists() and pb.exists()) or pa.read_bytes() != pb.read_bytes():
            differ.append(name)
    return differ


def _worktree(ref: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="ck-old-")) / "code"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(folder), ref],
                   check=True, capture_output=True)
    return folder


def side_by_side(archive: Path, old_ref: str, work: Path, bootstrap: int,
                 figures: bool) -> list[str]:
    """Convert ``archive`` and install the demo with the code at ``old_ref`` and with this
    checkout, record every answer of both and compare them."""
    archive, work = archive.absolute(), work.absolute()
    old = _worktree(old_ref)
    try:
        differ = []
        for label, code in (("old", old), ("new", ROOT)):
            home = work / f"home-{label}"
            shutil.rmtree(home, ignore_errors=True)
            manifest = Path(f"{archive}.manifest.json")
            _cli(["fetch", "--archive", str(archive), "--manifest", str(manifest), "--home",
                  str(home), "--quiet"], code)
            record(home, work / f"answers-{label}", code, bootstrap=bootstrap, figures=figures)
            demo = work / f"demo-{label}"
            shutil.rmtree(demo, ignore_errors=True)
            _cli(["demo", "--home", str(demo)], code)
            record(demo, work / f"demo-answers-{label}", code, bootstrap=bootstrap,
                   figures=False)
        differ += [f"archive: {n}" for n in compare(work / "answers-old", work / "answers-new")]
        differ += [f"demo: {n}" for n in compare(work / "demo-answers-old",
                                                 work / "demo-answers-new")]
        return differ
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                       capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("home", type=Path)
    rec.add_argument("out", type=Path)
    rec.add_argument("--code", type=Path)
    rec.add_argument("--bootstrap", type=int, default=20)
    rec.add_argument("--no-figures", action="store_true")
    cmp = sub.add_parser("compare")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    both = sub.add_parser("side-by-side")
    both.add_argument("--archive", type=Path, required=True)
    both.add_argument("--old-ref", default="HEAD~1")
    both.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "answers")
    both.add_argument("--bootstrap", type=int, default=20)
    both.add_argument("--no-figures", action="store_true")
    args = parser.parse_args()
    if args.command == "record":
        record(args.home, args.out, args.code, bootstrap=args.bootstrap,
               figures=not args.no_figures)
        return
    if args.command == "compare":
        differ = compare(args.a, args.b)
    else:
        args.work.mkdir(parents=True, exist_ok=True)
        differ = side_by_side(args.archive, args.old_ref, args.work, args.bootstrap,
                              not args.no_figures)
    for name in differ:
        print(f"differs: {name}")
    print("identical" if not differ else f"{len(differ)} answers differ")
    raise SystemExit(1 if differ else 0)


if __name__ == "__main__":
    main()
