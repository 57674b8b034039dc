"""Helpers for the benchmark scripts: timing whole commands with the peak memory of their
process tree, and cached generated archives."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

WORK = Path(os.environ.get("CURVEKIT_BENCH_DIR", Path(__file__).parent / "_work"))


@dataclass
class Run:
    """One timed command."""

    label: str
    seconds: float
    peak_rss_mb: float
    returncode: int
    cpu_seconds: float = 0.0
    """User and system CPU time of the command's process tree (its waited-for children)."""


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return out


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def timed(label: str, argv: list[str] | str, *, shell: bool = False,
          env: dict[str, str] | None = None, stdout: Any = subprocess.DEVNULL,
          cwd: str | Path | None = None) -> Run:
    """Run a command, timing it and sampling the RSS of its whole process tree."""
    start = time.perf_counter()
    cpu = _children_cpu()
    proc = subprocess.Popen(argv, shell=shell, env={**os.environ, **(env or {})},
                            stdout=stdout, stderr=subprocess.PIPE, cwd=cwd)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, sum(_rss_kb(p) for p in _tree(proc.pid)))
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode:
        raise SystemExit(f"{label} failed ({proc.returncode}): {err[-2000:]}")
    return Run(label, seconds, peak / 1024, proc.returncode, _children_cpu() - cpu)


def _children_cpu() -> float:
    """CPU seconds (user and system) of this process's finished children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def du(path: Path) -> int:
    """Bytes of the files under ``path`` (following a symlinked root)."""
    root = path.resolve()
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def archive(name: str, **options: Any) -> tuple[Path, Path]:
    """A generated archive and its manifest, made once and cached under WORK."""
    from curvekit.release.synthetic import generate_archive, write_manifest

    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"{name}.tar.bz2"
    manifest = WORK / f"{name}.tar.bz2.manifest.json"
    if not (path.exists() and manifest.exists()):
        start = time.perf_counter()
        m = generate_archive(path, **options)
        write_manifest(m, manifest)
        print(f"generated {path} in {time.perf_counter() - start:.0f} s", flush=True)
    return path, manifest


def save(name: str, payload: dict[str, Any]) -> Path:
    """Write a benchmark's results as JSON under benchmarks/results/."""
    out = Path(__file__).parent / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)

    def plain(o: Any) -> Any:
        return asdict(o) if isinstance(o, Run) else str(o)

    out.write_text(json.dumps(payload, indent=1, default=plain) + "\n")
    return out
