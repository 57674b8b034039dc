"""Benchmark: the store's layout, today's (format 3: names as rows, a workload's
measurements in files of whole metrics) against a previous one, side by side in one run on
the same archive: by default format 1 (every metric and metaparameter a column); with
``--old-ref main`` (or any commit of format 2) format 2 (a measurements file per study).

The previous layout's code (default: the commit before ``store_format`` became 2) is
checked out into a temporary git worktree; each command runs in a fresh process with that
code or this checkout on the import path (``PYTHONPATH``), and the peak memory of its
process tree is sampled. For each layout:

* **conversion**: ``curvekit fetch --archive`` of the archive (wall time, peak memory), and
  the store's size on disk;
* **add**: ``curvekit add`` of a 3-row workload (one run, one evaluation per row) that brings
  a new metric name and a new metaparameter name; then of one that brings only names the
  store has; for each, the wall time, peak memory and how many of the store's existing data
  files the new snapshot rewrote (a file is rewritten when the new snapshot holds it under a
  new inode); then ``curvekit.remove_workload`` of the first (time, files rewritten);
* **queries**: ``steps_to_result`` and ``best`` on the largest workload (warm, in one
  process per layout), a store-wide ``curvekit query`` over one metric (each layout's own
  SQL for the same answer: per workload, the rows of ``val/classification_error`` below 0.3
  and their first step), and ``curvekit verify``; and again the add of the 3-row workload
  with new names, a save that replaces it with one more study (``add --replace``, as
  ``curvekit run`` saves after a round: the time, and how many files that were there
  before it, the workload's own included, it rewrote) and its removal (each round leaves
  the store as it was).

The machine may be shared, so the queries are measured **interleaved**: old, new, new, old,
old, new, ... (``--repeat`` rounds), each layout's median and the ratio of the medians
reported, with the load average sampled at every round; the CPU time (user and system, all
threads) of every call is recorded beside its wall time, since on a loaded machine the wall
time mostly measures waiting for a core. Conversions run once each, back to
back, with their CPU time too. ``--reuse`` measures the queries again on the homes a
``--keep`` run left.

Usage::

    python benchmarks/store_layout.py                      # the full-scale archive
    python benchmarks/store_layout.py --trial-fraction 0.1 # a quicker look
    python benchmarks/store_layout.py --archive full.tar.bz2 --keep  # an archive made earlier
    python benchmarks/store_layout.py --trial-fraction 0.02 --old-ref main  # against format 2

Results go to ``benchmarks/results/store-layout-<archive>.json``, or
``store-layout-<archive>-format<old>.json`` when the previous code is not of format 1.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, Run, archive, du, save, timed

ROOT = Path(__file__).resolve().parent.parent
ADDED = "bench/tiny/sgd"
SAME = "bench/same/sgd"
METRIC, GOAL = "val/classification_error", 0.3

QUERIES = {  # each layout's SQL for: per workload, rows of METRIC below GOAL, first step
    "old": ("select base_dir, model, optimizer, count(*) as n, min(step) as first "
            f"from measurements where \"{METRIC}\" < {GOAL} group by all order by all"),
    "new": ("select base_dir, model, optimizer, count(*) as n, min(step) as first "
            f"from measurements where metric = '{METRIC}' and value < {GOAL} "
            "group by all order by all"),
}


def _format(code: Path) -> int:
    """The store format a checkout of curvekit writes."""
    schema = json.loads((code / "data_manifest" / "store_schema.json").read_text())
    return int(schema["store_format"])

MEASURE = r"""
import json, sys, time, warnings
import curvekit
warnings.simplefilter("ignore")
home, workload, metric, goal = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
store = curvekit.open(home)
calls = {"steps_to_result": lambda: curvekit.steps_to_result(
             store, curvekit.Selection(workload, metric, goal), explain=False),
         "best": lambda: curvekit.best(
             store, curvekit.Selection(workload, metric), explain=False)}
answers = {name: call().write_csv() for name, call in calls.items()}  # warm
print(json.dumps(answers), flush=True)
for line in sys.stdin:
    name = line.strip()
    start, cpu = time.perf_counter(), time.process_time()
    again = calls[name]()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert again.write_csv() == answers[name]
    print(json.dumps([seconds, cpu]), flush=True)
"""

REMOVE = "import sys, curvekit; curvekit.remove_workload(sys.argv[1], sys.argv[2])"


def _old_commit() -> str:
    """The commit before ``store_format`` became 2 (the previous layout's code)."""
    found = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--reverse", "--format=%H", "-S", '"store_format": 2',
         "--", "data_manifest/store_schema.json"], capture_output=True, text=True, check=True)
    first = found.stdout.split()[0]
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", f"{first}^"],
                          capture_output=True, text=True, check=True).stdout.strip()


def _env(code: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(code)}


def _cli(label: str, code: Path, args: list[str]) -> Run:
    # from another folder: ``python -m`` puts the working folder first on the import path
    return timed(label, [sys.executable, "-m", "curvekit", *args], env=_env(code),
                 cwd=tempfile.gettempdir())


def _data_files(home: Path) -> dict[str, int]:
    snap = (home / "store").resolve()
    return {p.relative_to(snap).as_posix(): p.stat().st_ino for p in snap.rglob("*.parquet")}


def _rewritten(before: dict[str, int], home: Path, workload: str) -> int:
    """How many files of ``before`` outside ``workload`` the current snapshot holds under a
    new inode (rewritten rather than linked)."""
    folder = "/".join(f"{n}={v}" for n, v in zip(("base_dir", "model", "optimizer"),
                                                  workload.split("/"), strict=True))
    after = _data_files(home)
    return sum(1 for rel, inode in before.items()
               if f"/{folder}/" not in f"/{rel}" and after.get(rel) != inode)


def _logs(folder: Path, metric: str, parameter: str) -> Path:
    """One run of three evaluations with ``metric`` and a manifest with ``parameter``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.csv").write_text(f"step,{metric}\n0,0.9\n10,0.5\n20,0.25\n")
    (folder / "runs.toml").write_text(
        f'[[runs]]\nrun = "run.csv"\nbatch_size = 32\n'
        f'parameters = {{ learning_rate = 0.1, "{parameter}" = 3 }}\n')
    return folder


def _largest(home: Path, code: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "curvekit", "info", "--format", "json",
                          "--home", str(home)], env={**os.environ, **_env(code)},
                         capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    rows = json.loads(out.stdout)
    return str(max(rows, key=lambda r: r["measurements"])["workload"])


def one_layout(label: str, code: Path, path: Path, manifest: Path, work: Path
               ) -> dict[str, Any]:
    home = work / f"home-{label}"
    shutil.rmtree(home, ignore_errors=True)
    result: dict[str, Any] = {}
    result["convert"] = _cli(f"{label}: curvekit fetch", code, [
        "fetch", "--archive", str(path), "--manifest", str(manifest), "--home", str(home),
        "--force", "--quiet"])
    result["store_bytes"] = du(home / "store")
    for name, metric, parameter, key in (
            (ADDED, "val/brand_new_metric", "brand_new_parameter", "add_new_names"),
            (SAME, METRIC, "learning_rate_decay_steps", "add_known_names")):
        logs = _logs(work / f"logs-{key}", metric, parameter)
        before = _data_files(home)
        run = _cli(f"{label}: curvekit add ({key})", code, [
            "add", str(logs), "--name", name, "--manifest", str(logs / "runs.toml"),
            "--home", str(home)])
        result[key] = {"run": run, "files_rewritten": _rewritten(before, home, name),
                       "files_before": len(before)}
    before = _data_files(home)
    run = timed(f"{label}: remove_workload", [sys.executable, "-c", REMOVE, str(home), ADDED],
                env=_env(code), cwd=tempfile.gettempdir())
    result["remove"] = {"run": run, "files_rewritten": _rewritten(before, home, ADDED)}
    return result


def _plain(o: Any) -> Any:
    return asdict(o) if isinstance(o, Run) else str(o)


def _seconds(run: Any) -> float:
    return float(run.seconds if isinstance(run, Run) else run["seconds"])


def _cpu(run: Any) -> float:
    return float(run.cpu_seconds if isinstance(run, Run) else run.get("cpu_seconds", 0.0))


def _peak(run: Any) -> float:
    return float(run.peak_rss_mb if isinstance(run, Run) else run["peak_rss_mb"])


def _children_cpu() -> float:
    """CPU seconds (user and system) of the finished child processes so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _order(rounds: int) -> list[tuple[str, str]]:
    """old, new, new, old, old, new, ...: each layout goes first in half of the rounds."""
    return [("old", "new") if i % 2 == 0 else ("new", "old") for i in range(rounds)]


def _save_logs(folder: Path) -> Path:
    """The 3-row workload's run again, and a run at another batch size: what a runner's
    save after its next round brings (one study unchanged, one new)."""
    _logs(folder, "val/brand_new_metric", "brand_new_parameter")
    (folder / "run2.csv").write_text("step,val/brand_new_metric\n0,0.8\n10,0.4\n20,0.2\n")
    with open(folder / "runs.toml", "a") as toml:
        toml.write('[[runs]]\nrun = "run2.csv"\nbatch_size = 64\n'
                   'parameters = { learning_rate = 0.1, "brand_new_parameter" = 3 }\n')
    return folder


def _add_and_remove(label: str, code: Path, home: Path, work: Path
                    ) -> tuple[list[tuple[str, Run]], int]:
    """``curvekit add`` of the 3-row workload with new names, a save that replaces it with
    one more study (``add --replace``), then its removal: the store is left as it was.
    Also how many files that were there before the save it rewrote (the workload's own
    included)."""
    logs = _logs(work / "logs-add_new_names", "val/brand_new_metric", "brand_new_parameter")
    add = _cli(f"{label}: curvekit add", code, [
        "add", str(logs), "--name", ADDED, "--manifest", str(logs / "runs.toml"),
        "--home", str(home)])
    more = _save_logs(work / "logs-save")
    before = _data_files(home)
    save = _cli(f"{label}: curvekit add --replace", code, [
        "add", str(more), "--name", ADDED, "--manifest", str(more / "runs.toml"),
        "--replace", "--home", str(home)])
    after = _data_files(home)
    rewritten = sum(1 for rel, inode in before.items() if after.get(rel) != inode)
    remove = timed(f"{label}: remove_workload", [sys.executable, "-c", REMOVE, str(home), ADDED],
                   env=_env(code), cwd=tempfile.gettempdir())
    return [("add_new_names", add), ("save", save), ("remove", remove)], rewritten


def interleaved(codes: dict[str, Path], work: Path, rounds: int,
                workload: str | None) -> dict[str, Any]:
    """The queries of both layouts, measured in alternation (see the module docstring)."""
    homes = {label: work / f"home-{label}" for label in codes}
    target = workload or _largest(homes["new"], codes["new"])
    workers = {label: subprocess.Popen(
        [sys.executable, "-c", MEASURE, str(homes[label]), target, METRIC, str(GOAL)],
        env={**os.environ, **_env(code)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, cwd=tempfile.gettempdir()) for label, code in codes.items()}
    answers = {label: json.loads(w.stdout.readline()) for label, w in workers.items()}  # type: ignore[union-attr]
    kinds = ("steps_to_result", "best", "query", "verify", "add_new_names", "save", "remove")
    saved: dict[str, list[int]] = {"old": [], "new": []}  # files each save rewrote
    times: dict[str, dict[str, list[float]]] = {k: {"old": [], "new": []} for k in kinds}
    cpu: dict[str, dict[str, list[float]]] = {k: {"old": [], "new": []} for k in kinds}
    loads = []
    for first, second in _order(rounds):
        loads.append(os.getloadavg()[0])
        for name in ("steps_to_result", "best"):
            for label in (first, second):
                worker = workers[label]
                worker.stdin.write(name + "\n")  # type: ignore[union-attr]
                worker.stdin.flush()  # type: ignore[union-attr]
                wall, used = json.loads(worker.stdout.readline())  # type: ignore[union-attr]
                times[name][label].append(wall)
                cpu[name][label].append(used)
        for label in (first, second):
            before = _children_cpu()
            with open(work / f"query-{label}.csv", "w") as out:
                times["query"][label].append(timed(
                    f"{label}: curvekit query", [
                        sys.executable, "-m", "curvekit", "query", QUERIES[label], "--format",
                        "csv", "--home", str(homes[label])], env=_env(codes[label]),
                    stdout=out, cwd=tempfile.gettempdir()).seconds)
            cpu["query"][label].append(_children_cpu() - before)
        for label in (first, second):
            before = _children_cpu()
            times["verify"][label].append(_cli(f"{label}: curvekit verify", codes[label], [
                "verify", "--home", str(homes[label])]).seconds)
            cpu["verify"][label].append(_children_cpu() - before)
        for label in (first, second):  # the add of new names, a save, then its removal
            runs, rewritten = _add_and_remove(label, codes[label], homes[label], work)
            saved[label].append(rewritten)
            for kind, done in runs:
                times[kind][label].append(done.seconds)
                cpu[kind][label].append(done.cpu_seconds)
    for worker in workers.values():
        worker.stdin.close()  # type: ignore[union-attr]
        worker.wait()
    medians = {k: {label: statistics.median(v[label]) for label in v} for k, v in times.items()}
    cpu_medians = {k: {label: statistics.median(v[label]) for label in v}
                   for k, v in cpu.items()}
    return {"workload": target, "rounds": rounds, "load_1min": loads, "seconds": times,
            "cpu_seconds": cpu, "median_s": medians, "median_cpu_s": cpu_medians,
            "ratio_of_medians": {k: m["new"] / m["old"] for k, m in medians.items()},
            "cpu_ratio_of_medians": {k: m["new"] / m["old"] for k, m in cpu_medians.items()},
            "save_files_rewritten": saved,
            "same_answers": {
                "steps_to_result": answers["old"]["steps_to_result"]
                == answers["new"]["steps_to_result"],
                "best": answers["old"]["best"] == answers["new"]["best"],
                "query": (work / "query-old.csv").read_bytes()
                == (work / "query-new.csv").read_bytes()},
            "answers": answers["new"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trial-fraction", type=float, default=1.0)
    parser.add_argument("--archive", type=Path, help="an archive generated earlier (its "
                        "manifest beside it as ARCHIVE.manifest.json) instead of generating "
                        "one; the results are named after the archive's name")
    parser.add_argument("--repeat", type=int, default=6, help="interleaved rounds")
    parser.add_argument("--old-ref", help="the previous layout's commit (default: the "
                        "commit before store_format became 2)")
    parser.add_argument("--workload", help="the workload of the measurements (default: the "
                        "one with the most evaluations)")
    parser.add_argument("--keep", action="store_true", help="keep the homes under _work")
    parser.add_argument("--reuse", action="store_true", help="measure the queries again on "
                        "the homes a --keep run left (its conversion and add numbers kept)")
    args = parser.parse_args()
    name = "full" if args.trial_fraction == 1 else f"f{args.trial_fraction:g}"
    if args.archive:
        name = args.archive.name.split(".")[0]
    if args.archive:
        path = args.archive.resolve()
        manifest = path.with_name(path.name + ".manifest.json")
        if not (path.is_file() and manifest.is_file()):
            raise SystemExit(f"--archive {path}: expected the archive and {manifest.name} "
                             "beside it; generate one with curvekit generate-archive")
    else:
        path, manifest = archive(name, trial_fraction=args.trial_fraction, order="walk")
    old_ref = args.old_ref or _old_commit()
    old = Path(tempfile.mkdtemp(prefix="ck-layout-")) / "code"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), old_ref],
                   check=True, capture_output=True)
    old_format = _format(old)
    if old_format >= 2:  # names as rows there too: the same SQL
        QUERIES["old"] = QUERIES["new"]
        name += f"-format{old_format}"
    saved = Path(__file__).parent / "results" / f"store-layout-{name}.json"
    previous = json.loads(saved.read_text()) if args.reuse else {}
    work = WORK / f"layout-{name}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        results: dict[str, Any] = {"archive": str(path), "old_ref": old_ref,
                                   "old_format": old_format, "new_format": _format(ROOT),
                                   "cpus": os.cpu_count(), "load_before": os.getloadavg()}
        for label, code in (("old", old), ("new", ROOT)):
            if args.reuse:
                results[label] = {k: v for k, v in previous[label].items()
                                  if k not in ("measure", "query", "verify", "workload")}
            else:
                results[label] = one_layout(label, code, path, manifest, work)
            print(f"{label} converted", flush=True)
        results["interleaved"] = interleaved(
            {"old": old, "new": ROOT}, work, args.repeat, args.workload)
        results["load_after"] = os.getloadavg()
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                       capture_output=True)
    o, n, q = results["old"], results["new"], results["interleaved"]
    results["ratios_new_over_old"] = {
        "convert_time": _seconds(n["convert"]) / _seconds(o["convert"]),
        "convert_cpu_time": _cpu(n["convert"]) / max(1e-9, _cpu(o["convert"])),
        "convert_peak_memory": _peak(n["convert"]) / _peak(o["convert"]),
        "store_bytes": n["store_bytes"] / o["store_bytes"],
        "add_new_names_time": _seconds(n["add_new_names"]["run"])
        / _seconds(o["add_new_names"]["run"]),
        **q["ratio_of_medians"]}
    out = save(f"store-layout-{name}", results)
    for label in ("old", "new"):
        r = results[label]
        m = q["median_s"]
        print(f"{label}: convert {_seconds(r['convert']):.1f} s (CPU {_cpu(r['convert']):.1f} s)"
              f" {_peak(r['convert']):.0f} MB"
              f" | store {r['store_bytes'] / 1e6:.1f} MB"
              f" | add (new names) {_seconds(r['add_new_names']['run']):.2f} s "
              f"{_peak(r['add_new_names']['run']):.0f} MB, "
              f"{r['add_new_names']['files_rewritten']} of {r['add_new_names']['files_before']}"
              f" files rewritten | add (known names) "
              f"{_seconds(r['add_known_names']['run']):.2f} s"
              f" | remove {_seconds(r['remove']['run']):.2f} s"
              f" | steps {m['steps_to_result'][label] * 1e3:.0f} ms"
              f" best {m['best'][label] * 1e3:.0f} ms"
              f" | query {m['query'][label]:.2f} s | verify {m['verify'][label]:.2f} s"
              f" | add, interleaved {m['add_new_names'][label]:.2f} s"
              f" save {m['save'][label]:.2f} s"
              f" ({max(q['save_files_rewritten'][label])} files rewritten)"
              f" remove {m['remove'][label]:.2f} s")
    print("new / old: " + ", ".join(f"{k} {v:.2f}"
                                    for k, v in results["ratios_new_over_old"].items()))
    print("new / old, CPU time: " + ", ".join(f"{k} {v:.2f}"
                                              for k, v in q["cpu_ratio_of_medians"].items()))
    print(f"load average (1 min) per round: {q['load_1min']}")
    print(f"same answers: {q['same_answers']}; results in {out}")
    if not args.keep:
        for label in ("old", "new"):
            shutil.rmtree(work / f"home-{label}", ignore_errors=True)


if __name__ == "__main__":
    main()
